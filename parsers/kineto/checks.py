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
from itertools import compress, repeat
from operator import attrgetter, is_
from typing import Any, Sequence

import polars as pl

from tracelens.core.model import Notice

# the Python types a column of each dtype takes as they are (bool is not a number here)
_TAKES = ((pl.String, (str,)), (pl.Int64, (int,)), (pl.Float64, (int, float)))
_I64 = (-(1 << 63), 1 << 63)
_CAT, _PH = attrgetter("cat"), attrgetter("ph")
# The categories libkineto and PyTorch write that this reader leaves unused on purpose
# (libkineto's ActivityType names, and the flow and trace-span ones): a complete event of
# any other category, unused or not, is counted by its value (``cat:<value>``), never
# dropped unsaid. A known one differing only in case (``"KERNEL"``) is counted, not read:
# no Kineto writes it, and reading it as ``kernel`` would be a guess about who changed it.
KNOWN_UNUSED = frozenset((
    "python_function", "Trace", "overhead", "cuda_sync", "cuda_profiler_range",
    "external_correlation", "cpu_instant_event", "ac2g", "fwdbwd", "async_cpu_to_gpu",
    "mtia_runtime", "mtia_ccp_events", "mtia_insight", "glow_runtime", "hpu_op",
    "xpu_runtime", "xpu_driver", "collective_comm", "privateuse1_runtime",
    "privateuse1_driver"))
UNKNOWN_CAT = "cat:"  # the prefix of lost's keys that count a category by its value


def typed_series(values: Sequence[Any], dtype: pl.DataType, field: str,
                 lost: Counter[str], counted: Sequence[bool] | None = None) -> pl.Series:
    """``values`` as ``dtype``; a value of another type null, and counted in ``lost`` under
    ``field`` (only on the rows ``counted`` marks, when given: where the field is used).
    The strict constructor (several times faster) takes the list when every value has an
    accepted type (it refuses any other, but reads a bool as a number: :func:`_bools`);
    otherwise each value is checked."""
    return typed_frame([("v", field, values, dtype, counted)], lost).to_series()


Column = tuple[str, str, Sequence[Any], pl.DataType, "Sequence[bool] | None"]


def typed_frame(columns: Sequence[Column], lost: Counter[str]) -> pl.DataFrame:
    """:func:`typed_series` of each ``(name, field, values, dtype, counted)``, as one frame:
    the numeric columns the strict constructor took are looked at for bools in one query
    (how many rows are 0 or 1 in each), not one per column."""
    out: dict[str, pl.Series] = {}
    numeric: list[tuple[str, str, Sequence[Any], pl.DataType, Any]] = []
    for name, field, values, dtype, counted in columns:
        if isinstance(values, pl.Series) and values.dtype == dtype:
            out[name] = values.alias(name)  # built typed (nothing of another type to count)
            continue
        try:  # the strict constructor refuses every other type, except a bool as a number
            out[name] = pl.Series(name, values, dtype=dtype)
        except (TypeError, ValueError, OverflowError, pl.exceptions.PolarsError):
            # a value of another type, or an integer beyond 64 bits
            out[name] = _checked(values, dtype, field, lost, counted).alias(name)
        else:
            if dtype.is_numeric():
                numeric.append((name, field, values, dtype, counted))
    frame = pl.DataFrame(list(out.values()))
    if numeric:
        bits = frame.select(((pl.col(c[0]) == 0) | (pl.col(c[0]) == 1)).sum()
                            for c in numeric).row(0)
        redo = [_checked(values, dtype, field, lost, counted).alias(name)
                for (name, field, values, dtype, counted), n in zip(numeric, bits)
                if n and _bools(values, frame[name], n)]
        if redo:
            frame = frame.with_columns(redo)
    return frame


def _checked(values: Sequence[Any], dtype: pl.DataType, field: str, lost: Counter[str],
             counted: Sequence[bool] | None) -> pl.Series:
    """Value by value: one of another type null, and counted."""
    takes = next(t for d, t in _TAKES if dtype == d)
    ok = [v if type(v) in takes and _fits(v, dtype) else None for v in values]
    if counted is None:
        bad = ok.count(None) - list(values).count(None)
    else:
        bad = sum(1 for v, o, c in zip(values, ok, counted) if c and o is None and v is not None)
    if bad:
        lost[field] += bad
    return pl.Series(ok, dtype=dtype)


def _bools(values: Sequence[Any], got: pl.Series, bits: int) -> bool:
    """Whether a bool is among ``values``, which a numeric column took as 0 or 1 (``bits``
    rows are 0 or 1 there): only those rows are looked at, unless they are most rows (a
    device column: every value is one type, checked in one pass)."""
    if bits * 4 > len(values):
        return bool in set(map(type, values))
    rows = ((got == 0) | (got == 1)).arg_true().to_list()
    return bool in set(map(type, map(values.__getitem__, rows)))


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


def selected_structs(events: list[Any], complete: type | None, phase_of: dict[type, str],
                     wanted: frozenset[str], device_cats: frozenset[str], lost: Counter[str]
                     ) -> tuple[list[Any], list[int], pl.Series]:
    """:func:`selected` for events decoded as a union tagged by ``ph``: the complete ones
    are of class ``complete``, the others' phase is their class's (``phase_of``). The kept
    events, their positions in ``events`` and their categories (a String column). Counted
    and kept by polars from two columns, each event's category and whether it is complete
    (no (cat, ph) tuple per event); a category that is not a string or null takes
    :func:`_struct_pairs`. ``complete`` None: the events of other phases read as an unused
    category (``typed.QuietEvent``: theirs was checked to be one, or absent), so they count
    for nothing and every event is treated as complete (no pass over their classes)."""
    cats = list(map(_CAT, events))
    try:
        cat = pl.Series(cats, dtype=pl.String)  # strict: refuses any other type
    except (TypeError, ValueError, pl.exceptions.PolarsError):
        kept, at, got = _struct_pairs(events, cats, phase_of, wanted, device_cats, lost)
        return kept, at, pl.Series(got, dtype=pl.String)
    del cats
    is_wanted = pl.col("cat").is_in(list(wanted)).fill_null(False)
    unknown = pl.col("cat").is_not_null() & ~is_wanted & ~pl.col("cat").is_in(
        list(KNOWN_UNUSED)).fill_null(False)
    if complete is None:  # no event of another phase counts: only a complete one's null cat
        frame = cat.to_frame("cat")
        counts = {"no cat": cat.null_count()}
        keep = frame.select(is_wanted).to_series()
        _count_unknown(frame.filter(unknown)["cat"], lost)
    else:
        done = pl.Series(list(map(is_, map(type, events), repeat(complete))), dtype=pl.Boolean)
        frame = pl.DataFrame({"cat": cat, "done": done})
        x = pl.col("done")
        counts = frame.select(
            (pl.col("cat").is_null() & x).sum().alias("no cat"),
            (is_wanted & ~x).sum().alias("ph"),
            (pl.col("cat").is_in(list(device_cats)).fill_null(False) & ~x).sum()
            .alias("ph(device)")).row(0, named=True)
        keep = frame.select(is_wanted & x).to_series()
        _count_unknown(frame.filter(unknown & x)["cat"], lost)
    for k, n in counts.items():
        if n:
            lost[k] += n
    at = keep.arg_true().to_list()
    return list(map(events.__getitem__, at)), at, cat.filter(keep)


def _count_unknown(cats: pl.Series, lost: Counter[str]) -> None:
    """Count the complete events of unrecognised categories ``cats`` by value."""
    if cats.len():
        for c, n in cats.value_counts().iter_rows():
            lost[UNKNOWN_CAT + c] += n


def _struct_pairs(events: list[Any], cats: list[Any], phase_of: dict[type, str],
                  wanted: frozenset[str], device_cats: frozenset[str], lost: Counter[str]
                  ) -> tuple[list[Any], list[int], list[Any]]:
    """:func:`selected_structs` for a chunk with a category that is not a string: from the
    (cat, ph) pairs, as :func:`selected` counts them."""
    phs = list(map(phase_of.__getitem__, map(type, events)))
    keys = list(zip(cats, phs))
    try:
        _count(Counter(keys), wanted, device_cats, lost)
    except TypeError:  # an unhashable cat
        _odd_pairs(events, cats, phs, wanted, device_cats, lost)
    at = [i for i, (c, p) in enumerate(keys) if p == "X" and type(c) is str and c in wanted]
    return [events[i] for i in at], at, [cats[i] for i in at]


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
        elif p == "X" and c not in wanted and c not in KNOWN_UNUSED:
            lost[UNKNOWN_CAT + c] += n
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
    for c, p in zip(cats, phs):
        if p == "X" and type(c) is str and c not in wanted and c not in KNOWN_UNUSED:
            lost[UNKNOWN_CAT + c] += 1
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
    unknown = sorted(((k.removeprefix(UNKNOWN_CAT), v) for k, v in lost.items()
                      if k.startswith(UNKNOWN_CAT)), key=lambda kv: (-kv[1], kv[0]))
    if unknown:
        out.append(unknown_categories(name, unknown))
    fields = {k: v for k, v in sorted(lost.items())
              if k not in _WHAT and k != "ph(device)" and not k.startswith(UNKNOWN_CAT)}
    if fields:
        listed = ", ".join(f"{k} {v}" for k, v in fields.items())
        out.append(Notice.of("kineto.wrong_types", "{file}: {n} values of the wrong type read "
                             "as unknown (by field: {listed})", file=name,
                             n=sum(fields.values()), listed=listed))
    return out


SHOWN_CATS = 6  # unrecognised categories a notice names before it just counts them


def unknown_categories(name: str, counts: list[tuple[str, int]]) -> Notice:
    """The notice of complete events skipped for a category this reader does not know
    (``counts``: by value, most first); a value that is a used category in another case is
    said to be one, so that a re-cased kernel is not mistaken for an unused category."""
    used = {c.lower(): c for c in DEVICE_AND_HOST}
    shown = []
    for cat, n in counts[:SHOWN_CATS]:
        near = used.get(cat.lower())
        shown.append(f"{cat!r} {n}" + (f" (not {near!r}: categories are case-sensitive)"
                                       if near else ""))
    more = f", ... {len(counts) - SHOWN_CATS} more" if len(counts) > SHOWN_CATS else ""
    return Notice.of("kineto.unknown_category", "{file}: skipped {n} complete events of "
                     "categories this reader does not know (by cat: {listed})", file=name,
                     n=sum(n for _, n in counts), listed=", ".join(shown) + more)


DEVICE_AND_HOST = ("kernel", "gpu_memcpy", "gpu_memset", "cpu_op", "cuda_runtime",
                   "cuda_driver", "user_annotation", "gpu_user_annotation")
