"""One generic JSON encoder for typed results: the documented JSON is written
from the result types themselves, so a new analysis writes no JSON code.

A frozen dataclass becomes an object of its fields in declaration order; a NamedTuple an
object of its fields; a polars frame a list of row objects; tuples and lists arrays; NaN and
infinities ``null`` (JSON has none). A field declares how it is written in its metadata
(the helpers below return such metadata; combine them with ``|``):

- ``rounded(6)``: a float (or each float of a tuple) rounded to 6 decimals, ``sig=7``: to
  7 significant digits; an int there is written as a float -- rounding happens here only,
  results keep the values as computed;
- ``{"json": False}``: not written (internal detail kept on the result);
- ``{"json_name": "x"}`` (``renamed("x")``): written under another key;
- ``optional()``: not written while None, an empty tuple, list or dict, or a record whose
  ``__bool__`` is False (a key only some outputs carry);
- ``flattened()``: a dataclass value whose keys are written in place of the field's;
- ``converted(fn)``: written as ``encode(fn(value))`` (a typed view of a foreign type).

A value computed from other fields (a count, a unit conversion) is a ``field(init=False)``
the result sets in ``__post_init__``, so it is a field like any other.

:func:`to_json` is what ``--format json`` prints: ``json.dumps(encode(result), indent=2)``
(the text of it: records whose fields are all plain text, integers, booleans, None and
tuples or records of those are handed to ``orjson`` as they are, without a dict each).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import re
import sys
import threading
from enum import Enum
from json.encoder import encode_basestring_ascii
from typing import Callable, Mapping

import orjson

JSONValue = None | bool | int | float | str | list["JSONValue"] | dict[str, "JSONValue"]
Meta = dict[str, object]


def rounded(decimals: int | None = None, sig: int | None = None) -> Meta:
    """Field metadata: write this float rounded to ``decimals`` places or ``sig``
    significant digits."""
    return {"round": decimals, "sig": sig}


def renamed(name: str) -> Meta:
    """Field metadata: write this field under ``name`` (e.g. a Python keyword)."""
    return {"json_name": name}


def optional() -> Meta:
    """Field metadata: leave the key out while the value is None or empty."""
    return {"json_optional": True}


def flattened() -> Meta:
    """Field metadata: write the (dataclass) value's keys in place of this field."""
    return {"json_flatten": True}


def converted(fn: Callable[[object], object]) -> Meta:
    """Field metadata: write ``fn(value)`` instead of the value (None stays None)."""
    return {"json_convert": fn}


def blank_as_null(text: str) -> str | None:
    """A converter: an empty note (nothing to say) is written as null."""
    return text or None


def _round(x: float, decimals: int | None, sig: int | None) -> float:
    if sig is not None:
        return float(f"{x:.{sig}g}")  # correctly rounded, unlike a log10 digit count
    return round(x, decimals) if decimals is not None else x


def _field(value: object, meta: Mapping[str, object]) -> JSONValue:
    fn = meta.get("json_convert")
    if fn is not None and value is not None:
        value = fn(value)  # type: ignore[operator]
    decimals, sig = meta.get("round"), meta.get("sig")
    if decimals is not None or sig is not None:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            x = float(value)
            return _float(_round(x, decimals, sig)) if math.isfinite(x) else None
        if isinstance(value, (tuple, list)):
            return [_field(v, meta) for v in value]
    return encode(value)


class _Fragments(threading.local):
    """Whether the encoding of this thread is :func:`to_json`'s: each float that ``orjson``
    and ``json`` print differently is then handed over as the text ``json`` prints. Both
    print the shortest digits that read back the same, but ``json`` (as ``float.__repr__``)
    switches to an exponent below 1e-4 and from 1e16 and pads it (``1e-05``, ``1e+16``)
    where ``orjson`` writes ``0.00001``, ``1e-5``, ``1e16``."""

    on = False


_FRAGMENTS = _Fragments()


def _float(x: float) -> float:
    """A finite float as written; inside :func:`to_json`, one with an exponent as an
    ``orjson.Fragment`` of the text ``json`` writes for it."""
    if _FRAGMENTS.on and x and not 1e-4 <= abs(x) < 1e16:
        return orjson.Fragment(float.__repr__(x).encode("ascii"))  # type: ignore[return-value]
    return x


def _frame(value: object) -> bool:
    """A polars frame (polars is not imported for results that hold none)."""
    pl = sys.modules.get("polars")
    return pl is not None and isinstance(value, pl.DataFrame)


def _unset(value: object) -> bool:
    """None, an empty tuple, list or dict, or a record that is False (no filter set)."""
    if value is None:
        return True
    if isinstance(value, (bool, int, float, str)) or _frame(value):
        return False
    return not value


@functools.cache
def _plan(cls: type) -> tuple[tuple[str, str, Mapping[str, object], bool, bool, bool], ...]:
    """Per written field of dataclass ``cls``: (attribute, key, metadata, optional,
    flattened, plain: written by :func:`encode` alone), worked out once per class (a
    result may hold millions of records of one class)."""
    return tuple((f.name, str(f.metadata.get("json_name", f.name)), f.metadata,
                  bool(f.metadata.get("json_optional")), bool(f.metadata.get("json_flatten")),
                  not any(k in f.metadata for k in ("json_convert", "round", "sig")))
                 for f in dataclasses.fields(cls) if f.metadata.get("json", True))


_NATIVE = (str, int, bool, type(None))
"""Values ``orjson`` writes exactly as ``json`` does (floats are not: see :func:`_float`)."""


@functools.cache
def _direct(cls: type) -> bool:
    """Whether ``orjson`` may write records of dataclass ``cls`` itself (fields in
    declaration order, as :func:`_object` does) instead of a dict per record: every field
    plain (no metadata) and typed as text, integers, booleans, None, or tuples and
    dataclasses of those. A whole trace's critical path is millions of such records: a dict
    each cost 6 s and the GB they held."""
    return _plain_record(cls, frozenset())


def _plain_record(cls: type, seen: frozenset[type]) -> bool:
    """:func:`_direct` of ``cls`` inside the records ``seen`` (a record type that holds
    itself, directly or not, is written as dicts)."""
    import types
    import typing

    if cls in seen:
        return False
    try:
        hints = typing.get_type_hints(cls)
    except (NameError, TypeError):  # an annotation that does not resolve: write dicts
        return False
    inside = seen | {cls}

    def ok(hint: object) -> bool:
        origin = typing.get_origin(hint)
        if origin in (typing.Union, types.UnionType):
            return all(ok(a) for a in typing.get_args(hint))
        if origin is tuple:
            args = typing.get_args(hint)
            return bool(args) and all(ok(a) for a in args if a is not Ellipsis)
        if isinstance(hint, type) and dataclasses.is_dataclass(hint):
            return _plain_record(hint, inside)
        return hint in _NATIVE

    return all(not f.metadata and ok(hints.get(f.name)) for f in dataclasses.fields(cls))


def _object(value: object) -> dict[str, JSONValue]:
    out: dict[str, JSONValue] = {}
    for name, key, meta, optional_, flatten, plain in _plan(type(value)):
        v = getattr(value, name)
        if optional_ and _unset(v):
            continue
        if flatten:
            inner = _object(v) if dataclasses.is_dataclass(v) else encode(v)
            if isinstance(inner, dict):
                out.update(inner)
                continue
        out[key] = encode(v) if plain else _field(v, meta)
    return out


def encode(value: object) -> JSONValue:
    """``value`` as plain JSON values (module doc)."""
    if value is None or isinstance(value, (bool, int, str)):
        return value  # type: ignore[return-value]
    if isinstance(value, float):
        return _float(value) if math.isfinite(value) else None
    if isinstance(value, Enum):
        return encode(value.value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        if _FRAGMENTS.on and _direct(type(value)):
            return value  # type: ignore[return-value]  # written by orjson itself (_dumped)
        return _object(value)
    if _frame(value):
        return [encode(row) for row in value.to_dicts()]  # type: ignore[attr-defined]
    if isinstance(value, Mapping):
        return {str(k): encode(v) for k, v in value.items()}
    if isinstance(value, tuple) and hasattr(value, "_fields"):  # a NamedTuple
        return {str(k): encode(v) for k, v in zip(value._fields, value)}
    if isinstance(value, (tuple, list)):
        return [encode(v) for v in value]
    raise TypeError(f"cannot encode {type(value).__name__} as JSON")


def written(record: object, name: str) -> JSONValue:
    """Field ``name`` of ``record`` as the JSON writes it (its declared rounding): what a
    renderer shows, so that the terminal, Markdown, CSV and the JSON agree."""
    meta = next(f.metadata for f in dataclasses.fields(record)  # type: ignore[arg-type]
                if f.name == name)
    return _field(getattr(record, name), meta)


def to_json(result: object) -> str:
    """The JSON a command prints for ``result`` (indented, NaN-free): the text of
    ``json.dumps(encode(result), indent=2)``, written by ``orjson`` (tens of times faster: a
    whole trace's critical path lists millions of activities) wherever the two can agree
    byte for byte. Floats both print differently are handed to ``orjson`` as ``json``'s text
    (:func:`_float`). Text that is not ASCII, or DEL, which ``json`` escapes and ``orjson``
    writes as UTF-8, is escaped in ``orjson``'s bytes afterwards (:func:`_escaped`: a GPU
    spec's "×" sent every such summary to ``json``); integers beyond 64 bits and lone
    surrogates (``orjson`` refuses them) leave the whole result to ``json``."""
    out = _dumped(result)
    return out.decode("ascii") if isinstance(out, bytes) else out


def json_bytes(result: object) -> bytes:
    """:func:`to_json`'s text as the ASCII bytes it is written as, without making the text:
    a whole trace's critical path is a GB of JSON, whose text and its encoding for stdout
    would be two more copies of it."""
    out = _dumped(result)
    return out if isinstance(out, bytes) else out.encode("ascii")


def _dumped(result: object) -> bytes | str:
    """orjson's bytes of ``result``'s JSON, non-ASCII escaped as ``json`` does (see
    :func:`to_json`), or ``json.dumps``' text where orjson refuses the tree."""
    outer, _FRAGMENTS.on = _FRAGMENTS.on, True  # (Fragment: orjson 3.9, the floor we require)
    try:
        tree = encode(result)
    finally:
        _FRAGMENTS.on = outer
    try:
        fast = orjson.dumps(tree, option=orjson.OPT_INDENT_2)
    except TypeError:  # orjson.JSONEncodeError: an integer beyond 64 bits, deep nesting
        fast = None
    del tree
    if fast is None:
        return json.dumps(encode(result), indent=2, allow_nan=False)
    if not fast.isascii() or b"\x7f" in fast:
        fast = _NOT_ASCII.sub(_escaped, fast)
    return fast


_NOT_ASCII = re.compile(rb"[\x7f-\xff]+")
"""Runs of bytes that ``json`` escapes and ``orjson`` writes as they are: DEL and UTF-8's
multi-byte sequences (whole ones: no ASCII byte occurs inside a sequence). They only occur
inside strings (JSON's structure and numbers are ASCII)."""


def _escaped(run: re.Match[bytes]) -> bytes:
    """``json``'s escapes of a run of :data:`_NOT_ASCII` bytes (``\\u00e9``, surrogate pairs
    beyond U+FFFF), made by ``json``'s own string escaper so that they cannot differ."""
    return encode_basestring_ascii(run.group().decode("utf-8"))[1:-1].encode("ascii")
