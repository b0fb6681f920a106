"""TPU device planes of an XSpace file (``/device:TPU:<k>``), read like every other device.

What a TPU plane holds (docs/tpu.md, read off real TPU v5e traces of JAX 0.10): lines
``Steps`` (one event per step, named by its step number, on the device clock), ``XLA Modules``
(one event per program execution, named ``<module>(<program id>)``), ``XLA Ops`` (every HLO op
the core ran, one at a time: the device timeline) and ``Async XLA Ops`` (each async op's span
from its start to its done op). An op's event metadata is named by its whole HLO instruction
text; its ``display_name`` is the op name (``convolution_add_fusion.3``), and its stats are
XLA's own: ``hlo_category`` (``convolution fusion``, ``loop fusion``, ``data formatting``,
``copy-done``, ``all-reduce``, ...), ``flops``, ``model_flops``, ``bytes_accessed``,
``program_id`` (a uint64 fingerprint), ``tf_op``. The plane's own stats name the device
(``device_type_string``: ``TPU v5 Lite``) and its peaks (``peak_teraflops_per_second``,
``peak_hbm_bw_gigabytes_per_second``).

The activities are the ``XLA Ops`` events: name and op are the op name, ``hlo_category`` is
XLA's category (the classifier's signal for TPU ops), FLOPs and bytes are the trace's own
(``cost_source`` "trace"), the module is the program's name from ``XLA Modules`` and the
program id its uint64 fingerprint, stored as the same 64 bits
(:func:`tracelens.core.model.stored_program_id`), as ``/host:metadata``'s HloProtos are keyed, so
the ops join their HLO. An async op (a copy or a
collective) is its ``*-start`` and ``*-done`` ops on that line: the done op's time is the wait
the core did not hide; the ``Async XLA Ops`` spans (the transfer in flight, overlapping
other ops), cut where their done op starts, are activities of their own streams, named by
their start op, so the timeline shows how much of each transfer ran under compute
(overlapped) and how much did not (exposed). They add under 0.07% to busy time on the real
traces (the core is busy with some op almost whenever a transfer is in flight). Steps come
from the ``Steps`` line (the reader's first step candidate; host step annotations are the
second, used only when they pass the same check, :func:`tracelens.loading.steps.choose_candidates`).

Everything is read through the same line sources as GPU planes (the C decoder or the
per-event reader): the plane's reader names each event by its metadata id, and the ops'
metadata (a few thousand entries) is joined on after.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import polars as pl

from google.protobuf.message import DecodeError

from parsers.xplane_schema import MEMORY_SPACE_HBM, memory_breakdown_class
from parsers.xspace.planes import PlaneReader, stat_value
from parsers.xspace.source import LineSource
from parsers.xspace.xla_host import first_ops
from tracelens.core.model import ASYNC_LANE_STREAM, STEP_SCHEMA, Text, conform

TPU_PLANE = re.compile(r"^/device:TPU:(\d{1,9})$")
OPS_LINE, ASYNC_LINE, STEPS_LINE, MODULES_LINE = "XLA Ops", "Async XLA Ops", "Steps", \
    "XLA Modules"
READ_LINES = (OPS_LINE, ASYNC_LINE, STEPS_LINE, MODULES_LINE)
# the C decoder keeps these planes' event metadata whole (their ops' stats are read here)
WHOLE_TPU_PLANES = tuple(f"/device:TPU:{i}".encode() for i in range(256))
_MODULE_RUN = re.compile(r"^(.*)\((\d+)\)$")
_OP_NAME = re.compile(r"^%?([^\s=]+)\s*=")
_NUMBER_STATS = ("flops", "model_flops", "bytes_accessed")
_TEXT_STATS = ("hlo_category", "program_id", "tf_op")
_ISSUE_OR_WAIT = r"-(start|done)$"  # hlo_category of an async op's start or done


def tpu_reader(plane: Any, cut: Any) -> PlaneReader:
    """The plane's reader, each event named by its metadata id (ops are joined to their
    metadata after the line is decoded: names repeat across programs, ids do not)."""
    reader = PlaneReader(plane, cut)
    reader.event_names = {k: str(k) for k in reader.event_names}
    return reader


def read_lines(plane: Any) -> list[tuple[int, Any]]:
    """The lines of a TPU plane that are read."""
    return [(i, line) for i, line in enumerate(plane.lines) if line.name in READ_LINES]


def _number(v: Any) -> float | None:
    """A non-negative count; a uint64 above 2^63-1 (an all-ones sentinel, say) is unknown, as
    every integer the model cannot hold."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return float(v) if 0 <= v < 2**63 else None


def _hbm_bytes(blob: Any) -> float | None:
    """The HBM bytes (reads and writes) of an op's ``memory_access_breakdown`` stat; None
    without one or when it does not decode. XLA's ``bytes_accessed`` counts every memory
    space: on a TPU most of a fused GEMM's traffic is on-chip (VMEM), and against the HBM
    roof it put ops "above the roofline" (114.8% on ``remat``), where XProf's roofline model
    reads the HBM share, as this does."""
    if not isinstance(blob, bytes):
        return None
    try:
        msg = memory_breakdown_class()()
        msg.ParseFromString(blob)
    except DecodeError:
        return None
    return float(sum(a.bytes_accessed for a in msg.memory_accessed
                     if a.memory_space == MEMORY_SPACE_HBM))


def op_table(plane: Any) -> pl.DataFrame:
    """One row per event metadata of the plane: its id (``md``, as the reader names events),
    the op name, XLA's category, FLOPs, model FLOPs, bytes (all memory spaces), HBM bytes
    (null without a breakdown), program id (text: a uint64) and ``tf_op``."""
    refs = {k: v.name for k, v in plane.stat_metadata.items()}
    rows = []
    for k, md in plane.event_metadata.items():
        stats = {refs.get(st.metadata_id): stat_value(st, refs) for st in md.stats}
        m = _OP_NAME.match(md.name)
        op = m.group(1) if m else (md.display_name or md.name)
        row = {"md": str(k), "op_name": op, "full": md.name,
               "hbm_bytes": _hbm_bytes(stats.get("memory_access_breakdown"))}
        row.update({s: _number(stats.get(s)) for s in _NUMBER_STATS})
        row.update({s: None if stats.get(s) is None else str(stats[s]) for s in _TEXT_STATS})
        rows.append(row)
    schema = {"md": pl.String, "op_name": pl.String, "full": pl.String,
              "hbm_bytes": pl.Float64, **{s: pl.Float64 for s in _NUMBER_STATS},
              **{s: pl.String for s in _TEXT_STATS}}
    return pl.DataFrame(rows, schema=schema, orient="row")


def read_plane(reader: PlaneReader, plane_idx: int, plane: Any, source: LineSource,
               ordinal: int) -> tuple[pl.DataFrame | None, pl.DataFrame, dict[str, int], int,
                                      int, int, dict[str, int]]:
    """The plane's ops (event columns less host and rank), its steps (STEP_SCHEMA less rank,
    candidate 0), the events of lines not read (by line), the counts of events dropped
    for a negative duration and unnamed, and of ops whose bytes are all memory spaces', and
    what the caller warns of (:data:`REPEATED`: events a line of the same name held again,
    read once; :data:`NO_OPS`: the async events read from a plane without an ``XLA Ops``
    line)."""
    table = op_table(plane)
    too_large = dict(source.too_large)  # TPU program ids are uint64 by design: not counted
    frames: dict[str, pl.DataFrame] = {}
    ignored: dict[str, int] = {}
    said = {REPEATED: 0, NO_OPS: 0}
    negative = unknown = 0
    for line_idx, line in enumerate(plane.lines):
        if line.name not in READ_LINES:
            n = source.count(plane_idx, line_idx, line)
            if n and line.name != "_counters_":
                ignored[f"{plane.name} line '{line.name}'"] = n
            continue
        df, n_neg, n_unknown = source.frame(reader, plane_idx, line_idx, line)
        negative, unknown = negative + n_neg, unknown + n_unknown
        if df is not None:  # a second line of the same name (another core) joins the first
            df = df.select(md=pl.col("name").cast(pl.String), start_ns="start_ns",
                           end_ns="end_ns", stream=pl.lit(line.id, pl.Int64),
                           done=pl.col("op").cast(pl.String), run_id="run_id")
            if line.name in frames:  # the same op at the same ns twice is a copy: read once
                joined = pl.concat([frames[line.name], df])
                df = joined.unique(subset=["md", "start_ns", "end_ns"], keep="first",
                                   maintain_order=True)
                said[REPEATED] += joined.height - df.height
            frames[line.name] = df
    source.too_large.clear()
    source.too_large.update(too_large)
    modules = _modules(table)
    if OPS_LINE not in frames and ASYNC_LINE in frames:  # the device timeline is missing
        said[NO_OPS] = frames[ASYNC_LINE].height
    if ASYNC_LINE in frames:
        frames[ASYNC_LINE] = lanes(until_done(frames[ASYNC_LINE], frames.get(OPS_LINE),
                                              table))
    runs = frames.get(MODULES_LINE, pl.DataFrame(schema={"start_ns": pl.Int64,
                                                         "end_ns": pl.Int64,
                                                         "run_id": pl.Int64}))
    # each program run's first op is what its launch on the host started (xla_host.py)
    parts = [first_ops(_activities(frames[line], table, modules, ordinal, False), runs,
                       ordinal) if line == OPS_LINE else
             _activities(frames[line], table, modules, ordinal, True).with_columns(
                 correlation_id=pl.lit(None, pl.Int64))
             for line in (OPS_LINE, ASYNC_LINE) if line in frames]
    ops = pl.concat(parts, how="vertical") if parts else None
    return ops, _steps(frames.get(STEPS_LINE), table, frames.get(MODULES_LINE)), ignored, \
        negative, unknown, all_spaces_ops(table), said


REPEATED, NO_OPS = "repeated", "no_ops_line"  # read_plane's counts for the caller to say


LANE_STREAM = ASYNC_LANE_STREAM
"""Async spans in flight together go to separate streams (the model's streams run one
activity at a time): lane k of the ``Async XLA Ops`` line is stream ``line id + (k+1) << 40``,
a number no real line id reaches."""


def until_done(spans: pl.DataFrame, ops: pl.DataFrame | None, table: pl.DataFrame
               ) -> pl.DataFrame:
    """Each async span up to the start of its done op (the span's ``hlo_op`` stat names it:
    the first event of that op on ``XLA Ops`` starting inside the span): the rest of the span
    is the done op itself, the wait the core could not hide, which is then counted once (by
    the done op), not twice. A span whose done op is not found keeps its end."""
    if ops is None or spans.is_empty():
        return spans
    names = table.select("md", name="op_name")
    done = ops.join(names, on="md", how="inner").select(
        done="name", done_start="start_ns").sort("done_start")
    keyed = spans.with_row_index("_row").sort("start_ns")
    found = keyed.join_asof(done, left_on="start_ns", right_on="done_start", by="done",
                            strategy="forward", check_sortedness=False)  # both sorted above
    return found.with_columns(end_ns=pl.when(pl.col("done_start").is_not_null() & (
        pl.col("done_start") <= pl.col("end_ns"))).then(pl.col("done_start"))
        .otherwise(pl.col("end_ns"))).sort("_row").drop("_row", "done_start")


def lanes(df: pl.DataFrame) -> pl.DataFrame:
    """Each span on a lane of its own stream, lanes reused as spans end: as few lanes as the
    most spans in flight at once (:func:`lane_numbers`)."""
    df = df.sort("start_ns", "end_ns", maintain_order=True)
    lane = lane_numbers(df["start_ns"].to_numpy(), df["end_ns"].to_numpy())
    return df.with_columns(stream=pl.col("stream") + (pl.Series(lane) + 1) * LANE_STREAM)


def lane_numbers(start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """The lane of each span (spans in (start, end) order), columnar: a sweep over the spans'
    starts and ends in time order (at one time the ends of spans begun earlier first, so a
    lane freed at t takes a span starting at t; a zero-length span's end right after its own
    start) keeps a stack of free lanes, ``width`` fresh ones (the most spans in flight) under
    those that spans free. A start pops the top, an end pushes its span's lane back. Within
    one slot of the stack pushes and pops alternate, so sorting the operations by slot pairs
    each pop with the push it takes; a span whose lane was freed by an earlier span gets that
    span's lane, followed back to a fresh lane by pointer jumping (each round halves every
    chain). Same lane count as greedy first-free-lane assignment; 1M spans, ~40 in flight:
    0.3 s against 1.1 s for a heap loop per span (benchmarks/RESULTS.md)."""
    n = len(start)
    if n == 0:
        return np.zeros(0, np.int64)
    order = _sweep_order(start, end)  # op 2k: span k's start, 2k + 1: its end
    push = (order & 1).astype(bool)  # an end pushes, a start pops
    free = np.cumsum(np.where(push, 1, -1))
    width = int(-free.min())
    size = np.concatenate([np.arange(1, width + 1), width + free])  # stack size after each op
    is_push = np.concatenate([np.ones(width, bool), push])
    slot = size + ~is_push  # the slot an op pushes to (its size after) or pops from (before)
    # a stable sort of small integers is a radix sort
    by_slot = np.argsort(slot.astype(np.int16) if width < 1 << 15 else slot, kind="stable")
    at = np.flatnonzero(~is_push[by_slot])
    pop_op, push_op = by_slot[at], by_slot[at - 1]
    span = order[pop_op - width] >> 1
    lane = np.zeros(n, np.int64)
    ptr = np.arange(n)  # a span on a fresh lane is its chain's root
    fresh = push_op < width  # the fresh lanes were pushed width-1 first, lane 0 last (top)
    lane[span[fresh]] = width - 1 - push_op[fresh]
    ptr[span[~fresh]] = order[push_op[~fresh] - width] >> 1
    while True:  # pointer jumping to each chain's root: each round halves every chain
        up = ptr[ptr]
        if np.array_equal(up, ptr):
            return lane[ptr]
        ptr = up


def _sweep_order(start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """The spans' starts (op ``2k``) and ends (``2k + 1``) in sweep order: by time; at one
    time the ends of spans of positive length first, then the starts in span order, each
    zero-length span's end right after its start. Two sorted runs merged: the starts with
    the zero-length ends (in span order: already by time) and the other ends (sorted; nearly
    sorted already, which the stable sort's runs use)."""
    n = len(start)
    zero = end == start
    ops = np.arange(2 * n)
    s_op = ops[((ops & 1) == 0) | np.repeat(zero, 2)]  # every start, and zero-length ends
    s_t = start[s_op >> 1]
    e_span = np.flatnonzero(~zero)
    e_span = e_span[np.argsort(end[e_span], kind="stable")]
    e_t = end[e_span]
    order = np.empty(2 * n, np.int64)
    order[np.arange(len(s_op)) + np.searchsorted(e_t, s_t, side="right")] = s_op
    order[np.arange(len(e_span)) + np.searchsorted(s_t, e_t, side="left")] = 2 * e_span + 1
    return order


def _activities(df: pl.DataFrame, table: pl.DataFrame, modules: pl.DataFrame, ordinal: int,
                spans: bool) -> pl.DataFrame:
    """A line's events with their ops' metadata. ``spans``: the ``Async XLA Ops`` line, whose
    events are async transfers in flight (named by their start op): activities of their
    own stream, with the transfer's bytes and no FLOPs (the start and done ops on ``XLA Ops``
    keep XLA's own figures, as XProf counts them). Bytes are the HBM bytes of the op's memory
    breakdown where it has one (:func:`_hbm_bytes`), else XLA's ``bytes_accessed``; an async
    start or done op on ``XLA Ops`` has none: the bytes move in the transfer's span, while the
    start op issues it and the done op waits for it (rated against a roof, their few ns made
    XProf's own roofline say 4096× of HBM bandwidth)."""
    ev = df.join(table, on="md", how="left", maintain_order="left") \
        .join(modules, on="program_id", how="left", maintain_order="left")
    flops = pl.lit(None, pl.Float64) if spans else pl.col("flops")
    return ev.select(
        device=pl.lit(ordinal, pl.Int64), stream="stream", kind=pl.lit("kernel"),
        name=pl.col("op_name").fill_null(pl.col("md")).cast(Text),
        start_ns="start_ns", end_ns="end_ns", op=pl.col("op_name").cast(Text),
        module=pl.col("module").cast(Text), program_id=_program_id(pl.col("program_id")),
        hlo_category=pl.col("hlo_category").cast(Text),
        flops=flops, bytes=pl.when(spans | ~pl.col("hlo_category").str.contains(_ISSUE_OR_WAIT)
                                   .fill_null(False))
        .then(pl.coalesce("hbm_bytes", "bytes_accessed")),
        dtype=_dtype(pl.col("full")).cast(Text),
        cost_source=pl.when(flops.is_not_null() | pl.col("bytes_accessed").is_not_null())
        .then(pl.lit("trace")).cast(Text))


def all_spaces_ops(table: pl.DataFrame) -> int:
    """Ops with bytes but no memory breakdown: their bytes are every memory space's (the
    reader says how many; their HBM roofline is then a lower bound)."""
    return table.filter(pl.col("bytes_accessed").is_not_null()
                        & pl.col("hbm_bytes").is_null()).height


def _program_id(text: pl.Expr) -> pl.Expr:
    """The ``program_id`` stat (uint64 text) as the model stores program ids: its 64 bits as
    an Int64 (:func:`tracelens.core.model.stored_program_id`, which ``/host:metadata`` goes
    through too); not a uint64: null."""
    return text.cast(pl.UInt64, strict=False).reinterpret(signed=True)


def _modules(table: pl.DataFrame) -> pl.DataFrame:
    """program id (text) -> module name, from the ``XLA Modules`` events' metadata names
    ``<module>(<program id>)``."""
    names = table["full"].to_list()
    found = {}
    for name in names:
        m = _MODULE_RUN.match(name)
        if m:
            found.setdefault(m.group(2), m.group(1))
    return pl.DataFrame({"program_id": list(found), "module": list(found.values())},
                        schema={"program_id": pl.String, "module": pl.String})


_ELEMENT = r"(pred|s4|s8|s16|s32|s64|u4|u8|u16|u32|u64|f8e4m3fn|f8e5m2|f8e4m3|bf16|f16|f32|f64)\["
_DTYPES = {"bf16": "bf16", "f16": "fp16", "f32": "fp32", "f64": "fp64", "f8e4m3fn": "fp8",
           "f8e5m2": "fp8", "f8e4m3": "fp8", "s8": "int8", "u8": "int8"}


def _dtype(full: pl.Expr) -> pl.Expr:
    """The dtype of an op's first operand as its HLO text gives it (``fusion(bf16[..] %x,
    ...)``: the inputs' type, the one a matrix unit's rate depends on; the parenthesis after
    the opcode, not a tuple result's: ``(f32[8,512], bf16[..]) fusion(bf16[..] %x, ...)`` is
    bf16); null when the text has no operand of a floating or 8-bit type."""
    operand = full.str.extract(r"\s[a-z][\w.-]*\(\s*" + _ELEMENT, 1)  # after the opcode
    return operand.replace_strict(_DTYPES, default=None, return_dtype=pl.String)


STEP_PROGRAMS = {**STEP_SCHEMA, "programs": pl.String}
"""A plane's device steps: STEP_SCHEMA and ``programs``, the programs that ran in each step
(the ``XLA Modules`` runs starting in it, in order, ``,``-joined)."""


def _steps(df: pl.DataFrame | None, table: pl.DataFrame, runs: pl.DataFrame | None
           ) -> pl.DataFrame:
    """The ``Steps`` line's events as steps (STEP_PROGRAMS): each named by its step number
    (an event whose name is no number is not a step)."""
    if df is None:
        return pl.DataFrame(schema=STEP_PROGRAMS)
    named = df.join(table.select("md", "full"), on="md", how="left")
    steps = named.select(step=pl.col("full").cast(pl.Int64, strict=False), start_ns="start_ns",
                         end_ns="end_ns").drop_nulls("step")
    steps = steps.group_by("step").agg(pl.col("start_ns").min(), pl.col("end_ns").max()) \
        .sort("start_ns")
    programs = pl.lit(None, pl.String)
    if runs is not None and runs.height:  # each run to the step it starts in (steps abut)
        run = runs.join(table.select("md", "full"), on="md", how="left").select(
            _run_start="start_ns", program=pl.col("full").str.extract(_MODULE_RUN.pattern, 1)
        ).sort("_run_start")
        owned = run.join_asof(steps.select("step", _run_start="start_ns"), on="_run_start",
                              strategy="backward").group_by("step", maintain_order=True) \
            .agg(programs=pl.col("program").str.join(","))
        steps = steps.join(owned, on="step", how="left", maintain_order="left")
        programs = pl.col("programs")
    return conform(steps.with_columns(rank=pl.lit(0), source=pl.lit("device-steps"),
                                      candidate=pl.lit(0), programs=programs), STEP_PROGRAMS)


CHIP_STATS = ("device_type_string", "peak_teraflops_per_second",
              "peak_hbm_bw_gigabytes_per_second")
"""The plane stats that name a TPU chip and give its peaks (:func:`device_row`)."""


def device_row(ordinal: int, stats: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """One DEVICE_FACTS_SCHEMA row (less host, rank and notes) from a TPU plane's stats: the
    chip's name as the trace gives it, vendor ``google``, and its own peaks (TFLOP/s; HBM in
    TB/s from the plane's GB/s), and the stats that could not be used."""
    bad: list[str] = []
    name = stats.get("device_type_string")
    peaks = {}
    for key, stat, scale in (("peak_tflops", "peak_teraflops_per_second", 1.0),
                             ("peak_hbm_tb_per_s", "peak_hbm_bw_gigabytes_per_second", 1e-3)):
        v = stats.get(stat)
        good = _number(v)
        if v is not None and not good:  # absent, zero, or not a number: unknown
            bad.append(stat)
        peaks[key] = good * scale if good else None
    row = {"device": ordinal, "name": name.strip() if isinstance(name, str) and name.strip()
           else None, "vendor": "google", **peaks}
    return row, bad


def with_device_steps(host: pl.DataFrame, device: list[pl.DataFrame]
                      ) -> tuple[pl.DataFrame, str | None]:
    """The steps of a file with TPU planes: the devices' ``Steps`` (one window per step
    number over the chips, candidate 0; several programs' runs per host step grouped by
    :func:`host_grouped`) and the host's step annotations as the second candidate (they are
    the host dispatching each step under JAX's asynchronous dispatch, and are used only when
    they hold the device time, as every step source must); and what the grouping did."""
    found = [d for d in device if d.height]
    if not found:
        return host, None
    merged = pl.concat(found).group_by("step").agg(
        pl.col("start_ns").min(), pl.col("end_ns").max(), pl.col("source").first(),
        pl.col("rank").first(), pl.col("candidate").first(),
        # the chips' programs of a step (one SPMD program runs on every chip)
        pl.col("programs").unique().sort().str.join("|")).sort("start_ns")
    merged, note = host_grouped(merged, host)
    return pl.concat([conform(merged, STEP_SCHEMA),
                      host.with_columns(candidate=pl.lit(1, pl.Int32))]), note


def host_grouped(device: pl.DataFrame, host: pl.DataFrame
                 ) -> tuple[pl.DataFrame, str | None]:
    """The device steps grouped into the host's annotated steps when a step runs several
    programs: the ``Steps`` line has one event per program run (``multi``: 8 for 4 host
    steps of ``value_and_grad`` then the update), where XProf's step is the host's step
    (its grouping gives every device event the group id of the host step that dispatched
    it, and combines the device step markers of one group id).

    Done only when what the trace holds leaves one answer: the host has one series of
    annotated steps, the device steps are ``m`` (> 1) times as many, every run of ``m``
    consecutive device steps runs the same programs in the same order, and each host step
    starts before the device steps it is given (dispatch precedes execution). The group
    takes the host step's number and spans its device steps. Otherwise the device steps
    stay as they are. Returns the steps and a sentence saying what was grouped (None:
    nothing)."""
    hs = host.filter(pl.col("step").is_not_null()).sort("start_ns")
    n_host, n_dev = hs.height, device.height
    if n_host == 0 or n_dev <= n_host or n_dev % n_host or hs["rank"].n_unique() != 1 \
            or hs["step"].n_unique() != n_host or device["programs"].null_count():
        return device, None
    m = n_dev // n_host
    seq = device["programs"].to_list()
    if any(seq[i] != seq[i % m] for i in range(n_dev)):  # one entry per device step
        return device, None
    group = pl.int_range(0, n_dev, eager=True) // m
    grouped = device.with_columns(_g=group).group_by("_g", maintain_order=True).agg(
        pl.col("start_ns").min(), pl.col("end_ns").max(), pl.col("source").first(),
        pl.col("rank").first(), pl.col("candidate").first()) \
        .with_columns(step=hs["step"], _host_start=hs["start_ns"])
    if (grouped["_host_start"] > grouped["start_ns"]).any():
        return device, None
    note = (f"{n_dev} device steps (one per program run: {', '.join(seq[:m])}) grouped into "
            f"the host's {n_host} annotated steps, {m} runs each, as XProf groups them")
    return grouped.drop("_g", "_host_start"), note
