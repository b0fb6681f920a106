"""Columnar XSpace decoding with the C extension ``_tracelens_xspace`` (``parsers/_xspace.c``).

The protobuf runtime turns every event of a 2M-event XSpace into a message object and the
reader then visits each one from Python: ~20 s where the bare decode takes ~1 s. Here the C
extension walks the serialized bytes instead:

1. ``scan`` cuts every ``XLine.events`` entry out of the file and returns the rest (the
   *skeleton*: planes, their metadata maps and stats, line headers) plus where each line's
   events are. The protobuf runtime parses the skeleton, so everything but the events keeps
   its exact protobuf semantics. ``scan`` also cuts the plain ``event_metadata`` map entries
   (a name, and stats of declared fields only: ``md_simple`` in the C file): with 150k kernel
   names, making a message object of each entry and visiting it from Python took ~0.4 s, the
   largest single cost of a ``summarize``. ``event_metadata`` turns a plane's cut entries
   into the names and default stats ``planes.PlaneReader`` builds from map entries, in C;
   the map keeps the others. Nothing is cut where that could change what the map holds (two
   entries of one key, a key of another wire type), nor in ``/host:metadata``, whose map
   ``reader._read_modules`` reads itself (see ``WHOLE_PLANES``).
2. ``decode`` turns the events of one line into columns: metadata id (as a dense code per
   line), start/end ns (``timestamp_ns + floor(offset_ps / 1000)``, exact in 128-bit), and per
   wanted stat a value kind and its 64 bits, ref values and inline strings as small per-line
   tables. ``validate`` checks the lines nobody reads (e.g. the python tracer's), so a corrupt
   byte anywhere is still an error.
3. ``FastLines.frame`` resolves names, ref values and event-metadata default stats on those
   small tables with numpy and builds exactly the frame ``columns.line_frame`` builds
   from the per-event lists. ``FastLines.stream_frames`` does it once for many stream lines,
   across GPU planes (runs of lines of equal line types, up to ``FRAME_ROWS`` events): each
   line's tables are resolved against its own plane, then the lines' decoded columns are
   laid end to end (``_laid_end_to_end``), since each frame costs milliseconds of fixed work
   and a host file can hold dozens of small lines. Stat columns holding a type
   the fast path does not cover (a double ``program_id``, a string ``correlation_id``...)
   go through the reference conversion (``as_int``/``as_str``) row by row, so odd inputs
   give the same values too.

The C decoder accepts exactly what the upb decoder accepts (see the C file's header; the
tests fuzz both on the same bytes). ``TRACELENS_XSPACE_DECODER=python`` forces the
per-event reader.
"""

from __future__ import annotations

import functools
import itertools
import operator
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from parsers.xspace.tpu import WHOLE_TPU_PLANES
from parsers.xspace.columns import (EVENT_STATS, UNKNOWN_NAME, as_int, as_str, device_kind,
                                    launch_shape, too_large)
from parsers.xspace.planes import CutMetadata
from parsers.xspace.source import StreamLines
from parsers.xspace.space import parse, undecodable
from tracelens.core.errors import TraceInputError
from tracelens.core.model import KindDtype, Text

ABI = 5  # the version of parsers/_xspace.c this module speaks to
try:
    import _tracelens_xspace as _c
    _IMPORT_ERROR: str | None = None
    if getattr(_c, "ABI", None) != ABI:  # built from other sources: do not guess
        _IMPORT_ERROR = (f"the C decoder _tracelens_xspace at {_c.__file__} is out of date "
                         f"(ABI {getattr(_c, 'ABI', None)}, want {ABI}; reinstall tracelens)")
        _c = None
except ImportError as exc:  # not built (no compiler at install time): the Python reader runs
    _c = None
    _IMPORT_ERROR = f"the C decoder _tracelens_xspace is not built ({exc})"

ENV = "TRACELENS_XSPACE_DECODER"

# Value kinds written by the C decoder, per event and stat column.
ABSENT, NONE, INT64, UINT64, DOUBLE, STR, BYTES, REF = range(8)
_INT_FAST = (1 << ABSENT) | (1 << NONE) | (1 << INT64) | (1 << UINT64)
_STR_FAST = (1 << ABSENT) | (1 << NONE) | (1 << REF) | (1 << STR)
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


FRAME_ROWS = 1 << 18  # stream lines read as one frame: up to this many events (or one line)


def available() -> bool:
    return _c is not None


def extension() -> Any:
    """The ``_tracelens_xspace`` extension module (None when not built)."""
    return _c


def unavailable_reason() -> str:
    return _IMPORT_ERROR or ""


def default_decoder() -> str:
    """"c" unless ``TRACELENS_XSPACE_DECODER`` says "python"."""
    return "python" if os.environ.get(ENV, "").strip().lower() == "python" else "c"


def default_threads() -> int:
    """Decoder threads for one file when the caller does not say: up to 4
    (``tracelens.loading.reading``,
    which knows how many files it reads at once, passes its own number)."""
    return max(1, min(4, os.cpu_count() or 1))


# Planes whose event metadata ``scan`` leaves whole: ``reader._read_modules`` reads the map of
# ``/host:metadata`` itself (its entries' ``Hlo Proto`` stats), in the map's order before a
# stable sort; that order is upb's hash order, which depends on every entry of the map.
WHOLE_PLANES = (b"/host:metadata", *WHOLE_TPU_PLANES)


def split(raw: bytes, path: Path, threads: int | None = None) -> tuple[Any, "FastLines"]:
    """The XSpace messages without their events (and without the event metadata entries
    ``FastLines.cut_metadata`` reads), and the source of the events' columns (decoded by
    ``threads`` C threads; None: :func:`default_threads`)."""
    try:
        skeleton, lines, cut = _c.scan(raw, WHOLE_PLANES)
    except ValueError as exc:
        raise undecodable(path, raw, f"corrupt or truncated XSpace protobuf ({exc})") from None
    space = parse(skeleton, path)
    return space, FastLines(raw, lines, path, threads, cut)


class FastLines:
    """Event columns of each line, decoded from the serialized bytes (see the module doc)."""

    decoder = "c"

    def __init__(self, raw: bytes, lines: list[tuple[int, int, int, int, int]],
                 path: Path, threads: int | None = None,
                 cut: list[bytes | None] | None = None) -> None:
        self.raw = raw
        self.path = path
        self.cut = cut or []  # per plane: its event metadata entries scan cut (or None)
        self.where = {(p, i): (off, length, n) for p, i, off, length, n in lines}
        self.done: set[tuple[int, int]] = set()
        self.planned: dict[int, list[tuple[int, Any, Any, bool]]] = {}
        self.decoded: dict[tuple[int, int], dict[str, Any]] = {}
        self.threads = default_threads() if threads is None else max(1, int(threads))
        self.too_large: dict[str, int] = {}
        self._details: tuple[np.ndarray, list[str | None]] | None = None  # kernel_details
        self._shapes: dict[str | None, str | None] = {}  # launch shape per kernel_details

    def plan(self, reader: Any, plane_idx: int, lines: list[tuple[int, Any]],
             wanted_only: bool) -> None:
        """The lines of a plane ``frame`` will be asked for: on the first request, all of
        them are decoded at once, by several threads (one plane at a time bounds memory)."""
        self.planned[plane_idx] = [(i, line, reader, wanted_only) for i, line in lines]

    def _decode_plane(self, plane_idx: int) -> None:
        todo = [(i, line, reader, wanted) for i, line, reader, wanted in
                self.planned.pop(plane_idx, []) if self.where[plane_idx, i][2]]
        if len(todo) < 2:
            return  # decoded on request
        requests = [(*self.where[plane_idx, i][:2], line.timestamp_ns, reader.stat_code,
                     len(EVENT_STATS), reader.wanted_ids() if wanted else None, wanted)
                    for i, line, reader, wanted in todo]
        try:
            results = _c.decode_many(self.raw, requests, self.threads)
        except ValueError as exc:
            raise TraceInputError(self.path, f"corrupt or truncated XSpace protobuf ({exc})"
                                  ) from None
        for (i, *_), r in zip(todo, results):
            self.decoded[plane_idx, i] = r

    def count(self, plane_idx: int, line_idx: int, line: Any) -> int:
        return self.where[plane_idx, line_idx][2]

    def cut_metadata(self, plane_idx: int) -> CutMetadata | None:
        """The event metadata ``scan`` cut out of the plane's map, for ``PlaneReader``
        (None when none was)."""
        table = self.cut[plane_idx] if plane_idx < len(self.cut) else None
        if table is None:
            return None

        def read(stat_code: dict[int, int], ref_names: dict[int, str]
                 ) -> tuple[dict[int, str], list[dict[int, Any]]]:
            try:
                return _c.event_metadata(self.raw, table, stat_code, len(EVENT_STATS),
                                         ref_names)
            except ValueError as exc:  # scan checked these bytes: cannot happen
                raise TraceInputError(self.path, "corrupt or truncated XSpace protobuf "
                                      f"({exc})") from None
        return read

    def finish(self) -> None:
        """Check every byte of the lines that were not decoded."""
        for key, (off, length, n) in self.where.items():
            if key in self.done or not n:
                continue
            try:
                _c.validate(self.raw, off, length)
            except ValueError as exc:
                raise TraceInputError(self.path, "corrupt or truncated XSpace protobuf "
                                      f"({exc})") from None
        self.done.update(self.where)

    def _decoded(self, reader: Any, plane_idx: int, line_idx: int, line: Any,
                 wanted_only: bool) -> dict[str, Any] | None:
        """The C decoder's columns of a line (None when it has no events)."""
        off, length, n_events = self.where[plane_idx, line_idx]
        self.done.add((plane_idx, line_idx))
        if not n_events:
            return None
        if plane_idx in self.planned:
            self._decode_plane(plane_idx)
        r = self.decoded.pop((plane_idx, line_idx), None)
        if r is None:
            try:
                r = _c.decode(self.raw, off, length, line.timestamp_ns, reader.stat_code,
                              len(EVENT_STATS), reader.wanted_ids() if wanted_only else None,
                              wanted_only)
            except ValueError as exc:
                raise TraceInputError(self.path, "corrupt or truncated XSpace protobuf "
                                      f"({exc})") from None
        return r

    def frame(self, reader: Any, plane_idx: int, line_idx: int, line: Any,
              wanted_only: bool = False) -> tuple[pl.DataFrame | None, int, int]:
        r = self._decoded(reader, plane_idx, line_idx, line, wanted_only)
        return (None, 0, 0) if r is None else self._frame(r, _Tables.of(r, reader),
                                                            wanted_only)

    def stream_frames(self, planes: list[StreamLines]) -> tuple[list[pl.DataFrame], int, int]:
        """Frames of consecutive stream lines of equal line types, across planes, of up to
        :data:`FRAME_ROWS` rows (or one line's), each built from its lines' decoded columns
        laid end to end with the names, refs and defaults of each line's own plane: the rows,
        values and column types of :func:`stream_frames_by_line`'s frames, concatenated, with
        a fraction of the per-frame work (~8 ms a frame; a host file can hold dozens of
        small lines). The bound keeps what is held at once near one plane's columns."""
        frames: list[pl.DataFrame] = []
        negative = unknown = rows = 0  # dropped (negative duration), unnamed; rows batched
        batch: list[tuple[int, int, dict[str, Any], _Tables]] = []
        batch_types: str | None = None

        def flush() -> None:
            nonlocal negative, unknown, rows
            df, n_neg, n_unknown = self._frame(*_laid_end_to_end(
                [(r, tables) for _, _, r, tables in batch]), False)
            negative, unknown = negative + n_neg, unknown + n_unknown
            if df is not None:
                per_line = [r["n"] for _, _, r, _ in batch]
                df = df.with_columns(
                    device=pl.Series(np.repeat(np.array([b[0] for b in batch], np.int64),
                                               per_line)),
                    stream=pl.Series(np.repeat(np.array([b[1] for b in batch], np.int64),
                                               per_line)))
                frames.append(self.device_kind(df, batch_types))
            batch.clear()
            rows = 0

        for reader, plane_idx, device, lines in planes:
            for line_idx, line, line_types in lines:
                r = self._decoded(reader, plane_idx, line_idx, line, False)
                if r is None:
                    continue
                if batch and (line_types != batch_types or rows + r["n"] > FRAME_ROWS):
                    flush()
                batch.append((device, line.id, r, _Tables.of(r, reader)))
                batch_types, rows = line_types, rows + r["n"]
        if batch:
            flush()
        return frames, negative, unknown

    def _frame(self, r: dict[str, Any], tables: "_Tables", wanted_only: bool
               ) -> tuple[pl.DataFrame | None, int, int]:
        """The frame of decoded columns ``r`` (one line's, or several laid end to end) with
        their ``tables``."""
        md_counts = np.frombuffer(r["md_counts"], np.int64)
        names = tables.names
        unknown = sum(c for nm, c in zip(names, md_counts.tolist()) if nm is None) \
            if None in names else 0
        n = r["n"]
        if not n:
            # Nothing kept. Without the filter that means every event had a negative duration
            # (the reference reader then has no frame either); with it, a frame of no rows.
            if not wanted_only or not md_counts.sum():
                return None, r["negative"], unknown
        names = [UNKNOWN_NAME if nm is None else nm for nm in names]
        cols = _Columns(r, tables)
        md_code = cols.md_code
        df = pl.DataFrame({
            "name": pl.Series(names, dtype=Text).gather(md_code) if n else
            pl.Series([], dtype=Text),
            "start_ns": pl.Series(np.frombuffer(r["start_ns"], np.int64), dtype=pl.Int64),
            "end_ns": pl.Series(np.frombuffer(r["end_ns"], np.int64), dtype=pl.Int64),
            "op": cols.string(EVENT_STATS.index("hlo_op")),
            "module": cols.string(EVENT_STATS.index("hlo_module")),
            "program_id": cols.integer(EVENT_STATS.index("program_id")),
            "correlation_id": cols.integer(EVENT_STATS.index("correlation_id")),
            "memcpy_details": cols.string(EVENT_STATS.index("memcpy_details")),
            "device_ordinal": cols.integer(EVENT_STATS.index("device_ordinal")),
            "step_num": cols.integer(EVENT_STATS.index("step_num")),
            "kernel_details": cols.string(EVENT_STATS.index("kernel_details")),
            "run_id": cols.integer(EVENT_STATS.index("run_id")),
        })
        for code, n_big in cols.too_large.items():
            if not n_big:
                continue
            stat = EVENT_STATS[code]
            self.too_large[stat] = self.too_large.get(stat, 0) + n_big
        self._combo = (md_code, cols.codes.get(EVENT_STATS.index("memcpy_details")),
                       names, len(names))
        self._details = cols.codes.get(EVENT_STATS.index("kernel_details"))
        return df, r["negative"], unknown

    def device_kind(self, df: pl.DataFrame, line_types: str | None) -> pl.DataFrame:
        """``columns.device_kind`` computed once per distinct (name, memcpy_details)
        of the line just decoded, then spread onto its rows (the expressions are row-wise)."""
        md_code, mc, _, n_names = self._combo
        if mc is None:  # the row-by-row string conversion ran: no codes (rare)
            kinds = device_kind(df.select(pl.col("name", "memcpy_details").cast(pl.String)),
                                line_types)
            return self._launch(df.with_columns(kinds.select(pl.col("kind").cast(KindDtype),
                                                             pl.col("subcategory").cast(Text),
                                                             "bytes").get_columns()))
        mc_codes, mc_table = mc  # codes in 0..len(mc_table), the last for null
        key = md_code.astype(np.int64) * (len(mc_table) + 1) + mc_codes
        space = n_names * (len(mc_table) + 1)
        if space <= 1 << 22:
            seen = np.zeros(space, bool)
            seen[key] = True
            combos = np.flatnonzero(seen)
            dense = np.cumsum(seen) - 1
            inverse = dense[key]
        else:
            combos, inverse = np.unique(key, return_inverse=True)
        # one row per combination (the first row holding it)
        first = np.empty(len(combos), np.int64)
        rows = np.arange(len(key) - 1, -1, -1)
        first[inverse[rows]] = rows
        small = df.select("name", "memcpy_details")[first].cast(pl.String)
        kinds = device_kind(small, line_types).select(
            pl.col("kind").cast(KindDtype), pl.col("subcategory").cast(Text), "bytes")
        return self._launch(df.with_columns(kinds[inverse.astype(np.int64)].get_columns()))

    def _launch(self, df: pl.DataFrame) -> pl.DataFrame:
        """A device line's ``launch`` from its distinct ``kernel_details`` (the per-line codes),
        and without the columns only the reader reads (not carried into the events' concat)."""
        if self._details is not None:
            codes, uniq = self._details
            # each distinct string is worked out once per file (lines repeat each other's)
            new = [u for u in uniq if u not in self._shapes]
            if new:
                self._shapes.update(zip(new, launch_shape(pl.Series(new, dtype=pl.String))))
            shapes = pl.Series([*(self._shapes[u] for u in uniq), None],
                               dtype=pl.String).cast(Text)
            launch = shapes.gather(codes)
            df = df.with_columns(launch.alias("launch"))
        else:
            df = df.with_columns(launch_shape(df["kernel_details"]).cast(Text))
        return df.drop("kernel_details", "memcpy_details", "device_ordinal", "step_num")


@dataclass(frozen=True)
class _Tables:
    """A decoded line's tables resolved against its plane (lines of several planes can then
    be laid end to end): the name of each of its metadata ids, the string of each of its ref
    ids, and per stat code the default of each metadata id (None: no metadata of the plane
    sets that stat)."""

    names: list[str | None]
    refs: list[Any]
    defaults: list[list[Any] | None]

    @classmethod
    def of(cls, r: dict[str, Any], reader: Any) -> "_Tables":
        md_ids = np.frombuffer(r["md_ids"], np.int64).tolist()
        get, ref_names = reader.event_names.get, reader.ref_names
        return cls([get(m) for m in md_ids],
                   [ref_names.get(x) for x in np.frombuffer(r["ref_ids"], np.uint64).tolist()],
                   [[d.get(m) for m in md_ids] if d else None for d in reader.by_code])


def _laid_end_to_end(items: list[tuple[dict[str, Any], _Tables]]
                     ) -> tuple[dict[str, Any], _Tables]:
    """The C decoder's columns of several lines, with their tables, as one line's: rows in
    line order; per-line tables (metadata ids, ref ids, strings) concatenated, and the codes
    and indexes into them shifted by the tables of the lines before."""
    if len(items) == 1:
        return items[0]
    rs = [r for r, _ in items]
    tables = [t for _, t in items]
    joined = _Tables([x for t in tables for x in t.names], [x for t in tables for x in t.refs],
                     [None if all(t.defaults[c] is None for t in tables) else
                      [x for t in tables for x in (t.defaults[c] or [None] * len(t.names))]
                      for c in range(len(tables[0].defaults))])

    def cat(key: str, dtype: type) -> np.ndarray:
        return np.concatenate([np.frombuffer(r[key], dtype) for r in rs])

    def starts(sizes: list[int]) -> list[int]:
        return [0, *itertools.accumulate(sizes)][:-1]

    ns = [r["n"] for r in rs]
    md_at = starts([np.frombuffer(r["md_ids"], np.int64).size for r in rs])
    ref_at = starts([np.frombuffer(r["ref_ids"], np.uint64).size for r in rs])
    str_at = starts([len(r["strings"]) for r in rs])
    kinds, vals = [], []
    for code in range(len(rs[0]["kinds"])):
        k = [np.frombuffer(r["kinds"][code], np.uint8) for r in rs]
        kinds.append(np.concatenate(k))
        if all(r["vals"][code] is None for r in rs):
            vals.append(None)
            continue
        parts = []
        for r, ki, n, ref0, str0 in zip(rs, k, ns, ref_at, str_at):
            v = r["vals"][code]
            v = np.zeros(n, np.int64) if v is None else np.frombuffer(v, np.int64)
            if ref0 or str0:  # indexes into this line's tables, shifted past the earlier lines'
                shift = np.zeros(8, np.int64)
                shift[REF], shift[STR], shift[BYTES] = ref0, str0, str0
                v = v + shift[ki]
            parts.append(v)
        vals.append(np.concatenate(parts))
    return {
        "n": sum(ns), "negative": sum(r["negative"] for r in rs),
        "md_ids": cat("md_ids", np.int64), "md_counts": cat("md_counts", np.int64),
        "md_code": np.concatenate([np.frombuffer(r["md_code"], np.int32) + at
                                   for r, at in zip(rs, md_at)]).astype(np.int32),
        "ref_ids": cat("ref_ids", np.uint64), "strings": [x for r in rs for x in r["strings"]],
        "start_ns": cat("start_ns", np.int64), "end_ns": cat("end_ns", np.int64),
        "kinds": kinds, "vals": vals,
        "kind_masks": [functools.reduce(operator.or_, (r["kind_masks"][c] for r in rs))
                       for c in range(len(kinds))],
    }, joined


def _nulls(n: int, dtype: pl.DataType) -> pl.Series:
    return pl.repeat(None, n, dtype=dtype, eager=True).alias("")


class _Columns:
    """Stat columns of decoded rows (one line's, or several laid end to end), resolved
    against their :class:`_Tables`."""

    def __init__(self, r: dict[str, Any], tables: _Tables) -> None:
        self.r = r
        self.n = r["n"]
        self.tables = tables
        self.md_code = np.frombuffer(r["md_code"], np.int32)
        self.codes: dict[int, tuple[np.ndarray, list[str | None]]] = {}
        self.too_large: dict[int, int] = {}  # per integer column: uint64 values above 2**63-1

    def refs(self) -> list[Any]:
        return self.tables.refs

    def has_defaults(self, code: int) -> bool:
        """Whether a metadata of the line's plane sets this stat."""
        return self.tables.defaults[code] is not None

    def _defaults(self, code: int) -> list[Any]:
        d = self.tables.defaults[code]
        return [None] * len(self.tables.names) if d is None else d

    def _kinds(self, code: int) -> tuple[np.ndarray, np.ndarray | None, int]:
        kinds = np.frombuffer(self.r["kinds"][code], np.uint8)
        vals = self.r["vals"][code]
        vals = None if vals is None else np.frombuffer(vals, np.int64)
        return kinds, vals, self.r["kind_masks"][code]  # bit k: a row of kind k

    def _objects(self, code: int, kinds: np.ndarray, vals: np.ndarray | None) -> list[Any]:
        """The per-event values the reference reader would have: exact, one row at a time."""
        defaults = self._defaults(code)
        strings = self.r["strings"]
        out: list[Any] = []
        for i in range(self.n):
            k = int(kinds[i])
            v = int(vals[i]) if vals is not None else 0
            if k == ABSENT:
                out.append(defaults[self.md_code[i]])
            elif k == NONE:
                out.append(None)
            elif k == INT64:
                out.append(v)
            elif k == UINT64:
                out.append(v & 0xFFFFFFFFFFFFFFFF)
            elif k == DOUBLE:
                out.append(float(np.array([v], np.int64).view(np.float64)[0]))
            elif k in (STR, BYTES):
                out.append(strings[v])
            else:  # REF
                out.append(self.refs()[v])
        return out

    def integer(self, code: int) -> pl.Series:
        """An Int64 column as ``columns.as_int`` makes it."""
        kinds, vals, mask = self._kinds(code)
        if mask == 1 << ABSENT and not self.has_defaults(code):
            return _nulls(self.n, pl.Int64)
        # no metadata of the plane sets this stat (the usual case): no default to look at
        has_defaults = self.has_defaults(code)
        defaults = self._defaults(code) if has_defaults else []
        if mask & ~_INT_FAST or any(d is not None and type(d) is not int for d in defaults):
            objects = self._objects(code, kinds, vals)
            self.too_large[code] = too_large(objects)
            return as_int(objects)
        if vals is None:
            vals = np.zeros(self.n, np.int64)
        absent = kinds == ABSENT
        ok = (kinds == INT64) | ((kinds == UINT64) & (vals >= 0))
        big = int(((kinds == UINT64) & (vals < 0)).sum())
        out = vals
        if has_defaults:
            fits = [d is not None and _INT64_MIN <= d <= _INT64_MAX for d in defaults]
            dval = np.array([d if f else 0 for d, f in zip(defaults, fits)], np.int64)
            dok = np.array(fits, bool)
            dbig = np.array([d is not None and not f for d, f in zip(defaults, fits)], bool)
            out = np.where(absent, dval[self.md_code], vals)
            ok |= absent & dok[self.md_code]
            big += int((absent & dbig[self.md_code]).sum())
        self.too_large[code] = big
        if ok.all():
            return pl.Series(out, dtype=pl.Int64)
        return pl.Series(np.ma.masked_array(out, mask=~ok), dtype=pl.Int64)

    def string(self, code: int) -> pl.Series:
        """A text column (:data:`tracelens.core.model.Text`) of the values ``columns.as_str``
        gives. Its codes are kept for reuse: per row, the index of its value among the
        line's distinct values, or their count for null."""
        kinds, vals, mask = self._kinds(code)
        if mask == 1 << ABSENT and not self.has_defaults(code):
            self.codes[code] = (np.zeros(self.n, np.int64), [])
            return _nulls(self.n, Text)
        has_defaults = self.has_defaults(code)  # as in integer()
        defaults = self._defaults(code) if has_defaults else []
        if mask & ~_STR_FAST or any(d is not None and type(d) is not str for d in defaults):
            return pl.Series(as_str(self._objects(code, kinds, vals)), dtype=Text)
        refs = self.refs() if mask & (1 << REF) else []
        # the per-line table also holds other columns' bytes values: never referenced here
        strings = [s if type(s) is str else None for s in self.r["strings"]] \
            if mask & (1 << STR) else []
        table: list[str | None] = [*refs, *strings, *defaults]
        if vals is None:
            vals = np.zeros(self.n, np.int64)
        # each row's index into ``table``, -1 where it has no value
        idx = np.where((kinds == ABSENT) & has_defaults,
                       self.md_code.astype(np.int64) + len(refs) + len(strings), -1) \
            if has_defaults else np.full(self.n, -1, np.int64)
        if mask & (1 << STR):
            idx = np.where(kinds == STR, vals + len(refs), idx)
        if mask & (1 << REF):
            idx = np.where(kinds == REF, vals, idx)
        # table entry -> code over the distinct values (None: their count), and the last
        # entry for the rows without one (index -1)
        uniq: dict[str, int] = {}
        codes_of = [uniq.setdefault(t, len(uniq)) if t is not None else -1 for t in table]
        lookup = np.array([len(uniq) if c < 0 else c for c in codes_of] + [len(uniq)],
                          np.int64)
        codes = lookup[idx]
        self.codes[code] = (codes, list(uniq))
        return pl.Series([*uniq, None], dtype=Text).gather(codes)
