"""Writer for XSpace files, the mirror of ``parsers.xprof``: tests and sample traces use it to
build traces whose answers are known by construction.

``write(trace, path)`` writes any :class:`~tracelens.core.model.Trace` (synthetic ones from
``tracelens_dev.synth`` at millions of events: lines are encoded in bulk by
``tracelens_dev.writers.xspace_encode``) as one file per host or an XProf log directory.
``build_xspace`` builds a small XSpace from a list of :class:`Activity` for hand-made test
traces.

It writes what jax.profiler writes for a GPU run (shared/reference/xprof.md §2.2): one
``/device:GPU:<k>`` plane per device with plane stats and ``Stream #N`` lines, interned string
stats (``ref_value``), host step markers with ``step_num`` on a ``python`` line of
``/host:CPU``, and a ``Task Environment`` plane with the profile start time. Line timestamps
are relative to the profile start, as JAX exports them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import numpy as np
import polars as pl

from tracelens_dev.writers import plain_text

from parsers.xplane_schema import MEMORY_SPACE_HBM, memory_breakdown_class, xspace_class
from tracelens.core.model import HostInfo, Trace
from tracelens_dev.hints import WriterHints, writer_hints

AMD_MI300X_STATS: dict[str, Any] = {
    "device_vendor": "AMD", "clock_rate": 2_100_000, "core_count": 304,
    "memory_bandwidth": 2_662_400_000_000, "memory_size": 206_141_652_992,
    "compute_cap_major": 9, "compute_cap_minor": 4,
}


class UInt64(int):
    """A stat value written as ``uint64_value`` whatever its size (plain ints are int64, or
    uint64 from 2**63 on)."""


class InlineStr(str):
    """A stat value written inline as ``str_value`` (plain strs are interned ``ref_value``)."""


class Ref(int):
    """A raw ``ref_value`` (an XStatMetadata id, possibly one the plane does not define)."""


@dataclass
class Activity:
    """One device activity. ``stats`` values: str (interned), int, float or bytes."""

    device: int
    stream: int
    name: str
    start_ns: int
    dur_ns: int
    stats: dict[str, Any] = field(default_factory=dict)
    line_name: str | None = None  # default "Stream #<stream>"
    # the event metadata's own stats and display name, set by the first activity of a name
    # (TPU planes keep an op's hlo_category, flops, bytes_accessed, program_id there)
    md_stats: dict[str, Any] = field(default_factory=dict)
    display_name: str | None = None


class _PlaneBuilder:
    def __init__(self, plane: Any) -> None:
        self.plane = plane
        self._stat_ids: dict[str, int] = {}
        self._event_ids: dict[str, int] = {}
        self._lines: dict[tuple[int, str], Any] = {}

    def stat_id(self, name: str) -> int:
        if name not in self._stat_ids:
            sid = len(self._stat_ids) + 1
            self._stat_ids[name] = sid
            self.plane.stat_metadata[sid].id = sid
            self.plane.stat_metadata[sid].name = name
        return self._stat_ids[name]

    def event_id(self, name: str) -> int:
        if name not in self._event_ids:
            eid = len(self._event_ids) + 1
            self._event_ids[name] = eid
            self.plane.event_metadata[eid].id = eid
            self.plane.event_metadata[eid].name = name
        return self._event_ids[name]

    def set_stat(self, stat: Any, name: str, value: Any) -> None:
        stat.metadata_id = self.stat_id(name)
        if isinstance(value, UInt64):
            stat.uint64_value = int(value)
        elif isinstance(value, Ref):
            stat.ref_value = int(value)
        elif isinstance(value, InlineStr):
            stat.str_value = str(value)
        elif value is None:
            pass  # a stat with no value set
        elif isinstance(value, bool):
            stat.int64_value = int(value)
        elif isinstance(value, int):
            if value >= 2**63:
                stat.uint64_value = value
            else:
                stat.int64_value = value
        elif isinstance(value, float):
            stat.double_value = value
        elif isinstance(value, bytes):
            stat.bytes_value = value
        else:
            stat.ref_value = self.stat_id(str(value))

    def describe(self, name: str, stats: dict[str, Any], display_name: str | None) -> None:
        """Set an event metadata's stats and display name, once (later calls keep it)."""
        md = self.plane.event_metadata[self.event_id(name)]
        if md.stats or md.display_name:
            return
        if display_name:
            md.display_name = display_name
        for k, v in stats.items():
            self.set_stat(md.stats.add(), k, v)

    def line(self, line_id: int, name: str) -> Any:
        key = (line_id, name)
        if key not in self._lines:
            line = self.plane.lines.add()
            line.id = line_id
            line.name = name
            line.timestamp_ns = 0
            self._lines[key] = line
        return self._lines[key]

    def add_event(self, line: Any, name: str, start_ns: int, dur_ns: int,
                  stats: dict[str, Any]) -> None:
        ev = line.events.add()
        ev.metadata_id = self.event_id(name)
        ev.offset_ps = (start_ns - line.timestamp_ns) * 1000
        ev.duration_ps = dur_ns * 1000
        for k, v in stats.items():
            self.set_stat(ev.stats.add(), k, v)


def build_xspace(activities: Iterable[Activity], *, host: str = "host0",
                 device_stats: dict[int, dict[str, Any]] | None = None,
                 steps: Iterable[tuple[int, int, int]] = (),
                 cpu_ops: Iterable[tuple[int, int, str, int, int]] = (),
                 annotations: Iterable[tuple[int, str, int, int]] = (),
                 profile_start_ns: int | None = 1_700_000_000_000_000_000,
                 device_plane: str = "/device:GPU:",
                 modules: Iterable[tuple[str, bytes, Any]] = ()) -> bytes:
    """Serialize a single-host XSpace.

    ``device_stats``: plane stats per GPU ordinal (planes are written even for idle devices).
    ``steps``: (step_num, start_ns, end_ns) host step markers. ``cpu_ops``: XLA:CPU op events
    (thread id, device_ordinal, hlo_op, start_ns, dur_ns) on ``tf_XLAEigen`` host threads.
    ``annotations``: (thread id, name, start_ns, dur_ns) host events without stats (TraceMe).
    ``device_plane``: the device planes' name prefix (``/device:TPU:`` for a TPU trace).
    ``modules``: ``/host:metadata`` entries (name, serialized HloProto, program_id stat value
    or None).
    """
    space = xspace_class()()
    space.hostnames.append(host)
    acts = sorted(activities, key=lambda a: (a.device, a.stream, a.start_ns))
    ordinals = sorted(set(device_stats or {}) | {a.device for a in acts})
    builders: dict[int, _PlaneBuilder] = {}
    for k in ordinals:
        plane = space.planes.add()
        plane.id = k
        plane.name = f"{device_plane}{k}"
        b = builders[k] = _PlaneBuilder(plane)
        for name, value in (device_stats or {}).get(k, AMD_MI300X_STATS).items():
            b.set_stat(plane.stats.add(), name, value)
    for a in acts:
        b = builders[a.device]
        line = b.line(a.stream, a.line_name or f"Stream #{a.stream}")
        b.add_event(line, a.name, a.start_ns, a.dur_ns, a.stats)
        if a.md_stats or a.display_name:
            b.describe(a.name, a.md_stats, a.display_name)
    host_plane = space.planes.add()
    host_plane.name = "/host:CPU"
    hb = _PlaneBuilder(host_plane)
    steps = list(steps)
    if steps:
        py = hb.line(1, "python")
        for num, start, end in steps:
            hb.add_event(py, "train", start, end - start, {"step_num": num, "_r": 1})
    for tid, name, start, dur in annotations:
        hb.add_event(hb.line(tid, f"Host Threads/{tid}"), name, start, dur, {})
    for tid, ordinal, op, start, dur in cpu_ops:
        line = hb.line(tid, f"tf_XLAEigen/{tid}")
        hb.add_event(line, op, start, dur, {"hlo_op": op, "hlo_module": "jit_step",
                                           "program_id": 1, "device_ordinal": ordinal})
    modules = list(modules)
    if modules:
        md_plane = space.planes.add()
        md_plane.name = "/host:metadata"
        mb = _PlaneBuilder(md_plane)
        for name, hlo, program_id in modules:
            md = md_plane.event_metadata[mb.event_id(name)]
            mb.set_stat(md.stats.add(), "Hlo Proto", hlo)
            if program_id is not None:
                mb.set_stat(md.stats.add(), "program_id", program_id)
    if profile_start_ns is not None:
        env = space.planes.add()
        env.name = "Task Environment"
        eb = _PlaneBuilder(env)
        eb.set_stat(env.stats.add(), "profile_start_time", profile_start_ns)
    return space.SerializeToString()


# ---------------------------------------------------------------------------------------------
# Writing a whole Trace (synthetic traces at any scale): ``write(trace, path)``.
# ---------------------------------------------------------------------------------------------

DEFAULT_PROFILE_START_NS = 1_795_000_000_000_000_000
_UINT64_STATS = frozenset({"memory_bandwidth", "memory_size", "profile_start_time",
                           "profile_stop_time", "correlation_id"})
_AMD_CAP = {"gfx90a": (9, 0), "gfx942": (9, 4), "gfx950": (9, 5)}
_MEMCPY_TYPE = {"h2d": "MemcpyH2D", "d2h": "MemcpyD2H", "d2d": "MemcpyD2D", "p2p": "MemcpyP2P"}
_CUDA_KINDS = {"h2d": ("pageable", "device"), "d2h": ("device", "pageable"),
               "d2d": ("device", "device"), "p2p": ("device", "device")}
# Stats written on device events, in the collector's order (xprof.md §2.2).
_DEVICE_STATS = ("correlation_id", "kernel_details", "memcpy_details", "hlo_op", "hlo_module",
                 "program_id")


def _set_plain_stat(plane_builder: _PlaneBuilder, stat: Any, name: str, value: Any) -> None:
    """A plane-level stat typed as the XLA collectors type it (strings inline, not interned)."""
    stat.metadata_id = plane_builder.stat_id(name)
    if isinstance(value, str):
        stat.str_value = value
    elif isinstance(value, bytes):
        stat.bytes_value = value
    elif isinstance(value, float):
        stat.double_value = value
    elif name in _UINT64_STATS:
        stat.uint64_value = int(value)
    else:
        stat.int64_value = int(value)


def plane_stats_for(device: dict[str, Any], hints: WriterHints) -> list[tuple[str, Any]]:
    """XSpace plane stats of one ``trace.devices`` row: the device model's own list when the
    trace carries one (``meta.writer.plane_stats``), else derived from the row."""
    if hints.plane_stats:
        return [(str(k), v) for k, v in hints.plane_stats]
    vendor = (device.get("vendor") or "").lower()
    out: list[tuple[str, Any]] = []
    if vendor in ("amd", "nvidia"):
        out.append(("device_vendor", "AMD" if vendor == "amd" else "Nvidia"))
    if device.get("clock_mhz") is not None:
        out.append(("clock_rate", int(round(device["clock_mhz"] * 1000))))
    if device.get("compute_units") is not None:
        out.append(("core_count", int(device["compute_units"])))
    if device.get("memory_bytes") is not None:
        out.append(("memory_size", int(device["memory_bytes"])))
    arch = device.get("arch") or ""
    cap = _AMD_CAP.get(arch)
    if cap is None and arch.startswith("sm_") and arch[3:].isdigit() and len(arch) >= 5:
        cap = (int(arch[3:-1]), int(arch[-1]))
    if cap is not None:
        out += [("compute_cap_major", cap[0]), ("compute_cap_minor", cap[1])]
    if arch.startswith("gfx"):
        out.append(("gpu_device_name", arch))
    elif vendor == "nvidia" and device.get("product"):
        out.append(("gpu_device_name", str(device["product"])))
    return out


def _kernel_details(style: str, geometry: dict[str, Any] | None) -> str:
    g = geometry or {}
    grid = ",".join(str(x) for x in g.get("grid", (1, 1, 1)))
    block = ",".join(str(x) for x in g.get("block", (256, 1, 1)))
    regs, shared = int(g.get("registers", 0)), int(g.get("shared_bytes", 0))
    if style == "cuda":
        return (f"regs:{regs} static_shared:{shared} dynamic_shared:0 grid:{grid} "
                f"block:{block} occ_pct:50")
    if style == "rocprofiler-sdk":
        return f" grid:{grid} block:{block} private_mem:0 group_mem:{shared} occ_pct:0"
    return (f"regs:{regs} static_shared:{shared} dynamic_shared:0 grid:{grid} block:{block} "
            "private_mem:0")


class _Interner:
    """String stats interned as stat metadata (``ref_value``), ids shared with stat names."""

    def __init__(self, builder: _PlaneBuilder) -> None:
        self.b = builder

    def ids(self, values: pl.Series) -> np.ndarray:
        uniq = values.drop_nulls().unique(maintain_order=True).to_list()
        ids = [self.b.stat_id(v) for v in uniq]
        return values.replace_strict(uniq, ids, default=0, return_dtype=pl.Int64).to_numpy()


def _line_name(style: str, stream: int, kinds: pl.DataFrame) -> str:
    if style == "plain":
        return f"Stream #{stream}"
    types: list[str] = []
    for kind, sub in kinds.iter_rows():
        t = ("Kernel" if kind == "kernel" else "Memset" if kind == "memset"
             else _MEMCPY_TYPE.get(sub or "", "MemcpyOther"))
        if t not in types:
            types.append(t)
    return f"Stream #{stream}({','.join(types)})"


def _events_line(b: _PlaneBuilder, interner: _Interner, line_id: int, line_name: str,
                 ev: pl.DataFrame, stat_cols: dict[str, tuple[int, pl.Series]]) -> bytes:
    """One line of events (``ev``: name, start_ns, end_ns, sorted) with the given stats:
    {stat name: (value field, values)}; string stats are interned, nulls left out."""
    from tracelens_dev.writers.xspace_encode import Column, encode_events, line_bytes

    names = ev["name"]
    uniq = names.unique(maintain_order=True).to_list()
    md = names.replace_strict(uniq, [b.event_id(n) for n in uniq],
                              return_dtype=pl.Int64).to_numpy()
    start = ev["start_ns"].to_numpy()
    ts = int(start.min())
    columns = []
    for stat, (field_no, values) in stat_cols.items():
        present = values.is_not_null().to_numpy()
        if not present.any():
            continue
        if values.dtype in (pl.String, pl.Categorical):
            vals = interner.ids(values.cast(pl.String))
        else:
            vals = values.fill_null(0).cast(pl.Int64).to_numpy()
        columns.append(Column(b.stat_id(stat), field_no, vals,
                              None if present.all() else present))
    body = encode_events(md, (start - ts) * 1000,
                         (ev["end_ns"].to_numpy() - start) * 1000, columns)
    return line_bytes(line_id, line_name, ts, body)


def _device_plane(trace: Trace, dev: dict[str, Any], ev: pl.DataFrame,
                  hints: WriterHints) -> bytes:
    from tracelens_dev.writers.xspace_encode import field_bytes

    plane = xspace_class()().planes.add()
    plane.id = int(dev["device"])
    plane.name = f"/device:GPU:{int(dev['device'])}"
    b = _PlaneBuilder(plane)
    for name, value in plane_stats_for(dev, hints):
        _set_plain_stat(b, plane.stats.add(), name, value)
    for stat in _DEVICE_STATS:
        b.stat_id(stat)
    interner = _Interner(b)
    vendor = (dev.get("vendor") or "").lower()
    style = hints.line_names or ("types" if vendor == "nvidia" else "plain")
    kd_style = hints.kernel_details or ("cuda" if vendor == "nvidia" else "rocm")
    geometry = hints.kernels
    lines = []
    if ev.height:
        names = ev.filter(pl.col("kind") == "kernel")["name"].unique(maintain_order=True)
        details = {n: _kernel_details(kd_style, geometry.get(n)) for n in names.to_list()}
        size = pl.col("bytes").fill_null(0).cast(pl.Int64).cast(pl.String)
        if kd_style == "cuda":
            src = pl.col("subcategory").replace_strict(
                {k: v[0] for k, v in _CUDA_KINDS.items()}, default="device")
            dst = pl.col("subcategory").replace_strict(
                {k: v[1] for k, v in _CUDA_KINDS.items()}, default="device")
            memcpy = pl.format("kind_src:{} kind_dst:{} size:{} dest:{} async:1", src, dst,
                               size, pl.col("device"))
        else:
            memcpy = pl.format("kind:Unknown size:{} dest:{} async:1", size, pl.col("device"))
        ev = ev.with_columns(
            _kd=pl.when(pl.col("kind") == "kernel").then(
                pl.col("name").replace_strict(details, default=None)),
            _md=pl.when(pl.col("kind") != "kernel").then(memcpy))
        for (stream,), part in ev.partition_by("stream", as_dict=True,
                                               maintain_order=True).items():
            part = part.sort("start_ns", "end_ns")
            kinds = part.select(pl.col("kind").cast(pl.String), "subcategory").unique(
                maintain_order=True)
            lines.append(_events_line(b, interner, int(stream),
                                      _line_name(style, int(stream), kinds), part, {
                                          "correlation_id": (3, part["correlation_id"]),
                                          "kernel_details": (7, part["_kd"]),
                                          "memcpy_details": (7, part["_md"]),
                                          "hlo_op": (7, part["op"]),
                                          "hlo_module": (7, part["module"]),
                                          "program_id": (4, part["program_id"])}))
    return plane.SerializeToString(deterministic=True) + b"".join(
        field_bytes(3, line) for line in lines)


def _host_plane(trace: Trace, host: str, rank: int, shift: int, info: HostInfo) -> bytes:
    from tracelens_dev.writers.xspace_encode import field_bytes

    plane = xspace_class()().planes.add()
    plane.name = "/host:CPU"
    b = _PlaneBuilder(plane)
    pid = info.pid
    hev = trace.host_events.filter(pl.col("rank") == rank)
    if pid is None and hev.height and hev["pid"].drop_nulls().len():
        pid = int(hev["pid"].drop_nulls()[0])
    if pid is not None:
        _set_plain_stat(b, plane.stats.add(), "process_id", int(pid))
    for stat in ("correlation_id", "step_num", "_r"):
        b.stat_id(stat)
    interner = _Interner(b)
    lines = []
    steps = trace.steps.filter(pl.col("rank") == rank).sort("start_ns")
    # steps a program's executions gave come back from the programs; written as host step
    # markers they would read as annotations (whose edge steps can be partial, a program's not)
    if steps.height and not trace.meta.steps_source.startswith("program:"):
        marks = hev.filter(pl.col("kind") == "step").select("start_ns", "end_ns", "name", "tid")
        steps = steps.join(marks, on=["start_ns", "end_ns"], how="left",
                           maintain_order="left").unique(["step"], keep="first",
                                                         maintain_order=True)
        known = steps["tid"].drop_nulls()
        tid = writer_hints(trace).python_tids.get(host) or (int(known[0]) if known.len() else 1)
        ev = steps.select(name=pl.col("name").fill_null("train"),
                          start_ns=pl.col("start_ns") - shift, end_ns=pl.col("end_ns") - shift,
                          step_num="step")
        lines.append(_events_line(b, interner, int(tid), "python", ev, {
            "step_num": (4, ev["step_num"]),
            "_r": (4, pl.Series([1] * ev.height, dtype=pl.Int64))}))
    api = hev.filter(pl.col("correlation_id").is_not_null() & (pl.col("kind") != "step"))
    if api.height:
        api = api.with_columns(pl.col("start_ns") - shift, pl.col("end_ns") - shift)
        for (tid,), part in api.partition_by("tid", as_dict=True, maintain_order=True).items():
            part = part.sort("start_ns", "end_ns")
            tid = 0 if tid is None else int(tid)
            lines.append(_events_line(b, interner, tid, f"Host Threads/{tid}", part, {
                "correlation_id": (3, part["correlation_id"])}))
    return plane.SerializeToString(deterministic=True) + b"".join(
        field_bytes(3, line) for line in lines)


def _metadata_plane(modules: pl.DataFrame) -> bytes:
    plane = xspace_class()().planes.add()
    plane.name = "/host:metadata"
    b = _PlaneBuilder(plane)
    for row in modules.sort("program_id").iter_rows(named=True):
        eid = b.event_id(f"{row['module']}({row['program_id']})")
        md = plane.event_metadata[eid]
        _set_plain_stat(b, md.stats.add(), "Hlo Proto", bytes(row["hlo_proto"] or b""))
        if row["program_id"] is not None:
            _set_plain_stat(b, md.stats.add(), "program_id", int(row["program_id"]))
    return plane.SerializeToString(deterministic=True)


def _task_env_plane(start_ns: int, stop_ns: int) -> bytes:
    plane = xspace_class()().planes.add()
    plane.name = "Task Environment"
    b = _PlaneBuilder(plane)
    _set_plain_stat(b, plane.stats.add(), "profile_start_time", start_ns)
    _set_plain_stat(b, plane.stats.add(), "profile_stop_time", stop_ns)
    return plane.SerializeToString(deterministic=True)


def _hosts(trace: Trace) -> list[tuple[str, int]]:
    keys = pl.concat([trace.devices.select("host", "rank"), trace.events.select("host", "rank")])
    return [(h, int(r)) for h, r in keys.unique().sort("rank", "host").iter_rows()]


def _profile_starts(trace: Trace, hosts: list[tuple[str, int]]) -> dict[str, int]:
    info = trace.meta.hosts
    starts = {h: info[h].profile_start_ns if h in info else None for h, _ in hosts}
    if any(v is None for v in starts.values()):
        return {h: DEFAULT_PROFILE_START_NS for h, _ in hosts}
    return {h: int(v) for h, v in starts.items()}


def host_xspace(trace: Trace, host: str, rank: int, *, shift_ns: int = 0,
                profile_start_ns: int = DEFAULT_PROFILE_START_NS) -> bytes:
    """One host's XSpace, as jax.profiler writes it: ``/host:metadata`` (when the trace has
    modules), a ``/device:GPU:<k>`` plane per device (idle ones too), ``/host:CPU`` with step
    markers and launch API calls, and ``Task Environment``. Times in the file are the trace's
    minus ``shift_ns`` (the host's profile start relative to the job's earliest)."""
    trace = plain_text(trace)
    from tracelens_dev.writers.xspace_encode import field_bytes

    hints = writer_hints(trace)
    info = trace.meta.hosts.get(host) or HostInfo()
    planes = []
    modules = trace.modules.filter(pl.col("rank") == rank)
    if modules.height:
        planes.append(_metadata_plane(modules))
    events = trace.events.filter(pl.col("rank") == rank).with_columns(
        pl.col("start_ns") - shift_ns, pl.col("end_ns") - shift_ns)
    by_dev = events.partition_by("device", as_dict=True) if events.height else {}
    devices = trace.devices.filter(pl.col("rank") == rank).sort("device")
    rows = {int(r["device"]): r for r in devices.iter_rows(named=True)}
    for d in sorted(set(rows) | {int(k[0]) for k in by_dev}):
        ev = by_dev.get((d,), events.head(0))
        planes.append(_device_plane(trace, rows.get(d, {"device": d}), ev, hints))
    planes.append(_host_plane(trace, host, rank, shift_ns, info))
    last = [int(events["end_ns"].max())] if events.height else [0]
    planes.append(_task_env_plane(profile_start_ns, profile_start_ns + max(last) + 1_000))
    return b"".join(field_bytes(1, p) for p in planes) + field_bytes(4, host.encode())


def write(trace: Trace, path: str | Path, *, layout: str = "auto", run: str | None = None,
          compress: bool | None = None) -> list[Path]:
    """Write ``trace`` as XProf writes a profile; returns the files written.

    ``layout``: "file" (one ``.xplane.pb``; single-host traces only), "logdir" (an XProf log
    directory ``path/plugins/profile/<run>/<host>.xplane.pb``, one file per host, each with its
    own ``Task Environment`` profile start), or "auto" (file for one host, logdir for several).
    ``run`` names the run directory (default: the earliest profile start as
    ``YYYY_MM_DD_HH_MM_SS``). ``compress`` gzips (default: when ``path`` ends in ``.gz``).
    Profile start times come from ``trace.meta.hosts[host].profile_start_ns`` when
    every host has one; each host's file then holds times relative to its own start, so a
    reader aligning hosts on wall-clock recovers the trace's clock.
    """
    trace = plain_text(trace)
    import gzip
    import time

    path = Path(path)
    hosts = _hosts(trace)
    if not hosts:
        raise ValueError("trace has no devices or events to write")
    if layout == "auto":
        layout = "file" if len(hosts) == 1 else "logdir"
    if layout == "file" and len(hosts) != 1:
        raise ValueError(f"layout='file' needs a single-host trace ({len(hosts)} hosts)")
    starts = _profile_starts(trace, hosts)
    t0 = min(starts.values())
    gz = compress if compress is not None else path.name.endswith(".gz")
    if layout == "file":
        path.parent.mkdir(parents=True, exist_ok=True)
        targets = [path]
    else:
        run = run or time.strftime("%Y_%m_%d_%H_%M_%S", time.gmtime(t0 // 1_000_000_000))
        run_dir = path / "plugins" / "profile" / run
        run_dir.mkdir(parents=True, exist_ok=True)
        targets = [run_dir / f"{h}.xplane.pb{'.gz' if gz else ''}" for h, _ in hosts]
    for (host, rank), target in zip(hosts, targets):
        data = host_xspace(trace, host, rank, shift_ns=starts[host] - t0,
                           profile_start_ns=starts[host])
        if gz:
            data = gzip.compress(data, compresslevel=6, mtime=0)
        target.write_bytes(data)
    return targets


# -- TPU planes (issue 48) ----------------------------------------------------------------------

TPU_V5E_STATS: dict[str, Any] = {
    "device_type_string": InlineStr("TPU v5 Lite"), "peak_teraflops_per_second": 202.7,
    "peak_hbm_bw_gigabytes_per_second": 819.1576375296, "has_megacore": 0,
}
"""A TPU v5e plane's own stats as a real trace (sample_traces/tpu) writes them."""

_TPU_PROGRAM = UInt64(17_000_000_000_000_000_001)  # a uint64 fingerprint, as TPU traces give
GEMM_FLOPS = 150_000_000  # each matrix product: 150 TFLOP/s over its 1000 ns


@dataclass(frozen=True)
class TpuLayout:
    """What :func:`build_tpu_xspace` plants, per chip and step: ``layers`` layers, each an
    async all-gather of the weights over ICI that a 1000 ns matrix product and a 200 ns loop
    fusion hide, then waited for ``wait_ns(chip)`` more ns in its done op (exposed), and an
    async-wrapped reduce-scatter of the gradients likewise (the same wait); then one
    synchronous 300 ns all-reduce, wholly exposed. Times in ns."""

    chips: int = 4
    steps: int = 2
    layers: int = 3
    gemm_ns: int = 1000
    loop_ns: int = 200
    start_ns: int = 10
    allreduce_ns: int = 300
    gap_ns: int = 50  # idle between steps

    def wait_ns(self, chip: int) -> int:
        return 100 * (chip + 1)

    def step_ns(self, chip: int) -> int:
        per_layer = 2 * (self.start_ns + self.gemm_ns + self.loop_ns + self.wait_ns(chip))
        return self.layers * per_layer + self.allreduce_ns

    def truth(self, chip: int) -> dict[str, int]:
        """Per step: compute, communication in flight, exposed communication (the start ops,
        the done ops' waits, the synchronous all-reduce) and overlapped communication."""
        n = 2 * self.layers
        exposed = n * (self.start_ns + self.wait_ns(chip)) + self.allreduce_ns
        overlapped = n * (self.gemm_ns + self.loop_ns)
        return {"compute_ns": n * (self.gemm_ns + self.loop_ns), "exposed_comm_ns": exposed,
                "overlapped_comm_ns": overlapped, "comm_ns": exposed + overlapped,
                "step_ns": self.step_ns(chip)}


def _hbm_breakdown(nbytes: int) -> bytes:
    """A ``memory_access_breakdown`` stat as real TPU ops carry it: here every byte in HBM,
    half read and half written."""
    msg = memory_breakdown_class()()
    for op_type, part in ((1, nbytes - nbytes // 2), (2, nbytes // 2)):
        msg.memory_accessed.add(operation_type=op_type, memory_space=MEMORY_SPACE_HBM,
                                bytes_accessed=part)
    return msg.SerializeToString()


def _tpu_op(name: str, shape: str, opcode: str, category: str, flops: int, nbytes: int,
            line: str, start: int, dur: int, chip: int, extra: str = "") -> Activity:
    return Activity(chip, 3 if line == "XLA Ops" else 4,
                    f"%{name} = {shape} {opcode}({shape} %p){extra}", start, dur,
                    md_stats={"hlo_category": InlineStr(category), "program_id": _TPU_PROGRAM,
                              "flops": flops, "model_flops": flops, "bytes_accessed": nbytes,
                              "memory_access_breakdown": _hbm_breakdown(nbytes),
                              "tf_op": InlineStr(f"jit(train_step)/{opcode}")},
                    display_name=name, line_name=line)


def build_tpu_xspace(layout: TpuLayout = TpuLayout(), host: str = "tpu-host0") -> bytes:
    """A one-host XSpace of ``layout.chips`` TPU v5e chips with the structure of a real TPU
    trace (``Steps``, ``XLA Modules``, ``XLA Ops``, ``Async XLA Ops`` lines; op stats on the
    event metadata; the plane's own peak stats) and async ICI collectives whose exposure
    :meth:`TpuLayout.truth` gives. The chips start each step together; a chip with a longer
    wait ends later (the waits stand for peers arriving late)."""
    acts: list[Activity] = []
    bf16 = "bf16[1024,1024]{1,0}"
    for chip in range(layout.chips):
        t = 1_000
        for step in range(layout.steps):
            step_start = t
            for layer in range(layout.layers):
                for kind, short, cat_start, cat_done in (
                        ("all-gather", "ag", "all-gather-start", "all-gather-done"),
                        ("reduce-scatter", "rs", "async-start", "async-done")):
                    i = f"{layer}"
                    start = _tpu_op(f"{kind}-start.{i}", bf16, f"{kind}-start", cat_start, 0,
                                    2 << 20, "XLA Ops", t, layout.start_ns, chip)
                    acts.append(start)
                    t += layout.start_ns
                    end = t + layout.gemm_ns + layout.loop_ns + layout.wait_ns(chip)
                    acts.append(Activity(chip, 4, start.name, t, end - t,
                                         stats={"hlo_op": f"{kind}-done.{i}"},
                                         line_name="Async XLA Ops"))
                    acts.append(_tpu_op(f"convolution_fusion.{short}{i}", bf16, "fusion",
                                        "convolution fusion", GEMM_FLOPS, 6 << 20,
                                        "XLA Ops", t, layout.gemm_ns, chip,
                                        ", kind=kOutput"))
                    t += layout.gemm_ns
                    acts.append(_tpu_op(f"add_fusion.{short}{i}", bf16, "fusion", "loop fusion",
                                        1024**2, 6 << 20, "XLA Ops", t, layout.loop_ns, chip,
                                        ", kind=kLoop"))
                    t += layout.loop_ns
                    acts.append(_tpu_op(f"{kind}-done.{i}", bf16, f"{kind}-done", cat_done, 0,
                                        2 << 20, "XLA Ops", t, end - t, chip))
                    t = end
            acts.append(_tpu_op("all-reduce.9", "f32[1024]{0}", "all-reduce", "all-reduce",
                                1024, 8192, "XLA Ops", t, layout.allreduce_ns, chip))
            t += layout.allreduce_ns
            acts.append(Activity(chip, 1, str(step), step_start, t - step_start,
                                 line_name="Steps"))
            acts.append(Activity(chip, 2, f"jit_train_step({int(_TPU_PROGRAM)})", step_start,
                                 t - step_start, line_name="XLA Modules"))
            t += layout.gap_ns
    return build_xspace(acts, host=host, device_plane="/device:TPU:",
                        device_stats={c: TPU_V5E_STATS for c in range(layout.chips)})
