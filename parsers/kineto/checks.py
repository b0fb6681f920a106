"""What a damaged Kineto document loses, counted by field: never a silent drop.

A trace re-saved by a script, cut by a disk or written by another tool can hold events that
are not objects, categories that are not strings, used events that are not complete
(``ph`` other than ``X``), and values of the wrong type (a string ``ts``, a float stream, a
64-bit overflow). Each is read as unknown, never coerced (polars' lenient constructor would
read ``"12"`` as 12.0 and ``1.5`` as 1), and counted here; :func:`warnings` turns the counts
into the reader's warnings.
"""

from __future__ import annotations

from collections import Counter
from itertools import compress
from operator import attrgetter
from typing import Any, Sequence

import polars as pl

from tracelens.model import Notice

# the Python types a column of each dtype takes as they are (bool is not a number here)
_TAKES = ((pl.String, (str,)), (pl.Int64, (int,)), (pl.Float64, (int, float)))
_I64 = (-(1 << 63), 1 << 63)
_CAT, _PH = attrgetter("cat"), attrgetter("ph")


def typed_series(values: Sequence[Any], dtype: pl.DataType, field: str,
                 lost: Counter[str], counted: Sequence[bool] | None = None) -> pl.Series:
    """``values`` as ``dtype``; a value of another type null, and counted in ``lost`` under
    ``field`` (only on the rows ``counted`` marks, when given: where the field is used).
    The strict constructor (several times faster) takes the list when every value has an
    accepted type; otherwise each value is checked."""
    takes = next(t for d, t in _TAKES if dtype == d)
    kinds = set(map(type, values))
    kinds.discard(type(None))
    if kinds <= set(takes):
        try:
            return pl.Series(values, dtype=dtype)
        except (TypeError, ValueError, OverflowError, pl.exceptions.PolarsError):
            pass  # an integer beyond 64 bits
    ok = [v if type(v) in takes and _fits(v, dtype) else None for v in values]
    if counted is None:
        bad = ok.count(None) - list(values).count(None)
    else:
        bad = sum(1 for v, o, c in zip(values, ok, counted) if c and o is None and v is not None)
    if bad:
        lost[field] += bad
    return pl.Series(ok, dtype=dtype)


def _fits(v: Any, dtype: pl.DataType) -> bool:
    return dtype != pl.Int64 or _I64[0] <= v < _I64[1]


def selected(events: list[Any], dicts: bool, wanted: frozenset[str],
             device_cats: frozenset[str], lost: Counter[str]) -> list[Any]:
    """The complete events of a wanted category; the odd ones counted in ``lost``: events
    that are not objects (``event``), a ``cat`` that is not a string (``cat``), an event of a
    wanted category that is not complete (``ph``; device ones also as ``ph(device)``), a
    complete event without a category (``no cat``), an event of no wanted category
    without a phase (``no ph``).
    ``events`` are parsed JSON values (``dicts``) or typed structs with those attributes.
    One C-level pass counts the (cat, ph) pairs and one keeps the wanted ones (no per-event
    Python); a cat or ph that cannot be hashed (a list, an object) takes :func:`_odd_pairs`."""
    if dicts:
        objects = [e for e in events if type(e) is dict]
        if len(objects) != len(events):
            lost["event"] += len(events) - len(objects)
        cats = [e.get("cat") for e in objects]
        phs = [e.get("ph") for e in objects]
    else:
        objects = events
        cats = list(map(_CAT, objects))
        phs = list(map(_PH, objects))
    keys = list(zip(cats, phs))
    try:
        pairs = Counter(keys)
    except TypeError:  # an unhashable cat or ph
        return _odd_pairs(objects, cats, phs, wanted, device_cats, lost)
    _count(pairs, wanted, device_cats, lost)
    keep = frozenset((c, "X") for c in wanted)
    return list(compress(objects, map(keep.__contains__, keys)))


def _count(pairs: Counter[tuple[Any, Any]], wanted: frozenset[str],
           device_cats: frozenset[str], lost: Counter[str]) -> None:
    """:func:`selected`'s counts from the (cat, ph) histogram: each odd event once, under
    the first of these that it is. (Counter keys merge equal values of different types,
    e.g. 1 and True, but never a string with a non-string or None with anything else, so
    each key's class below is that of every event it counts.)"""
    for (c, p), n in pairs.items():
        is_str = type(c) is str
        if c is not None and not is_str:
            lost["cat"] += n
        elif p != "X" and is_str and c in wanted:
            lost["ph"] += n
            if c in device_cats:
                lost["ph(device)"] += n
        elif c is None and p == "X":  # Kineto gives every complete event a category
            lost["no cat"] += n
        elif type(p) is not str and (c is None or c not in wanted):
            lost["no ph"] += n  # every trace event has a phase: of one without, nothing known


def _odd_pairs(objects: list[Any], cats: list[Any], phs: list[Any],
               wanted: frozenset[str], device_cats: frozenset[str],
               lost: Counter[str]) -> list[Any]:
    """:func:`selected` value by value, for a document with an unhashable cat or ph."""
    keep = [e for e, c, p in zip(objects, cats, phs) if p == "X" and type(c) is str and c in wanted]
    # each odd event counted once, under the first of these that it is
    odd_cat = sum(1 for c in cats if c is not None and type(c) is not str)
    if odd_cat:
        lost["cat"] += odd_cat
    incomplete = [c for c, p in zip(cats, phs) if p != "X" and type(c) is str and c in wanted]
    if incomplete:
        lost["ph"] += len(incomplete)
        lost["ph(device)"] += sum(1 for c in incomplete if c in device_cats)
    no_cat = sum(1 for c, p in zip(cats, phs) if c is None and p == "X")
    if no_cat:  # Kineto gives every complete event a category: this one lost it
        lost["no cat"] += no_cat
    no_ph = sum(1 for c, p in zip(cats, phs) if type(p) is not str
                and (c is None or type(c) is str and c not in wanted))
    if no_ph:  # every trace event has a phase: of an event without one, nothing is known
        lost["no ph"] += no_ph
    return keep


_WHAT = {"event": "trace events that are not JSON objects",
         "cat": "events whose cat is not a string",
         "no cat": "complete events (ph 'X') without a cat",
         "no ph": "events without a ph (missing or not a string)",
         "ph": "events of a used category that are not complete events (ph other than 'X')"}


def warnings(name: str, lost: Counter[str]) -> list[Notice]:
    """One notice per kind of skipped event, and one for the wrong-typed values by field."""
    out = [Notice.of("kineto.skipped_events", "{file}: skipped {n} {what}", file=name,
                     n=lost[k], what=what) for k, what in _WHAT.items() if lost[k] and k != "ph"]
    if lost["ph"]:
        out.append(Notice.of("kineto.not_complete", "{file}: skipped {n} {what} ({device} of "
                             "them device activity)", file=name, n=lost["ph"],
                             what=_WHAT["ph"], device=lost["ph(device)"]))
    fields = {k: v for k, v in sorted(lost.items()) if k not in _WHAT and k != "ph(device)"}
    if fields:
        listed = ", ".join(f"{k} {v}" for k, v in fields.items())
        out.append(Notice.of("kineto.wrong_types", "{file}: {n} values of the wrong type read "
                             "as unknown (by field: {listed})", file=name,
                             n=sum(fields.values()), listed=listed))
    return out
