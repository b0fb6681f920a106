"""Reader for XProf XSpace files (``*.xplane.pb``, optionally gzipped) written by jax.profiler.

Facts used (shared/reference/xprof.md §1-2): GPU planes are ``/device:GPU:<k>`` and their
stream lines ``Stream #N`` or the legacy ``Stream #N(Kernel...)``; an event starts at
``line.timestamp_ns * 1000 + offset_ps`` picoseconds; string stats are usually interned
(``ref_value`` names an XStatMetadata whose ``name`` is the value); event-metadata stats are
defaults for every event of that metadata. XLA:CPU traces have no device plane: their ops run on
host threads and carry ``device_ordinal``, which we treat as the device.

One file becomes one single-host :class:`~tracelens.model.Trace` with rank 0; joining hosts is
the core's job (``tracelens.combine``).

Two sources of event columns give the same Trace: the C decoder (``parsers.xspace_decode``,
which walks the serialized events and leaves only the small rest to protobuf; the default
when the extension is built) and :class:`PythonLines`, the per-event reader over protobuf
messages (the reference, and the fallback with a warning). ``meta.extra["decoder"]`` names
the one that ran.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Iterable

import polars as pl
from google.protobuf.message import DecodeError

from parsers.rawfile import read_maybe_gzip
from parsers.xplane_schema import xspace_class
from tracelens import hardware
from tracelens.errors import TraceInputError
from tracelens.model import (DEVICE_SCHEMA, EVENT_SCHEMA, HOST_EVENT_SCHEMA, MODULE_SCHEMA,
                             STEP_SCHEMA, Trace, TraceMeta, conform)

FORMAT = "xspace"
MAX_PROTO_BYTES = 2 * 1024**3 - 1  # protobuf refuses messages of 2 GiB and more
# Column memory of the events read <= FACTOR x input bytes + BASE (the C decoder's own bound,
# parsers/_xspace.c): a file whose events would take more (a flood of empty 2-byte events
# becomes 83 bytes of columns each) is refused, by both decoders alike.
COLUMN_BUDGET_FACTOR = 16
COLUMN_BUDGET_BASE = 64 << 20

_GPU_PLANE = re.compile(r"^/device:GPU:(\d+)$")
_STREAM_LINE = re.compile(r"^Stream #(\d+)(?:\((.*)\))?$")
_MEMCPY_SUB = {"htod": "h2d", "h2d": "h2d", "dtoh": "d2h", "d2h": "d2h", "dtod": "d2d",
               "d2d": "d2d", "ptop": "p2p", "p2p": "p2p"}

# Stats we read from events; everything else is left alone.
_EVENT_STATS = ("correlation_id", "hlo_op", "hlo_module", "program_id", "memcpy_details",
                "device_ordinal", "step_num")
INT_STATS = ("program_id", "correlation_id", "device_ordinal", "step_num")
COLUMN_BYTES_PER_EVENT = 4 + 8 + 8 + 9 * len(_EVENT_STATS)  # md code, start, end; kind + value


def check_column_budget(path: Path, n_events: int, input_bytes: int) -> None:
    """Refuse a file whose ``n_events`` events to read would take more column memory than
    the budget allows for its ``input_bytes``."""
    need = n_events * COLUMN_BYTES_PER_EVENT
    if need > COLUMN_BUDGET_FACTOR * input_bytes + COLUMN_BUDGET_BASE:
        raise TraceInputError(path, f"{n_events} events in {input_bytes} bytes would take "
                              f"{need >> 20} MiB of columns, more than "
                              f"{COLUMN_BUDGET_FACTOR} bytes per input byte: refused "
                              "(events of almost no bytes each)")


def load_xspace(path: Path) -> Any:
    """Read, un-gzip and decode one XSpace file, with one clear error for each way it fails."""
    return _parse(read_raw(path), path)


def read_raw(path: Path) -> bytes:
    """The serialized XSpace of one file (gunzipped), after the checks that need no decoding."""
    raw = read_maybe_gzip(path)
    if len(raw) > MAX_PROTO_BYTES:
        raise TraceInputError(path, f"{len(raw) / 1024**3:.1f} GiB: XSpace files of 2 GiB "
                              "and more cannot be decoded by protobuf")
    head = raw[:64].lstrip()
    if head[:1] in (b"{", b"["):
        raise TraceInputError(path, "this is JSON, not an XSpace protobuf")
    if raw[:1] != b"\x0a":  # XSpace field 1 (planes), length-delimited
        raise TraceInputError(path, "not an XSpace protobuf (unexpected first byte "
                              f"0x{raw[0]:02x})")
    return raw


def _parse(raw: bytes, path: Path) -> Any:
    """``raw`` (a whole XSpace, or the skeleton of one) as protobuf messages."""
    space = xspace_class()()
    try:
        space.ParseFromString(raw)
    except DecodeError as exc:
        raise TraceInputError(path, f"corrupt or truncated XSpace protobuf ({exc})") from None
    if not space.planes or not any(p.name for p in space.planes):
        raise TraceInputError(path, "decodes as protobuf but holds no XSpace planes")
    return space


def _stat_value(stat: Any, ref_names: dict[int, str]) -> Any:
    kind = stat.WhichOneof("value")
    if kind == "ref_value":
        return ref_names.get(stat.ref_value)
    if kind is None:
        return None
    return getattr(stat, kind)


class _PlaneReader:
    """Resolves one plane's metadata once, then turns its events into column lists."""

    def __init__(self, plane: Any) -> None:
        self.plane = plane
        self.ref_names = {k: v.name for k, v in plane.stat_metadata.items()}
        wanted = {name: i for i, name in enumerate(_EVENT_STATS)}
        self.stat_code = {k: wanted[n] for k, n in self.ref_names.items() if n in wanted}
        self.event_names = {k: v.name for k, v in plane.event_metadata.items()}
        self.defaults: dict[int, list[Any]] = {}
        for k, md in plane.event_metadata.items():
            vals = self._read_stats(md.stats, None)
            if any(v is not None for v in vals):
                self.defaults[k] = vals

    def _read_stats(self, stats: Iterable[Any], base: list[Any] | None) -> list[Any]:
        vals = list(base) if base is not None else [None] * len(_EVENT_STATS)
        code_of = self.stat_code
        for st in stats:
            code = code_of.get(st.metadata_id)
            if code is not None:
                vals[code] = _stat_value(st, self.ref_names)
        return vals

    def plane_stats(self) -> dict[str, Any]:
        return {self.ref_names.get(st.metadata_id, ""): _stat_value(st, self.ref_names)
                for st in self.plane.stats}

    def line_columns(self, line: Any) -> dict[str, list[Any]]:
        """Event columns of one line: name, start/end ns, and the wanted stats."""
        base_ps = line.timestamp_ns * 1000
        names, starts, ends, negative, unknown = [], [], [], 0, 0
        stat_cols: list[list[Any]] = [[] for _ in _EVENT_STATS]
        defaults, event_names = self.defaults, self.event_names
        for ev in line.events:
            start_ps = base_ps + ev.offset_ps
            dur = ev.duration_ps
            if dur < 0:
                negative += 1
                continue
            name = event_names.get(ev.metadata_id)
            if name is None:  # dangling reference: keep the time, say the name is unknown
                unknown += 1
                name = f"<unknown event metadata {ev.metadata_id}>"
            names.append(name)
            starts.append(start_ps // 1000)
            ends.append((start_ps + dur) // 1000)
            if ev.stats:
                vals = self._read_stats(ev.stats, defaults.get(ev.metadata_id))
            else:
                vals = defaults.get(ev.metadata_id) or [None] * len(_EVENT_STATS)
            for col, v in zip(stat_cols, vals):
                col.append(v)
        cols: dict[str, list[Any]] = {"name": names, "start_ns": starts, "end_ns": ends}
        cols.update(zip(_EVENT_STATS, stat_cols))
        cols["_negative"] = [negative]
        cols["_unknown"] = [unknown]
        return cols


class PythonLines:
    """Event columns of each line from the protobuf messages, one event at a time.

    The reference implementation, and the fallback when the C decoder (``parsers.xspace_decode``)
    is not built. ``frame`` returns the line's events as :func:`_line_frame` builds them (or
    None when the line has no event to keep) and the counts of dropped and unnamed events.
    ``wanted_only`` allows a source to leave out events that carry none of the stats we read
    (the host plane's callers filter on them anyway); this one keeps every event.
    """

    decoder = "python"

    def __init__(self) -> None:
        self.too_large: dict[str, int] = {}

    def count(self, plane_idx: int, line_idx: int, line: Any) -> int:
        return len(line.events)

    def plan(self, reader: _PlaneReader, plane_idx: int, lines: list[tuple[int, Any]],
             wanted_only: bool) -> None:
        """The lines ``frame`` will be asked for (this source reads them one at a time)."""

    def frame(self, reader: _PlaneReader, plane_idx: int, line_idx: int, line: Any,
              wanted_only: bool = False) -> tuple[pl.DataFrame | None, int, int]:
        cols = reader.line_columns(line)
        for stat in INT_STATS:
            n = too_large(cols[stat])
            if n:
                self.too_large[stat] = self.too_large.get(stat, 0) + n
        if not cols["name"]:
            return None, cols["_negative"][0], cols["_unknown"][0]
        return _line_frame(cols), cols["_negative"][0], cols["_unknown"][0]

    def device_kind(self, df: pl.DataFrame, line_types: str | None) -> pl.DataFrame:
        return _device_kind(df, line_types)

    def finish(self) -> None:
        """Check what was not read (nothing to do: the protobuf runtime parsed it all)."""


INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def _as_int(values: list[Any]) -> pl.Series:
    """Integer stats as Int64; anything else (a string, a uint64 above 2**63) becomes null
    (the uint64 ones are counted by :func:`too_large`)."""
    return pl.Series(values, dtype=pl.Int64, strict=False)


def too_large(values: Iterable[Any]) -> int:
    """How many values are integers outside int64 (uint64 stats above 2**63 - 1): exact in
    the file, but the model's Int64 columns cannot hold them, so they become null."""
    return sum(1 for v in values if type(v) is int and not INT64_MIN <= v <= INT64_MAX)


def _as_str(values: list[Any]) -> list[str | None]:
    return [v if isinstance(v, str) else (None if v is None else str(v)) for v in values]


def _line_frame(cols: dict[str, list[Any]], **consts: Any) -> pl.DataFrame:
    df = pl.DataFrame({
        "name": pl.Series(cols["name"], dtype=pl.String),
        "start_ns": pl.Series(cols["start_ns"], dtype=pl.Int64),
        "end_ns": pl.Series(cols["end_ns"], dtype=pl.Int64),
        "op": pl.Series(_as_str(cols["hlo_op"]), dtype=pl.String),
        "module": pl.Series(_as_str(cols["hlo_module"]), dtype=pl.String),
        "program_id": _as_int(cols["program_id"]),
        "correlation_id": _as_int(cols["correlation_id"]),
        "memcpy_details": pl.Series(_as_str(cols["memcpy_details"]), dtype=pl.String),
        "device_ordinal": _as_int(cols["device_ordinal"]),
        "step_num": _as_int(cols["step_num"]),
    })
    return df.with_columns(**{k: pl.lit(v, dtype=pl.Int64) for k, v in consts.items()})


def _device_kind(df: pl.DataFrame, line_types: str | None) -> pl.DataFrame:
    """kind and memcpy subcategory, from the event name, the line's types, or memcpy_details."""
    types = (line_types or "").lower()
    copy_only_line = bool(types) and "kernel" not in types and "memcpy" in types
    set_only_line = bool(types) and "kernel" not in types and "memset" in types \
        and "memcpy" not in types
    name = pl.col("name")
    sub = name.str.extract(r"(?i)^Memcpy(HtoD|DtoH|DtoD|PtoP|H2D|D2H|D2D|P2P)", 1) \
        .str.to_lowercase().replace_strict(_MEMCPY_SUB, default=None)
    kind = (pl.when(name.str.contains(r"(?i)^Memset")).then(pl.lit("memset"))
            .when(name.str.contains(r"(?i)^Memcpy") | pl.col("memcpy_details").is_not_null())
            .then(pl.lit("memcpy"))
            .when(pl.lit(set_only_line)).then(pl.lit("memset"))
            .when(pl.lit(copy_only_line)).then(pl.lit("memcpy"))
            .otherwise(pl.lit("kernel")))
    line_sub = None
    if copy_only_line:
        m = re.search(r"memcpy(htod|dtoh|dtod|ptop|h2d|d2h|d2d|p2p)", types)
        line_sub = _MEMCPY_SUB.get(m.group(1)) if m else None
    return df.with_columns(
        kind=kind,
        subcategory=pl.when(kind == "memcpy").then(sub.fill_null(pl.lit(line_sub)))
        .otherwise(None),
        bytes=pl.when(kind != "kernel").then(
            pl.col("memcpy_details").str.extract(r"(?:^|\s)size:(\d+)", 1)
            .cast(pl.Float64, strict=False)).otherwise(None),
    )


_NAME_STATS = ("gpu_device_name", "device_name")  # plane stats that name the device


def _int_stat(stats: dict[str, Any], key: str, lo: int, hi: int, bad: list[str]) -> int | None:
    """An integer plane stat inside [lo, hi]; a value of another type or out of range is
    unknown (None) and its key is listed in ``bad`` so the caller can say so."""
    v = stats.get(key)
    if v is None:
        return None
    if type(v) is int and lo <= v <= hi:
        return v
    bad.append(key)
    return None


def _device_row(ordinal: int, stats: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """One DEVICE_SCHEMA row from a GPU plane's stats, and the stats that could not be used.

    The product comes from the identification table (vendor, arch, CUs, clock, memory), else
    from the device's own name string (``gpu_device_name``: e.g. ``Tesla V100-SXM2-16GB``),
    which also says the vendor when the plane lacks ``device_vendor`` (TensorFlow traces)."""
    bad: list[str] = []
    names = [stats[k].strip() for k in _NAME_STATS if isinstance(stats.get(k), str)
             and stats[k].strip()]
    dev_name = names[0] if names else None
    vendor_raw = str(stats.get("device_vendor") or "").lower()
    vendor = {"amd": "amd", "nvidia": "nvidia"}.get(vendor_raw) or (
        None if vendor_raw else hardware.vendor_from_name(dev_name))
    major = _int_stat(stats, "compute_cap_major", 0, 2**31 - 1, bad)
    minor = _int_stat(stats, "compute_cap_minor", 0, 2**31 - 1, bad)
    arch = None
    gfx = re.match(r"^gfx[0-9a-f]+", dev_name) if dev_name else None
    if gfx:
        arch = gfx.group(0)
    elif vendor == "amd" and major is not None and minor is not None:
        arch = hardware.AMD_ARCH_BY_CAP.get((major, minor))
    elif vendor == "nvidia" and major is not None and minor is not None:
        arch = f"sm_{major}{minor}"
    clock_khz = stats.get("clock_rate")
    clock_mhz = None
    if clock_khz is not None:
        if type(clock_khz) in (int, float) and 0 < clock_khz < float("inf") \
                and clock_khz <= INT64_MAX:
            clock_mhz = float(clock_khz) / 1000.0
        else:
            bad.append("clock_rate")
    cus = _int_stat(stats, "core_count", 0, 2**31 - 1, bad)
    mem = _int_stat(stats, "memory_size", 0, INT64_MAX, bad)
    product = hardware.identify(vendor, arch, cus, clock_mhz, mem)
    if product is None and dev_name and not gfx:
        named = hardware.identify_by_name(dev_name, mem)
        product = named if named is not None and named.vendor == vendor and (
            arch is None or named.arch == arch) else None
    row = {"device": ordinal, "vendor": vendor or (vendor_raw or None), "arch": arch,
           "product": product.name if product else (
               dev_name if dev_name and not gfx else None),
           "compute_units": cus, "clock_mhz": clock_mhz, "memory_bytes": mem,
           "spec_id": product.spec_id if product else None}
    return row, bad


def read(path: Path, decoder: str | None = None, threads: int | None = None) -> Trace:
    """One XSpace file as a single-host Trace (rank 0, times relative to the profile start).

    ``decoder``: "c" (the C extension, ``parsers.xspace_decode``), "python" (the per-event
    reader over protobuf messages) or None for the C one when it is built. Both give the same
    Trace; ``meta.extra["decoder"]`` says which one ran, and a warning says when the C one
    was wanted but is not built. ``threads``: C decoder threads for this file (the caller
    reading several files at once passes its share of the CPUs; None: up to 4).
    """
    from parsers import xspace_decode

    choice = decoder or xspace_decode.default_decoder()
    raw = read_raw(path)
    fallback = None
    if choice == "c" and not xspace_decode.available():
        fallback = xspace_decode.unavailable_reason()
        choice = "python"
    if choice == "c":
        space, source = xspace_decode.split(raw, path, threads)
    elif choice == "python":
        space, source = _parse(raw, path), PythonLines()
    else:
        raise ValueError(f"unknown XSpace decoder {choice!r} (expected 'c' or 'python')")
    input_bytes = len(raw)
    del raw
    trace = _read_space(path, space, source, input_bytes)
    if fallback:
        trace.meta.warn(f"{path.name}: read with the slow pure-Python XSpace reader: "
                        f"{fallback}")
    return trace


def _read_space(path: Path, space: Any, source: Any, input_bytes: int) -> Trace:
    meta = TraceMeta(sources=[{"path": str(path), "format": FORMAT}])
    for msg in list(space.errors) + list(space.warnings):
        meta.warn(f"{path.name}: profiler reported: {msg}")
    host = space.hostnames[0] if space.hostnames else path.name.split(".")[0]
    device_frames: list[pl.DataFrame] = []
    device_rows: list[dict[str, Any]] = []
    host_frames: list[pl.DataFrame] = []
    negative = unknown = 0
    ignored: dict[str, int] = {}
    profile_start = None
    cpu_plane = None
    modules: list[dict[str, Any]] = []
    readers, n_planned = _plan_lines(space, source)
    check_column_budget(path, n_planned, input_bytes)
    for plane_idx, plane in enumerate(space.planes):
        m = _GPU_PLANE.match(plane.name)
        if plane.name == "Task Environment":
            stats = _PlaneReader(plane).plane_stats()
            if isinstance(stats.get("profile_start_time"), int):
                profile_start = stats["profile_start_time"]
            continue
        if plane.name == "/host:CPU":
            cpu_plane = plane_idx, plane
            continue
        if plane.name == "/host:metadata":
            modules = _read_modules(plane)
            n_bad = sum(1 for m in modules if m["program_id"] is None)
            if n_bad:
                meta.warn(f"{path.name}: {n_bad} HLO modules have no int64 program id (a uint64 "
                          "fingerprint or none): their HLO cannot be joined to kernels")
            continue
        if not m:
            n = sum(source.count(plane_idx, i, line) for i, line in enumerate(plane.lines))
            if n and plane.name.startswith("/device:"):
                ignored[plane.name] = n
            continue
        reader = readers[plane_idx]
        ordinal = int(m.group(1))
        pstats = reader.plane_stats()
        row, bad = _device_row(ordinal, pstats)
        device_rows.append(row)
        for key in bad:
            meta.warn(f"{path.name}: {plane.name}: plane stat {key} = {pstats[key]!r} is not a "
                      "usable value: left unknown")
        # ROCm's memory_bandwidth is about half the real HBM rate: never a peak, but say so.
        bw_warning = hardware.reported_bandwidth_warning(
            device_rows[-1]["spec_id"], pstats.get("memory_bandwidth"), f"{path.name}: ")
        if bw_warning:
            meta.warn(bw_warning)
        for line_idx, line in enumerate(plane.lines):
            lm = _STREAM_LINE.match(line.name)
            if not lm:
                n = source.count(plane_idx, line_idx, line)
                if n:
                    ignored[f"{plane.name} line '{line.name}'"] = n
                continue
            df, n_neg, n_unknown = source.frame(reader, plane_idx, line_idx, line)
            negative += n_neg
            unknown += n_unknown
            if df is None:
                continue
            df = df.with_columns(device=pl.lit(ordinal, dtype=pl.Int64),
                                 stream=pl.lit(line.id, dtype=pl.Int64))
            device_frames.append(source.device_kind(df, lm.group(2)))
    steps = pl.DataFrame(schema=STEP_SCHEMA)
    if cpu_plane is not None:
        cpu_frames, host_frames, steps, n_neg, n_unknown = _read_host_plane(
            *cpu_plane, source, readers[cpu_plane[0]])
        negative += n_neg
        unknown += n_unknown
        if not any(f.height for f in device_frames) and cpu_frames:
            device_frames = cpu_frames
            ordinals = sorted(set(pl.concat(cpu_frames, how="diagonal_relaxed")["device"].to_list()))
            device_rows = [{"device": o, "vendor": "cpu", "arch": None, "product": "CPU",
                            "compute_units": None, "clock_mhz": None, "memory_bytes": None,
                            "spec_id": None} for o in ordinals]
            meta.warn(f"{path.name}: no GPU activity; XLA:CPU ops on host threads are "
                      f"analyzed as {len(ordinals)} CPU device(s) by their device_ordinal")
    if negative:
        meta.warn(f"{path.name}: dropped {negative} events with negative duration")
    if unknown:
        meta.warn(f"{path.name}: {unknown} events name an event metadata id the plane does not "
                  "define; kept as '<unknown event metadata N>'")
    for what, n in ignored.items():
        why = "TPU devices are not analyzed" if what.startswith("/device:TPU:") else \
            "not a device stream"
        meta.warn(f"{path.name}: ignored {n} events on {what} ({why})")
    for stat, n in sorted(source.too_large.items()):
        meta.warn(f"{path.name}: {n} {stat} values are uint64 above 2^63-1, which the "
                  "model's Int64 column cannot hold: left null")
    events = _assemble_events(device_frames, host)
    devices = conform(pl.DataFrame(device_rows, schema_overrides={
        k: v for k, v in DEVICE_SCHEMA.items() if k != "host" and k != "rank"},
        infer_schema_length=None).with_columns(host=pl.lit(host), rank=pl.lit(0))
        if device_rows else pl.DataFrame(), DEVICE_SCHEMA)
    host_events = conform(pl.concat(host_frames, how="diagonal_relaxed"), HOST_EVENT_SCHEMA) \
        .with_columns(host=pl.lit(host), rank=pl.lit(0, dtype=pl.Int32)) \
        if host_frames else pl.DataFrame(schema=HOST_EVENT_SCHEMA)
    source.finish()  # every byte is checked, including lines nothing above needed
    meta.extra = {"hosts": {host: {"profile_start_ns": profile_start, "path": str(path)}},
                  "decoder": {str(path): source.decoder}}
    module_frame = pl.DataFrame(modules, schema={k: v for k, v in MODULE_SCHEMA.items()
                                                 if k not in ("host", "rank")})
    return Trace(events=events, host_events=host_events,
                 steps=steps.with_columns(rank=pl.lit(0, dtype=pl.Int32)),
                 devices=devices, meta=meta,
                 modules=conform(module_frame.with_columns(host=pl.lit(host), rank=pl.lit(0)),
                                 MODULE_SCHEMA))


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
            _stat_value(pid_stat, ref_names) if pid_stat is not None else None)
        if program_id is not None and (type(program_id) is not int or too_large([program_id])):
            program_id = None  # a uint64 fingerprint (TPU) or not an integer: unknown
        out.append({"program_id": program_id, "module": m.group(1) if m else md.name,
                    "hlo_proto": proto.bytes_value})
    return sorted(out, key=lambda r: (r["program_id"] is None, r["program_id"] or 0))


def _assemble_events(frames: list[pl.DataFrame], host: str) -> pl.DataFrame:
    frames = [f for f in frames if f.height]
    if not frames:
        return pl.DataFrame(schema=EVENT_SCHEMA)
    df = pl.concat(frames, how="diagonal_relaxed").with_columns(
        host=pl.lit(host), rank=pl.lit(0))
    return conform(df, EVENT_SCHEMA)


def _plan_lines(space: Any, source: Any) -> tuple[dict[int, _PlaneReader], int]:
    """The plane readers ``_read_space`` uses, and the lines it will read, told to the
    source up front (the C decoder then decodes a plane's lines together, in parallel):
    the stream lines of GPU planes, and every line of the (last) ``/host:CPU`` plane.
    Also returns the number of events in those lines."""
    readers: dict[int, _PlaneReader] = {}
    host_idx = None
    n_events = 0
    for plane_idx, plane in enumerate(space.planes):
        if plane.name == "/host:CPU":
            host_idx = plane_idx
        elif plane.name not in ("Task Environment", "/host:metadata") \
                and _GPU_PLANE.match(plane.name):
            readers[plane_idx] = _PlaneReader(plane)
            lines = [(i, line) for i, line in enumerate(plane.lines)
                     if _STREAM_LINE.match(line.name)]
            n_events += sum(source.count(plane_idx, i, line) for i, line in lines)
            source.plan(readers[plane_idx], plane_idx, lines, wanted_only=False)
    if host_idx is not None:
        plane = space.planes[host_idx]
        readers[host_idx] = _PlaneReader(plane)
        lines = list(enumerate(plane.lines))
        n_events += sum(source.count(host_idx, i, line) for i, line in lines)
        source.plan(readers[host_idx], host_idx, lines, wanted_only=True)
    return readers, n_events


def _read_host_plane(plane_idx: int, plane: Any, source: Any, reader: _PlaneReader
                     ) -> tuple[list[pl.DataFrame], list[pl.DataFrame], pl.DataFrame, int, int]:
    """XLA:CPU op events (as device frames), API/annotation host events, and steps."""
    pid = reader.plane_stats().get("process_id")
    pid = pid if isinstance(pid, int) else None
    cpu_frames: list[pl.DataFrame] = []
    host_frames: list[pl.DataFrame] = []
    step_frames: list[pl.DataFrame] = []
    negative = unknown = 0
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
    if step_frames:
        steps_df = (pl.concat(step_frames).group_by("step_num")
                    .agg(pl.col("start_ns").min(), pl.col("end_ns").max())
                    .sort("start_ns")
                    .select(step=pl.col("step_num"), start_ns="start_ns", end_ns="end_ns",
                            source=pl.lit("step_num")))
        steps_df = conform(steps_df.with_columns(rank=pl.lit(0)), STEP_SCHEMA)
    else:
        steps_df = pl.DataFrame(schema=STEP_SCHEMA)
    return cpu_frames, host_frames, steps_df, negative, unknown
