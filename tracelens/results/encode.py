"""One generic JSON encoder for typed results (issue 26): the documented JSON is written
from the result types themselves, so a new analysis writes no JSON code.

A frozen dataclass becomes an object of its fields in declaration order; a polars frame a
list of row objects; tuples and lists arrays; NaN and infinities ``null`` (JSON has none).
A field declares how it is written in its metadata:

- ``field(metadata=rounded(6))``: a float rounded to 6 decimals (``sig=7``: significant
  digits) -- rounding happens here only, results keep the values as computed;
- ``metadata={"json": False}``: not written (internal detail kept on the result);
- ``metadata={"json_name": "x"}``: written under another key.

:func:`to_json` is what ``--format json`` prints: ``json.dumps(encode(result), indent=2)``.
"""

from __future__ import annotations

import dataclasses
import json
import math
from enum import Enum
from typing import Mapping

import polars as pl

JSONValue = None | bool | int | float | str | list["JSONValue"] | dict[str, "JSONValue"]


def rounded(decimals: int | None = None, sig: int | None = None) -> dict[str, int | None]:
    """Field metadata: write this float rounded to ``decimals`` places or ``sig``
    significant digits."""
    return {"round": decimals, "sig": sig}


def _round(x: float, decimals: int | None, sig: int | None) -> float:
    if sig is not None and x != 0:
        return round(x, sig - 1 - int(math.floor(math.log10(abs(x)))))
    return round(x, decimals) if decimals is not None else x


def _field(value: object, meta: Mapping[str, object]) -> JSONValue:
    decimals, sig = meta.get("round"), meta.get("sig")
    if (decimals is not None or sig is not None) and isinstance(value, float) \
            and math.isfinite(value):
        return _round(value, decimals, sig)  # type: ignore[arg-type]
    if (decimals is not None or sig is not None) and isinstance(value, (tuple, list)):
        return [_field(v, meta) for v in value]
    return encode(value)


def encode(value: object) -> JSONValue:
    """``value`` as plain JSON values (module doc)."""
    if value is None or isinstance(value, (bool, int, str)):
        return value  # type: ignore[return-value]
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Enum):
        return encode(value.value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {str(f.metadata.get("json_name", f.name)): _field(getattr(value, f.name),
                                                                  f.metadata)
                for f in dataclasses.fields(value) if f.metadata.get("json", True)}
    if isinstance(value, pl.DataFrame):
        return [encode(row) for row in value.to_dicts()]
    if isinstance(value, Mapping):
        return {str(k): encode(v) for k, v in value.items()}
    if isinstance(value, (tuple, list)):
        return [encode(v) for v in value]
    raise TypeError(f"cannot encode {type(value).__name__} as JSON")


def to_json(result: object) -> str:
    """The JSON a command prints for ``result`` (indented, NaN-free)."""
    return json.dumps(encode(result), indent=2, allow_nan=False)
