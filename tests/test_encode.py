"""The generic JSON encoder (tracelens.results.encode): field order, declared rounding,
skipped and renamed fields, frames as rows, NaN as null."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import polars as pl
import pytest

from tracelens.results.encode import encode, rounded, to_json


@dataclass(frozen=True)
class Inner:
    ns: int
    share: float = field(metadata=rounded(3))


@dataclass(frozen=True)
class Outer:
    name: str
    rate: float = field(metadata=rounded(sig=3))
    parts: tuple[Inner, ...] = ()
    rows: pl.DataFrame = field(default_factory=pl.DataFrame)
    hidden: int = field(default=0, metadata={"json": False})
    key: int = field(default=1, metadata={"json_name": "renamed"})
    missing: float | None = None


def test_encode_follows_the_declared_fields() -> None:
    o = Outer("x", 123456.789, (Inner(5, 0.123456), Inner(6, float("nan"))),
              pl.DataFrame({"a": [1, 2]}), hidden=9, missing=float("inf"))
    assert encode(o) == {"name": "x", "rate": 123000.0,
                         "parts": [{"ns": 5, "share": 0.123}, {"ns": 6, "share": None}],
                         "rows": [{"a": 1}, {"a": 2}], "renamed": 1, "missing": None}
    assert list(json.loads(to_json(o))) == ["name", "rate", "parts", "rows", "renamed",
                                            "missing"]


def test_an_unknown_type_is_an_error_not_a_string() -> None:
    with pytest.raises(TypeError):
        encode(object())
