"""The generic JSON encoder (tracelens.results.encode): field order, declared rounding,
skipped and renamed fields, frames as rows, NaN as null."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import NamedTuple

import orjson
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tracelens.results.encode as encode_module
from tracelens.results.encode import (blank_as_null, converted, encode, flattened, json_bytes,
                                      optional, renamed, rounded, to_json)


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


@dataclass(frozen=True)
class Rate:
    value: float | None = field(metadata=rounded(1) | renamed("rate_gb_per_s"))


class Key(NamedTuple):
    host: str
    device: int


@dataclass(frozen=True)
class Flags:
    on: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.on)


@dataclass(frozen=True)
class Declared:
    name: str
    rate: Rate = field(metadata=flattened())
    keys: tuple[Key, ...] = ()
    note: str = field(default="", metadata=converted(blank_as_null))
    twice: int = field(init=False)
    flags: Flags = field(default_factory=Flags, metadata=optional())
    extra: Rate | None = field(default=None, metadata=optional() | flattened())
    ratio: int = field(default=1, metadata=rounded(6))

    def __post_init__(self) -> None:
        object.__setattr__(self, "twice", 2 * len(self.name))


def test_declared_keys_flatten_convert_and_leave_out_what_is_unset() -> None:
    d = Declared("ab", Rate(1.26), (Key("h", 3),))
    assert encode(d) == {"name": "ab", "rate_gb_per_s": 1.3, "keys": [{"host": "h", "device": 3}],
                         "note": None, "twice": 4, "ratio": 1.0}
    assert isinstance(encode(d)["ratio"], float)  # a rounded field is a float, as written
    full = Declared("ab", Rate(None), note="why", flags=Flags(("x",)), extra=Rate(2.0))
    assert list(encode(full)) == ["name", "rate_gb_per_s", "keys", "note", "twice", "flags",
                                  "ratio"]  # extra's key is rate_gb_per_s: written in place
    assert encode(full)["rate_gb_per_s"] == 2.0 and encode(full)["flags"] == {"on": ["x"]}


def test_significant_digits_are_correctly_rounded() -> None:
    @dataclass(frozen=True)
    class S:
        x: float = field(metadata=rounded(sig=6))

    for x, want in [(999.99995, 1000.0), (1e-7 * 1.234567, 1.23457e-7), (0.0, 0.0),
                    (-12345.65, -12345.6), (123456789.0, 123457000.0)]:
        assert encode(S(x)) == {"x": float(f"{x:.6g}")} == {"x": want}


# to_json: orjson writes the text wherever it is json.dumps's, byte for byte

_ODD_FLOATS = [1e-5, 9.99e-5, -3.2e-7, 1e16, -2.5e17, 5e-324, 1.7976931348623157e308]
_PLAIN_FLOATS = [0.0, -0.0, 1e-4, 0.5, 2.0, 123456.789, 9999999999999998.0, -1.5]
_FLOATS = st.floats(allow_nan=False, allow_infinity=False) | st.sampled_from(
    _ODD_FLOATS + _PLAIN_FLOATS)
_TEXT = st.text(st.characters(max_codepoint=0x7F), max_size=6) | st.text(max_size=4)
_TREES = st.recursive(
    st.none() | st.booleans() | st.integers(-2**70, 2**70) | _FLOATS | _TEXT,
    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(_TEXT, kids, max_size=4),
    max_leaves=25)


@settings(max_examples=600, deadline=None)
@given(_TREES)
def test_to_json_is_the_text_of_json_dumps(tree: object) -> None:
    want = json.dumps(tree, indent=2, allow_nan=False)
    assert to_json(tree) == want
    assert json_bytes(tree) == want.encode("ascii")  # (the critical path's CLI output)


def _json_dumps_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> str:
        raise AssertionError("json.dumps wrote it")
    monkeypatch.setattr(encode_module.json, "dumps", refuse)


def test_to_json_writes_plain_trees_with_orjson(monkeypatch: pytest.MonkeyPatch) -> None:
    """A tree of ASCII text, 64-bit integers and floats, with an exponent or not, never
    reaches json.dumps: the fast path is the one taken (and gives the same text, above)."""
    tree = {"a": [1, -2**63, 2**64 - 1, None, True], "b\n\x01\"\\/": _PLAIN_FLOATS,
            "c": {"d": [], "e": {}, "f": [[{}]]}, "g": _ODD_FLOATS}
    want = json.dumps(tree, indent=2, allow_nan=False)
    _json_dumps_refused(monkeypatch)
    assert to_json(tree) == want


@pytest.mark.parametrize("odd", [*_ODD_FLOATS, *(-x for x in _ODD_FLOATS)], ids=repr)
def test_floats_with_an_exponent_are_written_as_json_writes_them(odd: float) -> None:
    """orjson writes 0.00001 where json writes 1e-05 (and so on): to_json hands orjson
    json's text for them; elsewhere (encode) they stay floats."""
    assert orjson.dumps(1e-5) == b"0.00001" != json.dumps(1e-5).encode()  # a real case
    tree = {"x": [odd, 0.5]}
    assert to_json(tree) == json.dumps(tree, indent=2, allow_nan=False)
    assert encode(tree) == tree and type(encode(tree)["x"][0]) is float


@pytest.mark.parametrize("odd", [2**64, -2**63 - 1, "a\ud800b"], ids=repr)
def test_to_json_leaves_to_json_dumps_what_orjson_refuses(
        odd: object, monkeypatch: pytest.MonkeyPatch) -> None:
    """What orjson refuses (an integer beyond 64 bits, a lone surrogate) sends the whole tree
    to json.dumps, floats with an exponent included."""
    tree = {"x": [1, 0.5, 1e-05, {"y": odd}]}
    want = json.dumps(tree, indent=2, allow_nan=False)
    assert to_json(tree) == want
    _json_dumps_refused(monkeypatch)
    with pytest.raises(AssertionError, match="json.dumps wrote it"):
        to_json(tree)


@pytest.mark.parametrize("odd", ["é", "\x7f", "\U0001f600", "a\u2028b×\x7f\x7fé€\U0010ffff",
                                 "\x00\x1f\\\"\x7f"], ids=repr)
def test_text_orjson_writes_as_utf8_is_escaped_as_json_escapes_it(
        odd: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Non-ASCII text and DEL, which json escapes and orjson writes as they are, in keys and
    values: escaped in orjson's output, without json.dumps (a GPU spec's "×" sent every
    MI355X summary there)."""
    tree = {"x": [1, 0.5, 1e-05, {"y": odd, odd: [odd]}]}
    want = json.dumps(tree, indent=2, allow_nan=False)
    _json_dumps_refused(monkeypatch)
    assert to_json(tree) == want
    assert json_bytes(tree) == want.encode("ascii")


def test_rounded_fields_count_their_exponents_too() -> None:
    """A declared rounding can make the float that needs json.dumps (0.00001234 -> 1.23e-05)."""
    @dataclass(frozen=True)
    class Tiny:
        x: float = field(metadata=rounded(sig=3))
        n: int = field(default=7, metadata=rounded(sig=3))

    assert to_json(Tiny(0.000012345)) == json.dumps({"x": 1.23e-05, "n": 7.0}, indent=2)
    assert to_json(Tiny(12345.0, 2**60)) == json.dumps({"x": 12300.0, "n": 1.15e+18},
                                                        indent=2)


# records orjson writes itself: plain fields of text, integers, booleans, None, tuples and
# such records (a whole trace's critical path is millions of them)

@dataclass(frozen=True)
class Leaf:
    name: str
    device: int | None
    flag: bool
    ids: tuple[int, ...] = ()


@dataclass(frozen=True)
class Branch:
    kind: str
    leaves: tuple[Leaf, ...]
    first: Leaf | None = None


@dataclass(frozen=True)
class Point:  # not direct: orjson writes some floats otherwise than json (1e-05)
    x: float
    label: str


@dataclass(frozen=True)
class Mixed:  # not direct (a float, a flattened field); its direct parts are
    share: float
    branch: Branch
    leaf: Leaf = field(metadata=flattened())


def test_which_records_orjson_writes_itself() -> None:
    from tracelens.results.critical_path import CriticalPathResult, DevicePath, PathActivity

    direct = encode_module._direct
    assert direct(Leaf) and direct(Branch) and direct(PathActivity) and direct(DevicePath)
    assert direct(CriticalPathResult)
    assert not direct(Mixed) and not direct(Point) and not direct(Outer) and not direct(Declared)
    assert not direct(Inner) and not direct(Rate)  # a float; declared rounding


_LEAVES = st.builds(Leaf, _TEXT, st.none() | st.integers(-2**70, 2**70), st.booleans(),
                    st.tuples(st.integers(-2**65, 2**65)) | st.just(()))
_BRANCHES = st.builds(Branch, _TEXT, st.lists(_LEAVES, max_size=3).map(tuple),
                      st.none() | _LEAVES)


@settings(max_examples=300, deadline=None)
@given(st.one_of(_BRANCHES, st.builds(Mixed, _FLOATS, _BRANCHES, _LEAVES),
                 st.builds(Point, _FLOATS, _TEXT)))
def test_records_orjson_writes_are_the_text_of_json_dumps(record: object) -> None:
    """Written by orjson from the records themselves, or by json.dumps where orjson cannot
    (non-ASCII text, integers beyond 64 bits): json.dumps' text of the encoded dicts."""
    want = json.dumps(encode(record), indent=2, allow_nan=False)
    assert to_json(record) == want
    assert json_bytes(record) == want.encode("ascii")


@dataclass(frozen=True)
class Tree:  # holds itself: written as dicts, not a recursion without end
    name: str
    kids: tuple[Tree, ...] = ()


def test_a_record_type_that_holds_itself_is_written_as_dicts() -> None:
    tree = Tree("a", (Tree("b"), Tree("c", (Tree("d"),))))
    assert not encode_module._direct(Tree)
    assert to_json(tree) == json.dumps(encode(tree), indent=2)
    assert encode(tree)["kids"][1]["kids"] == [{"name": "d", "kids": []}]


def test_direct_records_build_no_dicts(monkeypatch: pytest.MonkeyPatch) -> None:
    """to_json hands direct records to orjson as they are: no dict per record is built (a
    million records cost 6 s and a GB that way)."""
    tree = Branch("k", (Leaf("a", 1, True, (2, 3)), Leaf("b", None, False)))
    want = json.dumps(encode(tree), indent=2)

    def refuse(value: object) -> dict:
        raise AssertionError(f"a dict was built for {value!r}")
    monkeypatch.setattr(encode_module, "_object", refuse)
    assert to_json(tree) == want
