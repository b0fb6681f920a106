"""The data model every parser fills and every analysis reads (docs/python-api.md#the-data-model).

A :class:`Trace` holds polars DataFrames with fixed schemas. A column a format cannot supply
is null, never guessed. Times are integer nanoseconds in the trace's clock.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Sequence, TypeVar

import polars as pl

from tracelens.core.categories import CATEGORIES, COMPUTE_CATEGORIES, KINDS  # noqa: F401 (re-export)
from tracelens.core.frames import distinct

CategoryDtype = pl.Enum(list(CATEGORIES))
KindDtype = pl.Enum(list(KINDS))
Text = pl.Categorical()
"""The dtype of the event frames' text columns: dictionary-encoded (each distinct string
stored once, rows hold 4-byte codes). A 2M-event trace has a few hundred distinct kernel
names; as plain strings every text column costs 16 bytes a row and every group-by or join
on it hashes every row."""
F = TypeVar("F", bound="FormatFacts")

ASYNC_LANE_STREAM = 1 << 40
"""Streams at and above this, on TPU ops (those with an ``hlo_category``: other formats'
stream ids, such as XLA:CPU's hashed threads, can be as large), hold a device's asynchronous
transfers in flight (TPU ``Async XLA Ops`` spans, one lane per span in flight at once: lane k
is stream ``(k + 1) * ASYNC_LANE_STREAM`` above the line's own): their time counts as memory
or communication in flight, but the core waits for them only at their done op, on its own op
timeline, so they are no stream the critical path orders work on."""

def on_async_lane() -> pl.Expr:
    """True for a TPU transfer's span in flight on an async lane (:data:`ASYNC_LANE_STREAM`):
    no activity of the core's own timeline (no stream order, no program's first op)."""
    return (pl.col("hlo_category").is_not_null()
            & (pl.col("stream") >= ASYNC_LANE_STREAM)).fill_null(False)


EVENT_SCHEMA: dict[str, pl.DataType] = {
    "host": Text,
    "rank": pl.Int32,
    "device": pl.Int32,
    "stream": pl.Int64,
    "kind": KindDtype,
    "name": Text,
    "start_ns": pl.Int64,
    "end_ns": pl.Int64,
    "category": CategoryDtype,
    "subcategory": Text,
    "rule": Text,
    "op": Text,
    "module": Text,
    "program_id": pl.Int64,
    "correlation_id": pl.Int64,
    "step": pl.Int32,
    "flops": pl.Float64,
    "bytes": pl.Float64,
    "dtype": Text,
    "dtype_source": Text,  # where dtype comes from: hlo, shapes, counters, trace, name
    "cost_source": Text,
    "cost_note": Text,  # why a compute kernel has no FLOPs (null when it has them)
    "msg_bytes": pl.Int64,
    "group_size": pl.Int32,
    "groups": Text,
    "group_name": Text,
    "type_source": Text,
    "size_source": Text,
    "launch": Text,
    "hlo_category": Text,
}
"""``trace.events``: one row per device activity. ``program_id`` is ours:
HLO module names repeat within one trace, so (program_id, op) is the key to the HLO.
``launch`` (also an addition): the kernel's launch shape as the trace gives it,
``grid=X,Y,Z block=X,Y,Z regs=N shared=B`` (the parts known), null when the trace has none.
``groups``: a collective's process group(s) as the trace gives them, member ids
comma-separated and groups ';'-separated: PyTorch the group of this rank (global ranks,
``Process Group Ranks``), XLA every replica group of the op (logical device ids, only in the
modes where those are device ids); null when unknown. ``group_name``: the process group's
name or description as the trace gives it (PyTorch ``pg_desc``: ``default_pg``,
``mesh_tp``, ...). ``type_source`` / ``size_source``: where a collective's type and
message size come from, as the reader found them (Kineto: ``record_param_comms``, the
issuing op such as ``c10d::alltoall_base_``, the ``nccl:all_to_all`` annotation's
``Input Dims``, or ``kernel name``: no op named one); null where the reader says nothing.
``hlo_category``: XLA's own category of a TPU op as the trace gives it
(``convolution fusion``, ``loop fusion``, ``copy-done``, ``all-reduce``, ...; the classifier's
signal for TPU ops), null elsewhere."""

HOST_EVENT_SCHEMA: dict[str, pl.DataType] = {
    "host": Text,
    "rank": pl.Int32,
    "pid": pl.Int64,
    "tid": pl.Int64,
    "name": Text,
    "start_ns": pl.Int64,
    "end_ns": pl.Int64,
    "correlation_id": pl.Int64,
    "kind": Text,
}
"""``trace.host_events``: API calls and annotations (launches, step markers, ...)."""

STEP_SCHEMA: dict[str, pl.DataType] = {
    "rank": pl.Int32,
    "step": pl.Int32,
    "start_ns": pl.Int64,
    "end_ns": pl.Int64,
    "source": pl.String,
    # a reader that offers several step sources (Kineto: GPU-side ProfilerStep annotations,
    # then CPU-side ones, then graph replays) gives each source's rows, numbered in its order
    # of preference (0 first); tracelens.loading.steps keeps one per rank. Null: the reader's only
    # one
    "candidate": pl.Int32,
}
"""``trace.steps``: one window per (rank, step)."""

DEVICE_SCHEMA: dict[str, pl.DataType] = {
    "host": Text,
    "rank": pl.Int32,
    "device": pl.Int32,
    "vendor": pl.String,
    "arch": pl.String,
    "product": pl.String,
    "compute_units": pl.Int32,
    "clock_mhz": pl.Float64,
    "memory_bytes": pl.Int64,
    "spec_id": pl.String,
    # the device's own peaks as its trace gives them (XSpace TPU planes:
    # peak_teraflops_per_second, peak_hbm_bw_gigabytes_per_second); null elsewhere
    "peak_tflops": pl.Float64,
    "peak_hbm_tb_per_s": pl.Float64,
}

DEVICE_FACTS_SCHEMA: dict[str, pl.DataType] = {
    "host": Text,
    "rank": pl.Int32,
    "device": pl.Int32,
    "name": pl.String,  # the device's own name as the trace gives it (null: none or empty)
    "vendor": pl.String,  # as the trace says it (XSpace: the raw device_vendor, lower case)
    "arch": pl.String,  # when the trace gives it directly (rocprofv3: the gfx target)
    "compute_major": pl.Int64,  # compute capability (ROCm: HIP's gcnArch, 9.4 = gfx942)
    "compute_minor": pl.Int64,
    "compute_units": pl.Int32,
    "clock_mhz": pl.Float64,
    "memory_bytes": pl.Int64,
    "memory_bandwidth": pl.Float64,  # bytes/s, when the trace reports it (ROCm XSpace)
    "described": pl.Boolean,  # Kineto: the file has a deviceProperties entry for it
    "peak_tflops": pl.Float64,  # XSpace TPU planes: the plane's own dense peak (TFLOP/s)
    "peak_hbm_tb_per_s": pl.Float64,  # and HBM bandwidth (TB/s)
    "agent": pl.Int64,  # rocprofv3: the HSA agent node id (how warnings name the GPU)
    # null: a GPU to identify; "replaced": identified for its notes, then left out (XSpace GPU
    # planes of a file whose XLA:CPU devices are analyzed instead); "cpu": such a CPU device
    "role": pl.String,
    "notes_at": pl.Int32,  # where its identification notes go in the file's warnings
    "file_notes_at": pl.Int32,  # where notes about several devices of the file go
}
"""What a reader hands over in ``trace.devices`` (facts only): :mod:`tracelens.loading.devices`
identifies each product from them right after reading and turns the frame into
DEVICE_SCHEMA. ``notes_at`` keeps each identification note where the reader would have
warned it (the count of the file's warnings at that point)."""

MODULE_SCHEMA: dict[str, pl.DataType] = {
    "host": Text,
    "rank": pl.Int32,
    "program_id": pl.Int64,
    "module": pl.String,
    "hlo_proto": pl.Binary,
}
"""``trace.modules``: compiled programs the trace carries (XSpace ``/host:metadata``): the
serialized ``xla.HloProto`` of each (host, program_id), for the cost model."""

DEVICE_KINDS = {"google": "TPU", "cpu": "CPU"}
"""A device's kind by the model's ``vendor`` (``trace.devices``), as labels name it
(``TPU0``, ``host/GPU3``): readers set ``google`` only on TPU planes and ``cpu`` only on
XLA:CPU devices; every other vendor (or none) is a GPU's."""


def device_kind(vendor: pl.Expr) -> pl.Expr:
    """:data:`DEVICE_KINDS` of a ``vendor`` column (``GPU`` for any other)."""
    return vendor.cast(pl.String).str.to_lowercase().replace_strict(
        DEVICE_KINDS, default="GPU", return_dtype=pl.String)


_U64 = 1 << 64


def stored_program_id(value: object) -> int | None:
    """A program id as the Int64 ``program_id`` columns hold it. XLA's ids are 64-bit: GPU
    program ids are non-negative int64s, TPU ones uint64 fingerprints (half of them above
    2^63-1); one above 2^63-1 is stored as the same 64 bits read signed (two's complement),
    so the ids of events and of ``/host:metadata`` still join, and
    :func:`shown_program_id` gives the trace's own number back. Anything else (not an
    integer, outside 64 bits) is unknown."""
    if type(value) is not int or not -(1 << 63) <= value < _U64:
        return None
    return value - _U64 if value >= 1 << 63 else value


def shown_program_id(pid: int | None) -> int | None:
    """The program id as the trace writes it (a stored negative id is a uint64's 64 bits)."""
    return None if pid is None else pid % _U64

SCHEMAS: dict[str, dict[str, pl.DataType]] = {
    "events": EVENT_SCHEMA,
    "host_events": HOST_EVENT_SCHEMA,
    "steps": STEP_SCHEMA,
    "devices": DEVICE_SCHEMA,
    "modules": MODULE_SCHEMA,
}


# the trace suffixes a host's file name ends with (XSpace, Kineto, gzipped or not), and the
# millisecond stamp PyTorch's tensorboard_trace_handler adds after ``<host>_<pid>``
_TRACE_SUFFIX = re.compile(r"(?:\.xplane\.pb|(?:\.pt)?(?:\.trace)?\.json)(?:\.gz)?$|\.gz$",
                           re.IGNORECASE)
_HANDLER_STAMP = re.compile(r"\.\d{10,}$")


def host_from_file_name(name: str) -> str:
    """The host a trace file names when the trace itself names none: the file name less the
    trace suffix (``.xplane.pb``, ``.pt.trace.json.gz``, ``.json``, ...) and PyTorch's
    trace-handler stamp; the dots of the rest stay (``Qwen1.5-0.5B-Chat__1016005`` was cut
    to ``Qwen1`` before, a host name ``node1.cluster`` to ``node1``)."""
    stem = _TRACE_SUFFIX.sub("", name)
    return _HANDLER_STAMP.sub("", stem) or name


@dataclass
class HostInfo:
    """One host of a trace: the file it was read from and when its profile started."""

    path: str | None = None
    # False: the trace names no host and the reader made the name up (Kineto: ``rank<N>`` or
    # the file name), so it names a rank: counts say "ranks", not "hosts"
    named: bool = True
    # wall-clock ns of the profile start (XSpace ``Task Environment``); None: not recorded
    profile_start_ns: int | None = None
    ranks: list[int] = field(default_factory=list)  # its ranks, once hosts are combined
    paths: list[str] = field(default_factory=list)  # the file of each of those ranks
    pid: int | None = None  # the process that wrote the file (XSpace process_id), if recorded


@dataclass
class RankInfo:
    """One rank of a job combined from several files (``tracelens.loading.combine``)."""

    rank: int
    host: str
    pid: int | None
    path: str
    format: str | None


@dataclass
class ProcessInfo:
    """One profiled process of a file that holds several on one host clock (rocprofv3, RPD):
    a rank, with its lifetime on that clock (:class:`HostClockFacts`); ``tracelens.loading.combine``
    puts the processes of several files on one clock from these."""

    rank: int
    host: str | None
    pid: int | None
    init_ns: int | None
    fini_ns: int | None


@dataclass(frozen=True)
class Membership:
    """The place in a distributed job a file states for the process that wrote it (Kineto's
    ``distributedInfo``): its rank and the job's world size, None where the file does not say.
    A reader whose format states it by rank sets one even when the values are missing
    (``tracelens.loading.jobs`` then tells the file's process by nothing else)."""

    rank: int | None
    world_size: int | None


def world_sizes(metas: Sequence["TraceMeta"]) -> tuple[int, ...]:
    """The world sizes the files state (``meta.member``), distinct and sorted: a job's
    files agree on one (an analysis infers process groups from it)."""
    return tuple(sorted({m.member.world_size for m in metas if m.member is not None
                         and isinstance(m.member.world_size, int)
                         and not isinstance(m.member.world_size, bool)
                         and m.member.world_size > 0}))


COSTED_ATEN_OPS: frozenset[str] = frozenset({
    "aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::matmul", "aten::linear",
    "aten::_scaled_mm", "aten::_grouped_mm", "aten::_scaled_grouped_mm",
    "aten::scaled_dot_product_attention", "aten::_scaled_dot_product_flash_attention",
    "aten::_scaled_dot_product_efficient_attention",
    "aten::_scaled_dot_product_cudnn_attention",
    "aten::_scaled_dot_product_flash_attention_backward",
    "aten::_scaled_dot_product_efficient_attention_backward",
    "aten::_scaled_dot_product_cudnn_attention_backward",
    "aten::convolution", "aten::_convolution", "aten::convolution_backward",
})
"""The ATen ops whose FLOPs come from their recorded shapes (GEMM, grouped GEMM, attention,
convolution:
``tracelens.cost.shapes`` has a rule for each); a reader keeps these ops' shapes."""


@dataclass
class OpShapes:
    """The recorded shapes of costed ATen ops (:data:`COSTED_ATEN_OPS`) and the kernels they
    launched, as a reader hands them over: ``tracelens.cost.shapes.cost_shapes`` costs the
    kernels from them right after reading, then drops them."""

    # one entry per leaf costed op execution (its uid): (name, Input Dims, Input type,
    # Concrete Inputs), as the profiler recorded them
    ops: dict[int, tuple[str, Any, Any, Any]] = field(default_factory=dict)
    # one row per kernel launched inside one: ``row`` (its index in trace.events as read),
    # ``uid`` (the op), ``main`` (the op's longest kernel, which carries its cost; the others
    # carry 0 so every execution counts once), ``collective`` (its dtype is the collective's)
    kernels: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema={
        "row": pl.UInt32, "uid": pl.Int64, "main": pl.Boolean, "collective": pl.Boolean}))
    notes_at: int = 0  # where its note goes in the file's warnings


@dataclass
class KernelCounters:
    """Hardware counters one process recorded for its kernel dispatches (rocprofv3 ``--pmc``),
    as a reader hands them over: ``tracelens.cost.counters.cost_counters`` costs the kernels from
    them right after reading, then drops them."""

    rank: int
    # one row per kernel event of the rank, in the reader's order; one column per counter
    # collected (its name as rocprofv3 writes it, values summed over hardware instances;
    # null: not collected for that dispatch). No column: the process recorded no counters
    values: pl.DataFrame
    unmatched: int = 0  # dispatch ids with counters that match no kernel dispatch
    notes_at: int = 0  # where its note goes in the file's warnings


@dataclass(frozen=True)
class FormatFacts:
    """What one file's reader says about how it read that file, beyond the frames. Each format
    subclasses it with typed fields in its own parser package (``parsers.xspace.XSpaceFacts``:
    which decoder ran); the core carries them, in reading order, and reads only the
    format-neutral kinds below (:meth:`TraceMeta.facts`), which a format's facts extend or
    stand beside."""

    path: str


@dataclass(frozen=True)
class HostClockFacts(FormatFacts):
    """A file that holds several profiled processes on one host clock (rocprofv3, RPD): each
    process a rank, with its lifetime on that clock (``clock``: its name);
    ``tracelens.loading.combine``
    puts the processes of several files on one clock from these."""

    processes: tuple[ProcessInfo, ...] = ()
    clock: str | None = None


@dataclass(frozen=True)
class CounterFacts(FormatFacts):
    """The hardware counters a reader hands over per process (:class:`KernelCounters`):
    ``tracelens.cost.counters`` costs the kernels from them right after reading and drops
    them (they never leave the process that read the file)."""

    processes: tuple[KernelCounters, ...] = ()


@dataclass(frozen=True)
class ShapeFacts(FormatFacts):
    """The recorded shapes of costed ATen ops a reader hands over (:class:`OpShapes`):
    ``tracelens.cost.shapes`` costs the kernels from them right after reading and drops
    them."""

    shapes: OpShapes = field(default_factory=OpShapes)


NoticeValue = str | int | float | None
"""What a notice's field holds: small, picklable, and what ``str.format`` renders."""

SUBJECTS = ("file", "host", "table")
"""The fields that say what a notice is about (the file read, its host, a file of the set it
stands for: a rocprofv3 CSV table): the same notice of several hosts or files differs only in
these (:func:`tracelens.core.notices.fold_per_host` says it once)."""


@dataclass(frozen=True)
class Notice:
    """One warning as data: an approximation or repair a reader or stage made. ``code`` names
    its kind (stable: merges and folds tell notices apart by it, never by their text);
    ``fields`` are the values it is built from, in the order given (``file`` and ``host``
    name what it is about, :data:`SUBJECTS`); ``template`` renders them (``str.format``).
    :attr:`text` is the one place a notice becomes words, so a count summed over hosts is
    summed from its field, not read back from a sentence."""

    code: str
    template: str
    fields: tuple[tuple[str, NoticeValue], ...] = ()

    @classmethod
    def of(cls, code: str, template: str, **fields: NoticeValue) -> "Notice":
        """The notice ``code`` with ``fields`` (keywords, in the template's order)."""
        return cls(code, template, tuple(fields.items()))

    @property
    def text(self) -> str:
        """What the outputs show."""
        return self.template.format_map(dict(self.fields))

    def get(self, name: str, default: NoticeValue = None) -> NoticeValue:
        """The value of field ``name`` (``default`` without one)."""
        return next((v for k, v in self.fields if k == name), default)

    def about(self, file: str) -> "Notice":
        """This notice said of ``file`` (a part's notice, given its file by the reader that
        read it): ``<file>: <text>``."""
        if any(k == "file" for k, _ in self.fields):
            raise ValueError(f"notice {self.code} names its file already")
        return Notice(self.code, "{file}: " + self.template, (("file", file), *self.fields))

    @property
    def subject(self) -> str | None:
        """The file or host it is about, the one its text names first (None: neither)."""
        at = {k: self.template.find("{" + k) for k in SUBJECTS}
        found = [(at[k] if at[k] >= 0 else len(self.template), str(v))
                 for k, v in self.fields if k in SUBJECTS and v is not None]
        return min(found)[1] if found else None

    @property
    def kind(self) -> tuple[object, ...]:
        """What the same notice of other hosts or files shares: all but its subjects."""
        return (self.code, self.template,
                tuple(f for f in self.fields if f[0] not in SUBJECTS))


@dataclass
class TraceMeta:
    """Where a trace came from and every approximation or repair made while reading it."""

    sources: list[dict[str, str]] = field(default_factory=list)  # [{"path", "format"}]
    # every approximation or repair made while reading and loading, in order
    notices: list[Notice] = field(default_factory=list)
    alignment: str = "none"  # how hosts were put on one clock
    # where trace.steps came from: "annotation", "marker:<regex>",
    # "program:<module>(<program_id>)" or "none" (tracelens.loading.steps)
    steps_source: str = "none"
    hosts: dict[str, HostInfo] = field(default_factory=dict)
    ranks: list[RankInfo] = field(default_factory=list)  # set when several files are combined
    # the readers' own facts about each file read, in reading order (FormatFacts)
    format_facts: list[FormatFacts] = field(default_factory=list)
    # the per-op cost table of tracelens.cost.events.annotate (None before costs are annotated)
    op_costs: pl.DataFrame | None = None
    # what the same-stream clip took per (kind, name, nested: XLA:CPU nesting, else overlap)
    # (tracelens.loading.prepare.CLIP_SCHEMA), as loaded, before any filter; None before the clip
    clips: pl.DataFrame | None = None
    # why hosts could not be put on one clock; the loader tries collective ends before it warns
    unaligned: Notice | None = None
    member: Membership | None = None  # the file's place in its job, when the format says

    @property
    def warnings(self) -> list[str]:
        """The notices' texts, in order (as every output shows them, before folding)."""
        return [n.text for n in self.notices]

    def warn(self, notice: Notice) -> None:
        """Record ``notice`` (once: the same notice again is not repeated). A sentence is
        refused where it is given, not where it is rendered: warnings are typed."""
        if not isinstance(notice, Notice):
            raise TypeError(f"TraceMeta.warn takes a Notice, not {type(notice).__name__}")
        if notice not in self.notices:
            self.notices.append(notice)

    def facts(self, kind: type[F]) -> list[F]:
        """The readers' facts of ``kind`` (a :class:`FormatFacts` subclass), in reading
        order."""
        return [f for f in self.format_facts if isinstance(f, kind)]


@dataclass
class Trace:
    """All activity of one job, as frames with the schemas above."""

    events: pl.DataFrame
    host_events: pl.DataFrame
    steps: pl.DataFrame
    devices: pl.DataFrame
    meta: TraceMeta = field(default_factory=TraceMeta)
    modules: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=MODULE_SCHEMA))


def conform(df: pl.DataFrame, schema: dict[str, pl.DataType]) -> pl.DataFrame:
    """Add missing columns as typed nulls, cast, and order columns as the schema says."""
    if not df.columns:  # selecting literals from a frame without columns would give one row
        return pl.DataFrame(schema=schema)
    exprs = []
    for name, dtype in schema.items():
        if name in df.columns:
            exprs.append(pl.col(name).cast(dtype))
        else:
            exprs.append(pl.lit(None, dtype=dtype).alias(name))
    return df.select(exprs)


def validate(trace: Trace, classified: bool = True) -> list[str]:
    """Return every way ``trace`` breaks the model's contract (empty list when it holds).

    Checked: exact schemas, non-null identity columns, ``end_ns >= start_ns``, and (when
    ``classified``) a category and rule on every event.
    """
    problems: list[str] = []
    for name, schema in SCHEMAS.items():
        df: pl.DataFrame = getattr(trace, name)
        if dict(df.schema) != schema:
            differ = {c: (df.schema.get(c), t) for c, t in schema.items() if df.schema.get(c) != t}
            problems.append(f"{name}: schema {dict(df.schema)} != {schema} (differing: "
                            f"{differ}, extra: {[c for c in df.columns if c not in schema]})")
    if problems:
        return problems
    ev = trace.events
    required = ["host", "rank", "device", "stream", "kind", "name", "start_ns", "end_ns"]
    if classified:
        required += ["category", "rule"]
    for col in required:
        n = ev[col].null_count()
        if n:
            problems.append(f"events.{col}: {n} nulls")
    bad = ev.filter(pl.col("end_ns") < pl.col("start_ns")).height
    if bad:
        problems.append(f"events: {bad} rows with end_ns < start_ns")
    st = trace.steps
    if st.filter(pl.col("end_ns") < pl.col("start_ns")).height:
        problems.append("steps: rows with end_ns < start_ns")
    dev_keys = trace.devices.select("host", "rank", "device").unique()
    missing = distinct(ev, ["host", "rank", "device"]).join(
        dev_keys, on=["host", "rank", "device"], how="anti")
    if missing.height:
        problems.append(f"events: {missing.height} (host, rank, device) not in devices")
    return problems


# -- allocator events (tracelens memory) --------------------------------------------------
MEMORY_SCHEMA: dict[str, pl.DataType] = {
    "host": pl.String,
    "allocator": pl.String,  # XSpace: allocator_name, else index_on_host / device_ordinal
    "seq": pl.Int64,  # the event's order in the file (ties in time keep it)
    "time_ns": pl.Int64,  # timestamp_ns + floor(offset_ps / 1000), as every event's start
    "offset_ps": pl.Int64,  # XSpace: the event's offset in its line (XProf's own time)
    "kind": pl.String,  # "alloc" or "free"
    "requested_bytes": pl.Int64,
    "allocation_bytes": pl.Int64,
    "address": pl.UInt64,
    "op": pl.String,
    "shape": pl.String,
    "dtype": pl.String,
    "region": pl.String,
    "step_id": pl.Int64,  # the step the trace itself gives the event (XSpace group_id)
    "in_use": pl.Int64,  # heap + stack after the event (XProf's "bytes in use")
    "heap_bytes": pl.Int64,  # XSpace bytes_allocated; Kineto Total Allocated
    "stack_bytes": pl.Int64,  # XSpace bytes_reserved (the allocator's stack reservation)
    "reserved_bytes": pl.Int64,  # Kineto Total Reserved (the caching allocator's segments)
    "free_bytes": pl.Int64,  # XSpace bytes_available
    "fragmentation": pl.Float64,  # as the allocator reports it (XSpace), else null
    "peak_lifetime": pl.Int64,  # XSpace peak_bytes_in_use: the allocator's lifetime peak
    "capacity_bytes": pl.Int64,  # the device's memory as the file's device properties say
}
"""One row per allocator event (allocation or free), in file order. A column the format does
not record is null, never zero."""


def empty_memory() -> pl.DataFrame:
    """A frame of no allocator events."""
    return pl.DataFrame(schema=MEMORY_SCHEMA)
