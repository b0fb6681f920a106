"""Reader for XProf XSpace files (``*.xplane.pb``, optionally gzipped) written by jax.profiler.

Facts used (shared/reference/xprof.md §1-2): GPU planes are ``/device:GPU:<k>`` and their
stream lines ``Stream #N`` or the legacy ``Stream #N(Kernel...)``; an event starts at
``line.timestamp_ns * 1000 + offset_ps`` picoseconds; string stats are usually interned
(``ref_value`` names an XStatMetadata whose ``name`` is the value); event-metadata stats are
defaults for every event of that metadata. XLA:CPU traces have no device plane: their ops run on
host threads and carry ``device_ordinal``, which we treat as the device.

One file becomes one single-host :class:`~tracelens.core.model.Trace` with rank 0; joining hosts is
the core's job (``tracelens.loading.combine``).

Two sources of event columns give the same Trace: the C decoder (``parsers.xspace.native``,
which walks the serialized events and leaves only the small rest to protobuf; the default
when the extension is built) and ``python_lines.PythonLines``, the per-event reader over
protobuf messages (the reference, and the fallback with a warning).
``meta.format_facts`` (an :class:`~parsers.xspace.facts.XSpaceFacts`) names the one that
ran.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import polars as pl

from parsers.xspace import native
from parsers.xspace.columns import INT64_MAX, check_column_budget, launch_shape
from parsers.xspace.devices import device_row
from parsers.xspace.facts import XSpaceFacts
from parsers.xspace.repeats import drop_repeats
from parsers.xspace.planes import PlaneReader, stat_value
from parsers.xspace.python_lines import PythonLines
from parsers.xspace.source import LineSource, StreamLines
from parsers.xspace import tpu, xla_host
from parsers.xspace.space import FORMAT, parse, read_raw
from parsers.xspace.window import drop_outside, event_window, profile_span
from tracelens.core.errors import TraceInputError
from tracelens.core.model import (
    DEVICE_FACTS_SCHEMA, EVENT_SCHEMA, HOST_EVENT_SCHEMA, MODULE_SCHEMA,
                             STEP_SCHEMA, HostInfo, Notice, Text, Trace, TraceMeta, conform,
                             stored_program_id,
                             host_from_file_name)

# An ordinal of 10 digits or more is no GPU's: such a plane is skipped with a warning.
_GPU_PLANE = re.compile(r"^/device:GPU:(\d{1,9})$")
_STREAM_LINE = re.compile(r"^Stream #(\d+)(?:\((.*)\))?$")


def read(path: Path, decoder: str | None = None, threads: int | None = None,
         marker: str | None = None) -> Trace:
    """One XSpace file as a single-host Trace (rank 0, times relative to the profile start).

    ``decoder``: "c" (the C extension, ``parsers.xspace.native``), "python" (the per-event
    reader over protobuf messages) or None for the C one when it is built. Both give the same
    Trace; ``meta.format_facts`` says which one ran, and a warning says when the C one
    was wanted but is not built. ``threads``: C decoder threads for this file (the caller
    reading several files at once passes its share of the CPUs; None: up to 4). ``marker``: a
    regex; host-plane events whose name matches it are kept as host events of kind "marker"
    (``--step-marker``).
    """
    choice = decoder or native.default_decoder()
    raw = read_raw(path)
    fallback = None
    if choice == "c" and not native.available():
        fallback = native.unavailable_reason()
        choice = "python"
    if choice == "c":
        space, source = native.split(raw, path, threads)
    elif choice == "python":
        space, source = parse(raw, path), PythonLines(path)
    else:
        raise ValueError(f"unknown XSpace decoder {choice!r} (expected 'c' or 'python')")
    input_bytes = len(raw)
    del raw
    trace = _read_space(path, space, source, input_bytes, marker)
    if fallback:
        trace.meta.warn(Notice.of("xspace.python_decoder", "{file}: read with the slow "
                                  "pure-Python XSpace reader: {why}", file=path.name,
                                  why=fallback))
    return trace


def _read_space(path: Path, space: Any, source: LineSource, input_bytes: int,
                marker: str | None = None) -> Trace:
    meta = TraceMeta(sources=[{"path": str(path), "format": FORMAT}])
    for msg in list(space.errors) + list(space.warnings):
        meta.warn(Notice.of("xspace.profiler_reported", "{file}: profiler reported: {message}",
                            file=path.name, message=msg))
    host = next((h for h in space.hostnames if h), None) or host_from_file_name(path.name)
    gpu_streams: list[StreamLines] = []
    device_rows: list[dict[str, Any]] = []
    host_frames: list[pl.DataFrame] = []
    ignored: dict[str, int] = {}
    profile_start = None
    span = None
    cpu_planes: list[tuple[int, Any]] = []
    modules: list[dict[str, Any]] = []
    tpu_frames: list[pl.DataFrame] = []
    tpu_steps: list[pl.DataFrame] = []
    tpu_ordinals: list[int] = []  # the device of each of tpu_steps
    negative_tpu = [0, 0]  # TPU events dropped for a negative duration, unnamed
    tpu_repeated = 0  # TPU events a line of the same name held again
    readers, n_planned = _plan_lines(space, source, marker)
    seen: dict[int, int] = {}  # device ordinal: the index of its plane
    no_stat_metadata: list[str] = []  # planes with events whose stats name nothing
    unnamed = [0, 0]  # planes without a name that hold events, and their events
    check_column_budget(path, n_planned, input_bytes)
    for plane_idx, plane in enumerate(space.planes):
        m = _GPU_PLANE.match(plane.name)
        if plane.name == "Task Environment":
            stats = PlaneReader(plane, source.cut_metadata(plane_idx)).plane_stats()
            span = profile_span(stats)
            start = stats.get("profile_start_time")
            if type(start) is int and 0 <= start <= INT64_MAX:
                profile_start = start
            elif start is not None:  # hosts are then not aligned on this clock: say so
                meta.warn(Notice.of("xspace.bad_profile_start", "{file}: Task Environment "
                                    "profile_start_time = {value} is not a usable nanosecond "
                                    "time: left unknown", file=path.name, value=repr(start)))
            continue
        if plane.name == "/host:CPU":
            cpu_planes.append((plane_idx, plane))
            continue
        if plane.name == "/host:metadata":
            modules = _read_modules(plane)
            n_bad = sum(1 for m in modules if m["program_id"] is None)
            if n_bad:
                meta.warn(Notice.of("xspace.no_program_id", "{file}: {n} HLO modules have no "
                                    "64-bit integer program id: their HLO cannot be joined to "
                                    "kernels", file=path.name, n=n_bad))
            continue
        t = tpu.TPU_PLANE.match(plane.name)
        if t:
            reader = readers[plane_idx]
            plane_stats = reader.plane_stats()
            row, bad = tpu.device_row(int(t.group(1)), plane_stats)
            for key in bad:
                meta.warn(Notice.of("xspace.bad_plane_stat", "{file}: {plane}: plane stat "
                                    "{stat} is not a usable value: left unknown",
                                    file=path.name, plane=plane.name, stat=key))
            absent = [s for s in tpu.CHIP_STATS if s not in plane_stats]
            if absent:  # cleared stats: no product, no peaks, so no MFU, without a word
                meta.warn(Notice.of("xspace.tpu_no_chip_stats", "{file}: {plane}: no plane "
                                    "stat {stats}: the chip's product or peaks are unknown, "
                                    "and with them MFU and the roofline", file=path.name,
                                    plane=plane.name, stats=", ".join(absent)))
            device_rows.append(dict(row, notes_at=len(meta.notices)))
            ops, st, skipped, n_neg, n_unknown, n_all_spaces, said = tpu.read_plane(
                reader, plane_idx, plane, source, int(t.group(1)))
            tpu_repeated += said[tpu.REPEATED]
            if said[tpu.NO_OPS]:
                meta.warn(Notice.of(
                    "xspace.tpu_no_ops_line", "{file}: {plane}: no '{line}' line (the "
                    "device's timeline of every op it ran): only its {n} async ops are read, "
                    "so its busy time, kernels and FLOPs are missing", file=path.name,
                    plane=plane.name, line=tpu.OPS_LINE, n=said[tpu.NO_OPS]))
            if n_all_spaces:
                meta.warn(Notice.of(
                    "xspace.tpu_bytes_all_spaces", "{file}: {plane}: {n} ops carry no "
                    "memory_access_breakdown: their bytes are XLA's bytes_accessed over every "
                    "memory space, not HBM alone, so their roofline bound is too low",
                    file=path.name, plane=plane.name, n=n_all_spaces))
            if ops is not None:
                tpu_frames.append(ops)
            tpu_steps.append(st)
            tpu_ordinals.append(int(t.group(1)))
            ignored.update(skipped)
            negative_tpu[0] += n_neg
            negative_tpu[1] += n_unknown
            continue
        if not m:
            n = sum(source.count(plane_idx, i, line) for i, line in enumerate(plane.lines))
            if n and plane.name:  # any plane not read: a device plane of another kind, ...
                ignored[plane.name] = n
            elif n:  # ... or one without a name (no device, no host: unplaceable)
                unnamed[0] += 1
                unnamed[1] += n
            continue
        reader = readers[plane_idx]
        ordinal = int(m.group(1))
        if ordinal in seen:  # two planes of one ordinal would be read as one device
            raise TraceInputError(path, f"device planes {seen[ordinal]} and {plane_idx} are "
                                  f"both named {plane.name!r}: a plane's name is its device's "
                                  "only identity, so their events cannot be told apart")
        seen[ordinal] = plane_idx
        if not plane.stat_metadata and any(source.count(plane_idx, i, line)
                                           for i, line in enumerate(plane.lines)):
            no_stat_metadata.append(plane.name)
        pstats = reader.plane_stats()
        row, bad = device_row(ordinal, pstats)
        for key in bad:
            meta.warn(Notice.of("xspace.bad_plane_stat", "{file}: {plane}: plane stat {stat} = "
                                "{value} is not a usable value: left unknown", file=path.name,
                                plane=plane.name, stat=key, value=repr(pstats[key])))
        device_rows.append(dict(row, notes_at=len(meta.notices)))  # its notes follow these
        streams = []
        for line_idx, line in enumerate(plane.lines):
            lm = _STREAM_LINE.match(line.name)
            if lm:
                streams.append((line_idx, line, lm.group(2)))
                continue
            n = source.count(plane_idx, line_idx, line)
            if n:
                ignored[f"{plane.name} line '{line.name}'"] = n
        gpu_streams.append(StreamLines(reader, plane_idx, ordinal, streams))
    device_frames, negative, unknown = source.stream_frames(gpu_streams)
    negative, unknown = negative + negative_tpu[0], unknown + negative_tpu[1]
    for row in device_rows:  # notes about several planes (tracelens.loading.devices) go here
        row["file_notes_at"] = len(meta.notices)
    cpu_frames, host_frames, steps, pid, n_neg, n_unknown = _read_host_planes(
        cpu_planes, source, readers, meta, f"{path.name}: ")
    negative += n_neg
    unknown += n_unknown
    if tpu_frames and host_frames:
        _align_tpu_clocks(path, meta, tpu_frames, tpu_steps, tpu_ordinals, host_frames)
    device_frames += tpu_frames
    if not any(f.height for f in device_frames) and cpu_frames:
        device_frames = cpu_frames
        ordinals = sorted(set(
            pl.concat(cpu_frames, how="diagonal_relaxed")["device"].to_list()))
        device_rows = [dict(r, role="replaced") for r in device_rows] + [
            {"device": o, "vendor": "cpu", "name": "CPU", "role": "cpu"} for o in ordinals]
        meta.warn(Notice.of("xspace.cpu_devices", "{file}: no GPU activity; XLA:CPU ops on host "
                            "threads are analyzed as {n} CPU device(s) by their device_ordinal",
                            file=path.name, n=len(ordinals)))
    no_stat_metadata += [p.name for i, p in cpu_planes if not p.stat_metadata and any(
        source.count(i, k, line) for k, line in enumerate(p.lines))]
    if no_stat_metadata:
        meta.warn(Notice.of("xspace.no_stat_metadata", "{file}: {n} plane(s) with events "
                            "define no stat metadata ({planes}): their events' stats (kernel "
                            "details, correlation ids, step numbers, HLO ops) cannot be named "
                            "and are left unread", file=path.name, n=len(no_stat_metadata),
                            planes=", ".join(no_stat_metadata[:4])
                            + (", ..." if len(no_stat_metadata) > 4 else "")))
    lacking = _lacking(space, sorted(seen))
    if lacking:
        meta.warn(Notice.of("xspace.incomplete", "{file}: lacks what a complete XProf file "
                            "holds: {lacking}; it may have been cut short (a file cut at a "
                            "plane boundary is still valid protobuf), so devices or host "
                            "events can be missing", file=path.name, lacking=lacking))
    if negative:
        meta.warn(Notice.of("xspace.negative_durations", "{file}: dropped {n} events with "
                            "negative duration", file=path.name, n=negative))
    if unknown:
        meta.warn(Notice.of("xspace.unknown_metadata", "{file}: {n} events name an event "
                            "metadata id the plane does not define; kept, named '<unknown event "
                            "metadata>'", file=path.name, n=unknown))
    steps, grouped = tpu.with_device_steps(steps, tpu_steps)
    if grouped:
        meta.warn(Notice.of("xspace.tpu_steps_grouped", "{file}: {what}", file=path.name,
                            what=grouped))
    if unnamed[0]:
        meta.warn(Notice.of("xspace.unnamed_planes", "{file}: ignored {n} events on {planes} "
                            "plane(s) without a name (a plane's name says which device or "
                            "host it is: without one its events cannot be placed)",
                            file=path.name, n=unnamed[1], planes=unnamed[0]))
    for what, n in ignored.items():
        why = "not a device timeline" if what.startswith("/device:TPU:") else \
            "not a device stream"
        meta.warn(Notice.of("xspace.ignored_lines", "{file}: ignored {n} events on {what} "
                            "({why})", file=path.name, n=n, what=what, why=why))
    for stat, n in sorted(source.too_large.items()):
        meta.warn(Notice.of("xspace.uint64_values", "{file}: {n} {stat} values are uint64 above "
                            "2^63-1, which the model's Int64 column cannot hold: left null",
                            file=path.name, n=n, stat=stat))
    events, twice, lines, line_events = drop_repeats(_assemble_events(device_frames, host))
    twice += tpu_repeated
    if twice or lines:
        meta.warn(Notice.of("xspace.repeated_events", "{file}: read once what the file holds "
                            "twice: {twice} events repeated on one line (a line id written "
                            "twice, a TPU line copied) and {lines} line(s) repeating another "
                            "line of their device ({events} events, the same events under a "
                            "new line id)",
                            file=path.name, twice=twice, lines=lines, events=line_events))
    devices = conform(pl.DataFrame(device_rows, schema_overrides={
        k: v for k, v in DEVICE_FACTS_SCHEMA.items() if k != "host" and k != "rank"},
        infer_schema_length=None).with_columns(host=pl.lit(host, dtype=Text), rank=pl.lit(0))
        if device_rows else pl.DataFrame(), DEVICE_FACTS_SCHEMA)
    host_events = conform(pl.concat(host_frames, how="diagonal_relaxed"), HOST_EVENT_SCHEMA) \
        .with_columns(host=pl.lit(host, dtype=Text), rank=pl.lit(0, dtype=pl.Int32)) \
        if host_frames else pl.DataFrame(schema=HOST_EVENT_SCHEMA)
    window = event_window(span, (events if events.height else host_events)["start_ns"])
    events, outside = drop_outside(events, window)
    host_events, host_outside = drop_outside(host_events, window)
    steps, steps_outside = drop_outside(steps, window)
    if outside or host_outside or steps_outside:
        meta.warn(Notice.of("xspace.outside_window", "{file}: dropped {events} device events, "
                            "{host_events} host events and {steps} steps {why}", file=path.name,
                            events=outside, host_events=host_outside, steps=steps_outside,
                            why=window.why))
    source.finish()  # every byte is checked, including lines nothing above needed
    meta.hosts = {host: HostInfo(path=str(path), profile_start_ns=profile_start, pid=pid)}
    meta.format_facts = [XSpaceFacts(str(path), source.decoder)]
    module_frame = pl.DataFrame(modules, schema={k: v for k, v in MODULE_SCHEMA.items()
                                                 if k not in ("host", "rank")})
    return Trace(events=events, host_events=host_events,
                 steps=steps.with_columns(rank=pl.lit(0, dtype=pl.Int32)),
                 devices=devices, meta=meta,
                 modules=conform(module_frame.with_columns(host=pl.lit(host, dtype=Text),
                                                           rank=pl.lit(0)), MODULE_SCHEMA))


def _align_tpu_clocks(path: Path, meta: TraceMeta, frames: list[pl.DataFrame],
                      steps: list[pl.DataFrame], ordinals: list[int],
                      host_frames: list[pl.DataFrame]) -> None:
    """Move each TPU's activities and device steps later by how far its clock reads behind
    the host's (:func:`parsers.xspace.xla_host.device_lag_ns`: a run that starts before the
    host began to enqueue it), in place, and say so; a file without launches is left as is."""
    calls = [f.filter(pl.col("correlation_id").is_not_null()
                      & (pl.col("name").cast(pl.String) == xla_host.LAUNCH))
             .select("correlation_id", "start_ns") for f in host_frames
             if "correlation_id" in f.columns]
    launches = pl.concat(calls) if calls else pl.DataFrame()
    if launches.is_empty():
        return
    for i, f in enumerate(frames):
        ordinal = int(f["device"][0]) if f.height else None
        lag = xla_host.device_lag_ns(f, launches) if "correlation_id" in f.columns else 0
        if not lag or ordinal is None:
            continue
        frames[i] = f.with_columns(pl.col("start_ns") + lag, pl.col("end_ns") + lag)
        for k, o in enumerate(ordinals):
            if o == ordinal:
                steps[k] = steps[k].with_columns(pl.col("start_ns") + lag,
                                                 pl.col("end_ns") + lag)
        meta.warn(Notice.of("xspace.device_clock_behind", "{file}: TPU{device}'s clock reads "
                            "{us} us behind the host's (a program run starts before the host "
                            "began to enqueue it): its activities are moved {us} us later",
                            file=path.name, device=ordinal, us=f"{lag / 1e3:.1f}"))


def _lacking(space: Any, ordinals: list[int]) -> str:
    """What a complete XProf file of GPU planes holds and this one lacks ("" when nothing):
    XProf writes ``/host:CPU`` and ``Task Environment`` after the device planes, and numbers
    the devices of a host without gaps (a first ordinal above 0 is not a gap: a process can
    be given a subset of a host's GPUs)."""
    if not ordinals:
        return ""
    names = {p.name for p in space.planes}
    parts = []
    if "/host:CPU" not in names:
        parts.append("the /host:CPU plane" + (" and the Task Environment plane"
                                              if "Task Environment" not in names else "")
                     + " (XProf writes them after the device planes)")
    missing = sorted(set(range(ordinals[0], ordinals[-1] + 1)) - set(ordinals))
    if missing:
        shown = ", ".join(map(str, missing[:8])) + (", ..." if len(missing) > 8 else "")
        parts.append(f"device ordinal(s) {shown} (the planes hold ordinals "
                     f"{ordinals[0]}-{ordinals[-1]} with gaps)")
    return "; ".join(parts)


_MODULE_NAME = re.compile(r"^(.*)\((-?\d+)\)$")


def _read_modules(plane: Any) -> list[dict[str, Any]]:
    """``/host:metadata``: one event metadata per compiled module, named ``<module>(<id>)``,
    with the serialized HloProto in stat ``Hlo Proto``."""
    ref_names = {k: v.name for k, v in plane.stat_metadata.items()}
    out = []
    for md in plane.event_metadata.values():
        stats = {ref_names.get(st.metadata_id): st for st in md.stats}
        proto = stats.get("Hlo Proto")
        if proto is None or proto.WhichOneof("value") != "bytes_value":
            continue
        m = _MODULE_NAME.match(md.name)
        pid_stat = stats.get("program_id")
        program_id = int(m.group(2)) if m else (
            stat_value(pid_stat, ref_names) if pid_stat is not None else None)
        # a TPU fingerprint above 2^63-1 keeps its 64 bits (tracelens.core.model.stored_program_id)
        program_id = stored_program_id(program_id)
        out.append({"program_id": program_id, "module": m.group(1) if m else md.name,
                    "hlo_proto": proto.bytes_value})
    return sorted(out, key=lambda r: (r["program_id"] is None, r["program_id"] or 0))


def _assemble_events(frames: list[pl.DataFrame], host: str) -> pl.DataFrame:
    """The lines' frames as the events frame; a line whose source did not work out its launch
    shape (the per-event reader, XLA:CPU ops) gets it here, per line."""
    frames = [f if "launch" in f.columns or "kernel_details" not in f.columns else
              f.with_columns(launch_shape(f["kernel_details"]).cast(Text))
              for f in frames if f.height]
    if not frames:
        return pl.DataFrame(schema=EVENT_SCHEMA)
    df = pl.concat([f.drop("kernel_details", strict=False) for f in frames],
                   how="diagonal_relaxed").with_columns(host=pl.lit(host, dtype=Text),
                                                        rank=pl.lit(0))
    return conform(df, EVENT_SCHEMA)


def _plan_lines(space: Any, source: LineSource, marker: str | None = None
                ) -> tuple[dict[int, PlaneReader], int]:
    """The plane readers ``_read_space`` uses, and the lines it will read, told to the
    source up front (the C decoder then decodes a plane's lines together, in parallel):
    the stream lines of GPU planes, and every line of each ``/host:CPU`` plane.
    Also returns the number of events in those lines."""
    readers: dict[int, PlaneReader] = {}
    host_planes = []
    n_events = 0
    for plane_idx, plane in enumerate(space.planes):
        if plane.name == "/host:CPU":
            host_planes.append(plane_idx)
        elif tpu.TPU_PLANE.match(plane.name):
            readers[plane_idx] = tpu.tpu_reader(plane, source.cut_metadata(plane_idx))
            lines = tpu.read_lines(plane)
            n_events += sum(source.count(plane_idx, i, line) for i, line in lines)
            source.plan(readers[plane_idx], plane_idx, lines, wanted_only=False)
        elif plane.name not in ("Task Environment", "/host:metadata") \
                and _GPU_PLANE.match(plane.name):
            readers[plane_idx] = PlaneReader(plane, source.cut_metadata(plane_idx))
            lines = [(i, line) for i, line in enumerate(plane.lines)
                     if _STREAM_LINE.match(line.name)]
            n_events += sum(source.count(plane_idx, i, line) for i, line in lines)
            source.plan(readers[plane_idx], plane_idx, lines, wanted_only=False)
    xla = not any(_GPU_PLANE.match(p.name) for p in space.planes)
    for host_idx in host_planes:
        plane = space.planes[host_idx]
        readers[host_idx] = PlaneReader(plane, source.cut_metadata(host_idx))
        if marker:
            regex = re.compile(marker)
            readers[host_idx].keep = {k for k, n in readers[host_idx].event_names.items()
                                      if regex.search(n)}
        if xla:  # the host side of XLA programs (TPU, XLA:CPU): parsers.xspace.xla_host
            readers[host_idx].xla_host = True
            readers[host_idx].keep |= {k for k, n in readers[host_idx].event_names.items()
                                       if xla_host.HOST_WORK.search(n)}
        lines = list(enumerate(plane.lines))
        n_events += sum(source.count(host_idx, i, line) for i, line in lines)
        source.plan(readers[host_idx], host_idx, lines, wanted_only=True)
    return readers, n_events


def _read_host_planes(planes: list[tuple[int, Any]], source: LineSource,
                      readers: dict[int, PlaneReader], meta: TraceMeta, where: str
                      ) -> tuple[list[pl.DataFrame], list[pl.DataFrame], pl.DataFrame, int | None,
                                 int, int]:
    """Every ``/host:CPU`` plane (a file normally has one; a merged or re-saved one can hold
    more, each with its own metadata ids): XLA:CPU op frames, host-event frames, the steps
    of them all, the process id when the planes agree on one, and the counts of events
    dropped for a negative duration and of unknown metadata ids."""
    cpu: list[pl.DataFrame] = []
    host: list[pl.DataFrame] = []
    steps: list[pl.DataFrame] = []
    pids: set[int | None] = set()
    negative = unknown = 0
    for plane_idx, plane in planes:
        c, h, st, n_neg, n_unknown, pid = _read_host_plane(
            plane_idx, plane, source, readers[plane_idx], meta, where)
        cpu += c
        host += h
        steps.append(st)
        pids.add(pid)
        negative += n_neg
        unknown += n_unknown
    if len(planes) > 1:
        meta.warn(Notice.of("xspace.host_planes", "{file}: {n} /host:CPU planes: all are read"
                            + ("" if len(pids) == 1 else " (process ids {pids}: the host's "
                               "process id is left unknown)"), file=where.removesuffix(": "),
                            n=len(planes), pids=str(sorted(map(str, pids)))))
    if not planes:
        return cpu, host, pl.DataFrame(schema=STEP_SCHEMA), None, 0, 0
    merged = steps[0] if len(steps) == 1 else conform(
        pl.concat(steps).group_by("step").agg(pl.col("start_ns").min(), pl.col("end_ns").max(),
                                              pl.col("source").first(), pl.col("rank").first())
        .sort("start_ns"), STEP_SCHEMA)
    return cpu, host, merged, pids.pop() if len(pids) == 1 else None, negative, unknown


def _read_host_plane(plane_idx: int, plane: Any, source: LineSource, reader: PlaneReader,
                     meta: TraceMeta, where: str
                     ) -> tuple[list[pl.DataFrame], list[pl.DataFrame], pl.DataFrame, int, int,
                                int | None]:
    """XLA:CPU op events (as device frames), API/annotation host events, steps, and the
    process id the plane records (which process of a host wrote the file)."""
    pid = reader.plane_stats().get("process_id")
    if pid is not None and not (type(pid) is int and 0 <= pid <= INT64_MAX):
        meta.warn(Notice.of("xspace.bad_process_id", "{file}: /host:CPU plane stat process_id "
                            "= {value} is not a usable value: left unknown",
                            file=where.removesuffix(": "), value=repr(pid)))
        pid = None
    cpu_frames: list[pl.DataFrame] = []
    host_frames: list[pl.DataFrame] = []
    step_frames: list[pl.DataFrame] = []
    negative = unknown = 0
    xla = reader.xla_host
    marks = sorted({reader.event_names[k] for k in reader.keep
                    if not (xla and xla_host.HOST_WORK.search(reader.event_names[k]))})
    xla_work: list[pl.DataFrame] = []
    for line_idx, line in enumerate(plane.lines):
        df, n_neg, n_unknown = source.frame(reader, plane_idx, line_idx, line, wanted_only=True)
        negative += n_neg
        unknown += n_unknown
        if df is None:
            continue
        df = df.with_columns(tid=pl.lit(line.id, dtype=pl.Int64))
        ops = df.filter(pl.col("op").is_not_null() & pl.col("device_ordinal").is_not_null())
        if ops.height:
            cpu_frames.append(ops.with_columns(
                device=pl.col("device_ordinal"), stream=pl.lit(line.id, dtype=pl.Int64),
                kind=pl.lit("kernel")))
        steps = df.filter(pl.col("step_num").is_not_null())
        if steps.height:
            step_frames.append(steps)
        api = df.filter(pl.col("correlation_id").is_not_null())
        if line.name.startswith("Host Threads") or api.height:
            host_frames.append(api.with_columns(kind=pl.lit("api"), pid=pl.lit(pid, pl.Int64)))
        if steps.height:
            host_frames.append(steps.with_columns(kind=pl.lit("step"), pid=pl.lit(pid, pl.Int64)))
        if xla:
            work = xla_host.host_work(df.filter(pl.col("correlation_id").is_null()
                                                & pl.col("op").is_null()))
            if work.height:
                xla_work.append(work.with_columns(kind=pl.lit("api"), pid=pl.lit(pid, pl.Int64)))
        if marks:
            found = df.filter(pl.col("name").is_in(marks))
            if found.height:
                host_frames.append(found.with_columns(kind=pl.lit("marker"),
                                                      pid=pl.lit(pid, pl.Int64)))
    if xla_work and cpu_frames:  # XLA:CPU: each run's first op to the dispatch that began it
        ops, work = xla_host.cpu_launches(pl.concat(cpu_frames, how="diagonal_relaxed"),
                                          pl.concat(xla_work, how="diagonal_relaxed"))
        cpu_frames, xla_work = [ops], [work]
    host_frames += xla_work
    if step_frames:
        steps_df = (pl.concat(step_frames).group_by("step_num")
                    .agg(pl.col("start_ns").min(), pl.col("end_ns").max())
                    .sort("start_ns")
                    .select(step=pl.col("step_num"), start_ns="start_ns", end_ns="end_ns",
                            source=pl.lit("step_num")))
        steps_df = conform(steps_df.with_columns(rank=pl.lit(0)), STEP_SCHEMA)
    else:
        steps_df = pl.DataFrame(schema=STEP_SCHEMA)
    return cpu_frames, host_frames, steps_df, negative, unknown, pid
