"""Reader for PyTorch profiler (Kineto) JSON: one rank's ``*.pt.trace.json[.gz]``.

msgspec splits the document into each event's raw JSON and decodes the events chunk by chunk
into typed structs that hold only the fields read (:mod:`parsers.kineto.typed`); a document
that does not fit that schema is parsed by orjson instead (the tolerant path: same frames,
same warnings). Only the complete (``ph: X``) events of the categories used here are kept,
as device rows and host rows apart, and their fields become columns with C-level passes (no
per-event Python code). What each category gives (docs/kineto.md):

- ``kernel``, ``gpu_memcpy``, ``gpu_memset``: device activity; device ``args.device``, stream
  ``args.stream``, ``args.correlation`` (the launching runtime call's id), copy ``bytes``;
- ``cuda_runtime``/``cuda_driver`` (HIP names on ROCm): launches, linked to activity by
  correlation id (the ``ac2g`` flows carry the same id, so they are not needed);
- ``cpu_op``: ATen ops (shapes with ``record_shapes``), ``record_param_comms`` (collective
  name, sizes, group), ``c10d::*`` ops (the collective that issued a kernel);
  ``user_annotation``/``gpu_user_annotation``: ``ProfilerStep#N``, and the backend's
  ``nccl:*`` annotation of a collective (its inputs' ``Input Dims``/``Input type``).

Timestamps are microseconds. Kineto writes them with three decimals (ns resolution) when it
writes ``baseTimeNanoseconds``; they are converted exactly (integer part and fraction apart,
so no float product rounds), else rounded to the nearest ns; the file's
:class:`~parsers.kineto.facts.KinetoFacts` (``meta.format_facts``) says which.
"""

from __future__ import annotations

import gc
import json
import re
from contextlib import contextmanager
from itertools import compress
from operator import attrgetter
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

import msgspec
import orjson
import polars as pl

from collections import Counter

from parsers.kineto import checks, typed
from parsers.kineto.devices import device_frame
from parsers.kineto.facts import KinetoFacts
from parsers.kineto.link import ANNOTATION_PREFIXES, link_activity, steps_frame
from parsers.launch import launch_text
from parsers.rawfile import lone_note, lone_surrogates, read_maybe_gzip
from tracelens.core.errors import TraceInputError
from tracelens.core.model import (COSTED_ATEN_OPS, EVENT_SCHEMA, HOST_EVENT_SCHEMA, STEP_SCHEMA,
                             HostInfo, Membership, Notice, ShapeFacts, Text, Trace,
                             TraceMeta, conform, host_from_file_name)

FORMAT = "kineto"
DEVICE_CATS = {"kernel": "kernel", "gpu_memcpy": "memcpy", "gpu_memset": "memset",
               "Kernel": "kernel", "Memcpy": "memcpy", "Memset": "memset"}
HOST_CATS = {"cpu_op": "cpu_op", "Operator": "cpu_op", "cuda_runtime": "api",
             "cuda_driver": "api", "Runtime": "api", "user_annotation": "annotation",
             "gpu_user_annotation": "gpu_annotation"}
_WANTED = frozenset(DEVICE_CATS) | frozenset(HOST_CATS)
CATEGORY = pl.Enum(sorted(_WANTED))  # the frames' cat column: kept events' categories
_BASE = ("cat", "name", "pid", "tid", "ts", "dur")
_BASE_TYPES = (pl.String, pl.String, pl.Int64, pl.Int64, pl.Float64, pl.Float64)
_ARGS_INT = ("device", "stream", "correlation", "External id", "bytes")
_ARGS_DEV = ("device", "stream", "bytes")  # read on device activity only: taken there only
_ARGS_ALL = tuple(k for k in _ARGS_INT if k not in _ARGS_DEV)
_LAUNCH = ("grid", "block", "registers per thread", "shared memory")  # kernels' launch shape
_COMM_INT = ("In msg nelems", "Out msg nelems", "Group size")
_COMM_STR = ("Collective name", "dtype", "Process Group Name", "Process Group Description")
_PG_RANKS = "Process Group Ranks"  # a list, or its text "[0, 1]" (as PyTorch writes it)
SHAPE_KEYS = ("Input Dims", "Input type", "Concrete Inputs")
_ANN_NELEMS, _ANN_DTYPE = "Input nelems", "Input dtype"  # what its Input Dims/type give
COMM_SCHEMA = {"_row": pl.Int64, **{k: pl.Int64 for k in _COMM_INT},
               **{k: pl.String for k in (*_COMM_STR, _PG_RANKS)},
               _ANN_NELEMS: pl.Int64, _ANN_DTYPE: pl.String}
# (kept rows, args keys) -> per key, the rows' values: the args read on a few rows only
Rare = Callable[[list[int], tuple[str, ...]], list[list[Any]]]
Selector = Callable[[Any, Counter[str]], tuple[list[list[Any]], list[int], Rare]]
_DEVICE = frozenset(DEVICE_CATS)


def _tolerant(path: Path, raw: bytes) -> tuple[list[Any], dict[str, Any]]:
    """The orjson path: the events as dicts, and the header keys present."""
    constants = lone = 0
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        fixed, lone = lone_surrogates(raw)
        doc = _loads_or_none(fixed) if lone else None
        if doc is None:
            doc, constants = _with_constants(fixed)
        if doc is None:
            msg = str(exc).splitlines()[0][:120]
            raise TraceInputError(path, f"corrupt or truncated JSON ({msg})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        raise TraceInputError(path, "not a Kineto trace: no 'traceEvents' list")
    header = {k: doc[k] for k in typed.HEADER if k in doc}
    if constants:
        header[NOT_JSON] = constants
    if lone:
        header[LONE_SURROGATES] = lone
    return doc["traceEvents"], header


def _loads_or_none(raw: bytes) -> Any:
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None


LONE_SURROGATES = "_lone_surrogates"  # header key: \ud800-style escapes replaced by U+FFFD


_EVENTS_KEY = re.compile(rb'(?<!\\)"traceEvents"\s*:')


def _one_events_key(path: Path, raw: bytes) -> None:
    """Refuse a document with ``traceEvents`` twice: every JSON parser keeps the last value
    of a repeated key, so an empty list after the real one read as "no device activity".
    Which one is meant is the writer's to say; a key in a string is escaped, not counted."""
    if raw.count(b'"traceEvents"') < 2:  # one memchr-fast pass; the regex only when needed
        return
    n = len(_EVENTS_KEY.findall(raw))
    if n > 1:
        raise TraceInputError(path, f"the JSON object holds the key 'traceEvents' {n} times "
                              "(JSON parsers keep only the last one, so the others would be "
                              "lost without a word): keep one")


NOT_JSON = "_not_json_constants"  # header key: NaN/Infinity values read as unknown
_CONSTANT = re.compile(rb"[:,\[]\s*(?:NaN|-?Infinity)\s*[,}\]]")


def _with_constants(raw: bytes) -> tuple[Any, int]:
    """A document that is JSON but for NaN/Infinity values (what Python's ``json.dump``
    writes for float nan/inf: a trace re-saved by a script), parsed with those values as
    unknown (None) and counted; (None, 0) when that is not what kept orjson from parsing it."""
    if not _CONSTANT.search(raw):
        return None, 0
    seen = [0]

    def unknown(_: str) -> None:
        seen[0] += 1
        return None
    try:
        return json.loads(raw, parse_constant=unknown), seen[0]
    except (ValueError, RecursionError):
        return None, 0


def to_ns(us: pl.Series) -> pl.Series:
    """Microseconds (int or float, no nulls) to integer ns: integer part × 1000 plus the
    fraction × 1000 rounded half to even, exact for 3-decimal values below 2^43 µs
    (~100 days)."""
    if us.dtype.is_integer():
        return us.cast(pl.Int64) * 1000
    v = us.cast(pl.Float64)
    ip = v.floor()
    return (ip.cast(pl.Int64) * 1000 + ((v - ip) * 1000).round(0, mode="half_to_even")
            .cast(pl.Int64)).alias(us.name)


def _ok(x: Any) -> bool:
    return type(x) is int and -(1 << 63) <= x < 1 << 63


def _int(v: Any) -> Any:
    """A launch-shape integer as written; anything else (a float, a bool, a string, beyond
    64 bits) None, not coerced (checked value by value, not by polars' constructor, whose
    coercions would depend on the other values of the chunk)."""
    return v if _ok(v) else None


def _dims(v: Any) -> str | None:
    """A ``grid``/``block`` value (``[x, y, z]``) as ``"X,Y,Z"`` text, None unless a
    non-empty list of 64-bit integers (``str`` of an int is polars' Int64 -> String)."""
    return ",".join(map(str, v)) if type(v) is list and v and all(map(_ok, v)) else None


class Launches:
    """The launch shapes of a file's device-activity rows, read chunk by chunk (the only rows
    they are read on): :meth:`codes` gives each row the number of its distinct shape (by its
    JSON text, which tells ``1`` from ``true`` and ``1.0``; kernels repeat a few shapes), and
    :meth:`columns` checks each distinct one once, at the end: the ``_shape`` text and
    ``_bad_shape`` (the row had a launch-shape arg that was not of its type: left out of the
    text, counted by :func:`_build`)."""

    def __init__(self) -> None:
        self.index: dict[Any, int] = {}
        self.quads: list[Any] = []

    def codes(self, grid: list[Any], block: list[Any], regs: list[Any], shared: list[Any],
              first_row: int = 0) -> pl.Series:
        """Each row's shape number (``first_row``: the first row's number in the file)."""
        quads = list(zip(grid, block, regs, shared))
        try:
            keys: list[Any] = list(map(msgspec.json.encode, quads))
        except (ValueError, RecursionError, TypeError, OverflowError, msgspec.EncodeError):
            # a value nested about as deep as the decoder allows: every row on its own
            keys = list(range(first_row, first_row + len(quads)))
        for key, quad in dict(zip(keys, quads)).items():
            if key not in self.index:
                self.index[key] = len(self.index)
                self.quads.append(quad)
        return pl.Series("_launch", list(map(self.index.__getitem__, keys)), dtype=pl.UInt32)

    def columns(self, codes: pl.Series) -> list[pl.Series]:
        """``_shape`` and ``_bad_shape`` of the rows ``codes`` numbers."""
        quads = self.quads
        parts = [[f(q[j]) for q in quads] for j, f in enumerate((_dims, _dims, _int, _int))]
        flags = [any(v is not None and p is None for v, p in zip(q, got))
                 for q, got in zip(quads, zip(*parts))]
        df = pl.DataFrame({"g": pl.Series(parts[0], dtype=pl.String),
                           "b": pl.Series(parts[1], dtype=pl.String),
                           "r": pl.Series(parts[2], dtype=pl.Int64),
                           "s": pl.Series(parts[3], dtype=pl.Int64),
                           "bad": pl.Series(flags, dtype=pl.Boolean)})
        df = df.select(_shape=launch_text(*map(pl.col, "gbrs")), _bad_shape="bad")[codes]
        return [df["_shape"], df["_bad_shape"]]


def _launch(grid: list[Any], block: list[Any], regs: list[Any], shared: list[Any]
            ) -> list[pl.Series]:
    """:class:`Launches` of one batch of rows: their ``_shape`` and ``_bad_shape``."""
    shapes = Launches()
    return shapes.columns(shapes.codes(grid, block, regs, shared))


def _device_rows(cats: list[Any] | pl.Series) -> list[int]:
    if isinstance(cats, pl.Series):
        return cats.is_in(list(_DEVICE)).fill_null(False).arg_true().to_list()
    return list(compress(range(len(cats)), map(_DEVICE.__contains__, cats)))


astuple = msgspec.structs.astuple
# where each args column is in an Args tuple (astuple)
_ARG_AT = {k: typed.Args.__struct_fields__.index(a) for k, a in typed.ARG_ATTRS.items()}
_NARGS = len(typed.Args.__struct_fields__)


def _select_typed(chunk: typed.Chunk, lost: Counter[str]) -> tuple[list[list[Any]], list[int],
                                                                  Rare]:
    evs, raws, quiet = chunk
    sel, at, cats = checks.selected_structs(evs, None if quiet else typed.Complete,
                                            typed.PHASE_OF, _WANTED, _DEVICE, lost)
    # every field of every kept event in one pass (slots read directly, no attribute
    # lookups), then transposed: cat, name, pid, tid, ts, dur, args
    fields = list(zip(*map(astuple, sel))) if sel else [()] * 7
    base: list[Any] = [cats, *fields[1:6]]
    args = fields[6]
    del fields
    if type(None) in set(map(type, args)):  # a written "args": null
        args = [typed.EMPTY if a is None else a for a in args]
    base += [list(map(attrgetter(typed.ARG_ATTRS[k]), args)) for k in _ARGS_ALL]
    cats = cats.cast(CATEGORY)
    base[0] = cats
    rows = _device_rows(cats)
    dev = list(zip(*map(astuple, map(args.__getitem__, rows)))) if rows else [()] * _NARGS
    base += [dev[_ARG_AT[k]] for k in _ARGS_DEV + _LAUNCH]

    def rare(kept: list[int], keys: tuple[str, ...]) -> list[list[Any]]:
        return typed.rare(list(map(raws.__getitem__, map(at.__getitem__, kept))), keys)
    return base, rows, rare


def _select_dicts(evs: list[Any], lost: Counter[str]
                  ) -> tuple[list[list[Any]], list[int], Rare]:
    sel = checks.selected(evs, True, _WANTED, _DEVICE, lost)
    base = [[e.get(k) for e in sel] for k in _BASE]  # per key: the fastest pure-Python form
    args = [a if type(a) is dict else {} for a in (e.get("args") for e in sel)]
    base += [[a.get(k) for a in args] for k in _ARGS_ALL]
    rows = _device_rows(base[0])
    base += [[args[i].get(k) for i in rows] for k in _ARGS_DEV + _LAUNCH]

    def rare(kept: list[int], keys: tuple[str, ...]) -> list[list[Any]]:
        return [[args[i].get(k) for i in kept] for k in keys]
    return base, rows, rare


def _field(key: str) -> str:
    return key if key in _BASE else f"args.{key}"


def _chunk_frame(evs: Any, select: Selector, lost: Counter[str], first_row: int,
                 launches: Launches) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame,
                                              dict[int, tuple[Any, Any, Any]]]:
    """One chunk's device-activity rows and host rows, apart (every later step reads one
    side or the other: no filter of the whole), ``_row`` numbering them from ``first_row``
    in the file's order; the collective args of its host ``record_param_comms`` rows by
    ``_row`` (a few rows: not eleven columns of nulls on every host row), and the shapes
    of its costed ops by ``_row``."""
    base, dev_rows, rare = select(evs, lost)
    height, n = len(base[0]), len(_BASE) + len(_ARGS_ALL)
    # the args read as columns are used on device activity: counted there (ROCm's runtime
    # calls write ``stream: "0x0"`` and ``bytes: "256"``, which nothing reads); device,
    # stream and bytes are only taken there
    device = [False] * height
    for i in dev_rows:
        device[i] = True
    # the kept categories are used ones: an Enum of them (every later filter by category
    # compares small integers, not strings)
    cat = base[0] if isinstance(base[0], pl.Series) else pl.Series(base[0], dtype=pl.String)
    df = checks.typed_frame([(k, _field(k), v, t, None if k in _BASE else device)
                             for k, v, t in zip(_BASE[1:] + _ARGS_ALL, base[1:n],
                                                _BASE_TYPES[1:] + (pl.Int64,) * len(_ARGS_ALL))],
                            lost).insert_column(0, cat.cast(CATEGORY).alias("cat"))
    df = df.with_columns(_row=pl.int_range(first_row, first_row + height, dtype=pl.Int64))
    on_device = pl.Series(device, dtype=pl.Boolean)
    dev = df.filter(on_device)
    dev = dev.hstack(checks.typed_frame([(k, _field(k), v, pl.Int64, None) for k, v in
                                         zip(_ARGS_DEV, base[n:])], lost).hstack(
        [launches.codes(*base[n + len(_ARGS_DEV):], first_row=first_row)]))
    host = df.filter(~on_device)
    del base, df

    def rows(side: pl.DataFrame, cond: pl.Expr) -> list[int]:
        return side.select(pl.arg_where(cond)).to_series().to_list()

    def local(side: pl.DataFrame, at: list[int]) -> list[int]:
        return side["_row"].gather(at).__sub__(first_row).to_list()
    is_comm = pl.col("name") == "record_param_comms"
    comm = pl.DataFrame(schema=COMM_SCHEMA)
    # a device row named record_param_comms: its collective args are counted, not kept
    for side in (dev, host):
        at = rows(side, is_comm)
        if not at:
            continue
        *got, ranks = rare(local(side, at), (*_COMM_INT, *_COMM_STR, _PG_RANKS))
        cols = checks.typed_frame([(k, _field(k), v, pl.Int64 if k in _COMM_INT else pl.String,
                                    None) for k, v in zip(_COMM_INT + _COMM_STR, got)], lost)
        if side is host:
            comm = cols.with_columns(side["_row"].gather(at), pl.Series(
                _PG_RANKS, list(map(_ranks_text, ranks)), dtype=pl.String)).select(
                pl.col(c) if c not in (_ANN_NELEMS, _ANN_DTYPE) else pl.lit(None, t).alias(c)
                for c, t in COMM_SCHEMA.items())
    # the backend's annotation of a collective (nccl:all_reduce): its inputs' elements
    at = rows(host, pl.any_horizontal(pl.col("name").str.starts_with(p)
                                      for p in ANNOTATION_PREFIXES))
    if at:
        dims, types = rare(local(host, at), ("Input Dims", "Input type"))
        got = list(map(_tensor_elements, dims, types))
        ann = pl.DataFrame({"_row": host["_row"].gather(at),
                            _ANN_NELEMS: pl.Series([g[0] for g in got], dtype=pl.Int64),
                            _ANN_DTYPE: pl.Series([g[1] for g in got], dtype=pl.String)}
                           ).select(pl.col(c) if c in ("_row", _ANN_NELEMS, _ANN_DTYPE)
                                    else pl.lit(None, t).alias(c)
                                    for c, t in COMM_SCHEMA.items())
        comm = pl.concat([comm, ann])
    costed = rows(host, pl.col("name").is_in(list(COSTED_ATEN_OPS)))
    shapes = dict(zip(host["_row"].gather(costed).to_list(),
                      zip(*rare(local(host, costed), SHAPE_KEYS)))) if costed else {}
    return dev, host, comm, shapes


def _tensor_elements(dims: Any, types: Any) -> tuple[int | None, str | None]:
    """The elements of a collective annotation's input tensors (``Input Dims`` ``[[394241]]``,
    summed over its tensors) and their element type as written (``Input type``
    ``["float"]``): (None, None) unless every tensor's dims are non-negative integers and
    every tensor has one and the same type (an empty type names no tensor: skipped)."""
    if type(dims) is not list or type(types) is not list or len(dims) != len(types):
        return None, None
    total, kinds = 0, set()
    for d, t in zip(dims, types):
        if t in ("", None) and d == []:
            continue  # not a tensor (a scalar argument)
        if type(t) is not str or type(d) is not list or not all(_ok(x) and x >= 0 for x in d):
            return None, None
        n = 1
        for x in d:
            n *= x
        total += n
        kinds.add(t)
    if len(kinds) != 1 or not _ok(total):
        return None, None
    return total, kinds.pop()


def _ranks_text(value: Any) -> str | None:
    """``Process Group Ranks`` (a list of ints, or PyTorch's text of one) as the model's
    ``groups`` text ``"0,1"``; None when absent, empty or not a list of ranks."""
    if isinstance(value, str):
        body = value.strip()
        if not (body.startswith("[") and body.endswith("]")):
            return None
        parts = [p.strip() for p in body[1:-1].split(",") if p.strip()]
        if not parts or not all(p.isdigit() for p in parts):
            return None
        return ",".join(str(int(p)) for p in parts)
    if isinstance(value, list) and value and all(type(v) is int and v >= 0 for v in value):
        return ",".join(map(str, value))
    return None


def columns(chunks: Iterable[Any], select: Selector) -> list[Any]:
    """The device-activity rows and the host rows of the complete events of a wanted
    category (``_row`` numbers them in the file's order), the args used as columns (device,
    stream, bytes and the launch shape on the device side); the collective arguments of the
    host side's ``record_param_comms`` rows (:data:`COMM_SCHEMA`, by ``_row``); the shapes
    (``Input Dims``, ``Input type``, ``Concrete Inputs``) of the host rows whose name is a
    costed op (``tracelens.core.model.COSTED_ATEN_OPS``), by ``_row`` (as a list: see
    :func:`_build`).
    Chunk by chunk, so only one chunk's events need to exist as Python objects at a time.
    Last, what was skipped or read as unknown, by field (:mod:`parsers.kineto.checks`)."""
    devs, hosts, comms, shapes, n = [], [], [], {}, 0
    lost: Counter[str] = Counter()
    launches = Launches()
    for evs in chunks:
        dev, host, comm, got = _chunk_frame(evs, select, lost, n, launches)
        shapes.update(got)
        n += dev.height + host.height
        devs.append(dev)
        hosts.append(host)
        comms.append(comm)
    dev = pl.concat(devs)
    dev = dev.with_columns(launches.columns(dev["_launch"])).drop("_launch")
    return [dev, pl.concat(hosts), pl.concat(comms), shapes, lost]


@contextmanager
def paused_gc() -> Iterator[None]:
    """The cyclic garbage collector off for the bulk decode and column building (and back
    as it was after, also on an error): the hundreds of thousands of objects they allocate
    are all alive until the chunk is dropped, so every collection the allocations trigger
    would scan them for nothing (a third of the reader's CPU time on a large trace)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def read(path: Path) -> Trace:
    raw = read_maybe_gzip(path, text=True)
    _one_events_key(path, raw)
    errors = (TypeError, ValueError, KeyError, AttributeError, OverflowError,
              pl.exceptions.PolarsError)
    try:
        with paused_gc():
            try:  # the fast path; for anything it does not take, the tolerant path decides
                raws, header = typed.decode(raw)
                if raws is None:
                    raise TraceInputError(path, "not a Kineto trace: no 'traceEvents' list")
                cols = columns(typed.chunks(raws), _select_typed)
                del raws
            except (msgspec.ValidationError, msgspec.DecodeError, *errors):
                evs, header = _tolerant(path, raw)
                del raw
                cols = columns([evs], _select_dicts)
                del evs
        raw = None
        return _build(path, header, cols)
    except errors as exc:
        raise TraceInputError(path, "malformed Kineto JSON "
                              f"({type(exc).__name__}: {str(exc).splitlines()[0][:120]})"
                              ) from None


def _drop(dev: pl.DataFrame, hst: pl.DataFrame, keep: pl.Expr
          ) -> tuple[pl.DataFrame, pl.DataFrame, tuple[int, int]]:
    """Both sides without the rows ``keep`` rejects, and how many those were (all, device);
    a side whose rows are all kept is not copied."""
    out, dropped = [], []
    for side in (dev, hst):
        mask = side.select(keep).to_series()
        dropped.append(side.height - mask.sum())
        out.append(side.filter(mask) if dropped[-1] else side)
    return out[0], out[1], (dropped[0] + dropped[1], dropped[0])


_SAME = ("kind", "name", "device", "stream", "start_ns", "end_ns", "correlation",
         "External id", "bytes", "_shape")
_SAME_TIME = ("device", "stream", "start_ns", "end_ns")


def _usable(path: Path, dev: pl.DataFrame, meta: TraceMeta) -> pl.DataFrame:
    """Device activity with a device and a stream, each recorded once: the others are
    skipped and counted (an activity without either cannot be placed; one written twice,
    field for field, would count its time twice)."""
    placed = pl.col("device").is_not_null() & pl.col("stream").is_not_null()
    unplaced = dev.height - dev.select(placed.sum()).item()
    if unplaced:
        meta.warn(Notice.of("kineto.unplaced", "{file}: skipped {n} device activities without "
                            "a usable device or stream (args.device/pid, args.stream/tid not "
                            "integers)", file=path.name, n=unplaced))
        dev = dev.filter(placed)
    # a copy agrees on every field, so on these four first: when no two rows do, none is
    # a copy and the rows are not compared as a whole (names included)
    if dev.select(pl.struct(*_SAME_TIME).is_unique().all()).item():
        return dev
    once = dev.unique(subset=list(_SAME), keep="first", maintain_order=True)
    if once.height != dev.height:
        meta.warn(Notice.of("kineto.recorded_twice", "{file}: skipped {n} device activities "
                            "recorded twice (the same event, field for field)", file=path.name,
                            n=dev.height - once.height))
    return once


def _build(path: Path, header: dict[str, Any], cols: list[Any]) -> Trace:
    """The Trace from :func:`columns`' frames and shapes, given in a list that this empties,
    so that no caller keeps the frames alive while their filtered copies are built."""
    dev, hst, comm, shapes, lost = cols
    cols.clear()
    meta = TraceMeta(sources=[{"path": str(path), "format": FORMAT}])
    for w in checks.warnings(path.name, lost):
        meta.warn(w)
    device_seen = dev.height + lost["ph(device)"]
    if header.get(LONE_SURROGATES):
        meta.warn(lone_note(path.name, header[LONE_SURROGATES]))
    if header.get(NOT_JSON):
        meta.warn(Notice.of("kineto.not_json", "{file}: {n} NaN/Infinity values, which JSON does "
                            "not allow (Python's json module writes them), read as unknown",
                            file=path.name, n=header[NOT_JSON]))
    # finite, non-negative durations, and times below 2^53 µs (beyond, a float has no µs)
    limit = float(1 << 53)
    timed = ((pl.col("ts").abs() < limit) & (pl.col("dur") >= 0) & (pl.col("dur") < limit)
             ).fill_null(False)
    dev, hst, untimed = _drop(dev, hst, timed)
    if untimed[0]:
        meta.warn(Notice.of("kineto.untimed", "{file}: skipped {n} events without a valid "
                            "ts/dur ({device} of them device activity)", file=path.name,
                            n=untimed[0], device=untimed[1]))
    # a name is what every analysis groups by: unknown, so not used
    dev, hst, unnamed = _drop(dev, hst, pl.col("name").is_not_null())
    if unnamed[0]:
        meta.warn(Notice.of("kineto.unnamed", "{file}: skipped {n} events without a name "
                            "({device} of them device activity)", file=path.name, n=unnamed[0],
                            device=unnamed[1]))
    dev, hst = (side.with_columns(start_ns=to_ns(side["ts"])) for side in (dev, hst))
    dev, hst = (side.with_columns(end_ns=pl.col("start_ns") + to_ns(side["dur"]))
                for side in (dev, hst))
    exact = "baseTimeNanoseconds" in header
    dist = header.get("distributedInfo")
    dist = dist if isinstance(dist, dict) else {}
    rank_id = dist.get("rank") if isinstance(dist.get("rank"), int) else None
    host = f"rank{rank_id}" if rank_id is not None else host_from_file_name(path.name)

    # lazy: each use filters and keeps only the columns it needs (the host side is most rows)
    hst = hst.lazy()
    no_device = dev["device"].null_count()
    if no_device:
        meta.warn(Notice.of("kineto.pid_as_device", "{file}: {n} device activities without "
                            "args.device use the Kineto GPU process id (pid) as their device",
                            file=path.name, n=no_device))
    dev = dev.with_columns(device=pl.coalesce("device", "pid").cast(pl.Int32),
                           stream=pl.coalesce("stream", "tid"),
                           kind=pl.col("cat").replace_strict(DEVICE_CATS, return_dtype=pl.String))
    dev = _usable(path, dev, meta)
    instants = dev.select(n=(pl.col("end_ns") == pl.col("start_ns")).sum(),
                          kernels=((pl.col("end_ns") == pl.col("start_ns"))
                                   & (pl.col("kind") == "kernel")).sum()).row(0)
    if instants[0]:  # a kernel takes time: dur 0 is time not recorded, not a free kernel
        meta.warn(Notice.of("kineto.zero_duration", "{file}: {n} of {total} device activities "
                            "({kernels} kernels) have dur 0: their time was not recorded, so "
                            "busy time and kernel times leave it out", file=path.name,
                            n=instants[0], total=dev.height, kernels=instants[1]))
    bad_shape = dev.filter(pl.col("_bad_shape") & (pl.col("kind") == "kernel")).height
    if bad_shape:
        meta.warn(Notice.of("kineto.bad_launch_shape", "{file}: {n} kernels have a launch-shape "
                            "arg (grid, block, registers per thread, shared memory) that is not "
                            "an integer (list of them): left out of launch, unknown",
                            file=path.name, n=bad_shape))
    events, launches, link_warn, extra, op_shapes = link_activity(dev, hst, comm, shapes)
    for w in link_warn:
        meta.warn(w.about(path.name))
    op_shapes.notes_at = len(meta.notices)  # the shape costs' note follows these
    events = conform(events.with_columns(host=pl.lit(host, dtype=Text), rank=pl.lit(0)),
                     EVENT_SCHEMA)
    devices, dev_warn = device_frame(header, sorted(set(events["device"].to_list())), host,
                                     len(meta.notices))
    for w in dev_warn:
        meta.warn(w.about(path.name))
    host_events = conform(hst.filter(pl.col("cat") != "gpu_user_annotation").select(
        "name", "pid", "tid", "start_ns", "end_ns", correlation_id="correlation",
        kind=pl.col("cat").replace_strict(HOST_CATS, return_dtype=pl.String)).with_columns(
        host=pl.lit(host, dtype=Text), rank=pl.lit(0)).collect(), HOST_EVENT_SCHEMA)
    steps, step_source = steps_frame(hst, events, launches)
    # Kineto records no host name: rank<N> or the file's name names a rank, not a host
    meta.hosts = {host: HostInfo(path=str(path), named=False)}
    meta.member = Membership(rank=rank_id, world_size=dist.get("world_size"))
    meta.format_facts = [KinetoFacts(
        str(path), backend=dist.get("backend"),
        timestamps=("exact: microseconds with 3 decimals (baseTimeNanoseconds present), "
                    "converted to integer ns" if exact else
                    "rounded to the nearest ns (no baseTimeNanoseconds)"),
        steps_source=step_source, **extra), ShapeFacts(str(path), op_shapes)]
    if not events.height and device_seen:
        raise TraceInputError(path, f"none of its {device_seen} device activities is usable "
                              f"({'; '.join(meta.warnings)[:300]})")
    if not events.height:
        meta.warn(Notice.of("kineto.no_device_activity", "{file}: no device activity (no "
                            "kernel, gpu_memcpy or gpu_memset events)", file=path.name))
    return Trace(events=events, host_events=host_events,
                 steps=steps if steps.height else pl.DataFrame(schema=STEP_SCHEMA),
                 devices=devices, meta=meta)
