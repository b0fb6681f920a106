"""A simulated step as a :class:`tracelens.core.model.Trace`, and written in every format the
readers take (docs/simulator.md).

Model rank = host (one process per host, as JAX runs), device = the simulator rank's device
ordinal; each simulator rank's host thread is its own ``tid``. Kernel and API names come from
the device model's name tables (tracelens_dev.synth.names) so that the classifier puts each
item in the simulator's category. Every host gets one step, [0, T], as its format marks
steps. What a format cannot express is listed in :func:`limits` (and in the job's meta).
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from tracelens.core.model import (DEVICE_SCHEMA, EVENT_SCHEMA, HOST_EVENT_SCHEMA, STEP_SCHEMA,
                             HostInfo, Trace, conform)
from tracelens_dev.hints import SynthMeta, WriterHints
from tracelens_dev.sim.engine import Sim
from tracelens_dev.sim.model import Collective, Kernel
from tracelens_dev.synth.devices import device_model
from tracelens_dev.synth.names import Names

PROFILE_START_NS = 1_795_000_000_000_000_000
MODULE = "sim_step"
FORMATS = ("xspace", "xspace-device", "kineto", "rocpd", "rpd", "rocprof-json", "rocprof-csv")
"""``xspace``: with host API events; ``xspace-device``: the same without them (step markers
only); the others as their writers write them (see :func:`limits`)."""

_LIMITS = {
    "xspace": ["named host ops are not written (the writer writes API calls with correlation "
               "ids and step markers): they read as untraced host time",
               "event record/wait calls are written, but no format names the event: "
               "cross-stream event dependencies are not in the trace"],
    "xspace-device": ["no host events (step markers only)",
                      "no cross-stream event dependencies"],
    "kineto": ["named host ops are not written (runtime calls only)",
               "collective instances match by type and order (no op): send/recv pairs of "
               "different stages mismatch", "no cross-stream event dependencies",
               "one file per host (the writer's rank), its devices' threads in it"],
    "rocpd": ["no host API calls but RCCL API rows, which the writer places 4 us before each "
              "collective kernel (not the simulated host timeline): the analyzer reads them "
              "as host calls that launched the collectives",
              "collective instances match by type and order (no op)",
              "no cross-stream event dependencies"],
}
for _f in ("rpd", "rocprof-json", "rocprof-csv"):
    _LIMITS[_f] = _LIMITS["rocpd"]


def limits(fmt: str) -> list[str]:
    """What format ``fmt`` cannot express of a simulated step."""
    return list(_LIMITS[fmt])


_STREAM_INDEX = {"compute": 0, "comm": 1, "copy": 2}


def _names(sim: Sim) -> tuple[Names, dict[str, str]]:
    model = device_model(sim.job.vendor)
    n = Names(model)
    by_cat = {"gemm": n.gemm("fwd", (256, 128, 64)), "attention": n.attention("fwd"),
              "elementwise": n.xla_kernel("loop_add_fusion.1"),
              "reduction": n.xla_kernel("input_reduce_fusion.1"),
              "convolution": n.xla_kernel("convolution.1"), "other": "sim_custom_kernel"}
    return n, by_cat


def to_trace(sim: Sim, host_events: bool = True) -> Trace:
    """The simulated step as the trace a perfect profiler would record."""
    job = sim.job
    model = device_model(job.vendor)
    names, by_cat = _names(sim)
    amd = model.family == "amd"
    T = sim.step_ns
    n_hosts = (job.ranks + job.gpus_per_host - 1) // job.gpus_per_host
    hosts = [f"sim-node{h}" for h in range(n_hosts)]
    pids = [40_000 + h for h in range(n_hosts)]
    python_tid = [50_000 + h for h in range(n_hosts)]
    corr_of_seg: dict[int, int] = {}
    corr = 1
    for s in sim.segs:
        if s.kind == "call":
            corr_of_seg[s.id] = corr
            corr += 1
    rows = []
    for it in sim.items:
        h, d = job.where(it.rank)
        spec = it.spec
        row = {"host": hosts[h], "rank": h, "device": d,
               "stream": model.streams[_STREAM_INDEX[it.stream]], "start_ns": it.start,
               "end_ns": it.end, "correlation_id": corr_of_seg[it.seg]}
        if isinstance(spec, Collective):
            row.update(kind="kernel", subcategory=spec.ctype,
                       name=("ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)"
                             if spec.ctype == "send-recv" else names.collective(spec.ctype)),
                       op=spec.key, module=MODULE, program_id=1, msg_bytes=1 << 20,
                       group_size=len(spec.group),
                       groups=",".join(str(m) for m in spec.group))
        elif isinstance(spec, Kernel) and (spec.copy or spec.category == "memory"):
            direction = spec.copy or "d2d"
            kind, name = names.copy(direction)
            row.update(kind=kind, name=name, subcategory=direction, bytes=float(1 << 20))
        else:
            row.update(kind="kernel", name=by_cat[spec.category])
        rows.append(row)
    events = conform(pl.DataFrame(rows, infer_schema_length=None), EVENT_SCHEMA).sort(
        "rank", "device", "stream", "start_ns")
    hev = [{"host": hosts[h], "rank": h, "pid": pids[h], "tid": python_tid[h], "name": "train",
            "start_ns": 0, "end_ns": T, "kind": "step"} for h in range(n_hosts)]
    if host_events:
        for s in sim.segs:
            if s.kind != "call":
                continue
            h, d = job.where(s.rank)
            hev.append({"host": hosts[h], "rank": h, "pid": pids[h], "tid": 60_000 + s.rank,
                        "name": s.name, "start_ns": s.start, "end_ns": s.end,
                        "correlation_id": corr_of_seg[s.id], "kind": "api"})
    host_frame = conform(pl.DataFrame(hev, infer_schema_length=None),
                         HOST_EVENT_SCHEMA).sort("rank", "tid", "start_ns")
    steps = conform(pl.DataFrame({"rank": list(range(n_hosts)), "step": [1] * n_hosts,
                                  "start_ns": [0] * n_hosts, "end_ns": [T] * n_hosts,
                                  "source": ["step_num"] * n_hosts}), STEP_SCHEMA)
    row = model.devices_row()
    devices = conform(pl.DataFrame([{**row, "host": hosts[h], "rank": h, "device": d}
                                    for h, d in (job.where(r) for r in range(job.ranks))],
                                   schema_overrides=dict(DEVICE_SCHEMA)), DEVICE_SCHEMA)
    geometry = {n: names.geometry("gemm" if c == "gemm" else "x", 1 << 20).as_dict()
                for c, n in by_cat.items()}
    meta = SynthMeta(
        sources=[{"path": f"<simulated:{job.name}>", "format": "synthetic"}],
        alignment="synthetic (one clock)",
        hosts={hosts[h]: HostInfo(profile_start_ns=PROFILE_START_NS, ranks=[h], pid=pids[h])
               for h in range(n_hosts)},
        writer=WriterHints(kernels=geometry, plane_stats=[list(kv) for kv in model.plane_stats],
                           line_names=model.line_names, kernel_details=model.kernel_details,
                           scenario={"simulated": job.name, **job.meta},
                           device_model=model.key,
                           python_tids={hosts[h]: python_tid[h] for h in range(n_hosts)}))
    del amd
    return Trace(events=events, host_events=host_frame, steps=steps, devices=devices,
                 meta=meta)


def write(sim: Sim, fmt: str, out: Path) -> list[Path]:
    """Write the step in ``fmt`` (one of :data:`FORMATS`) under directory ``out``; returns
    what to hand the reader (one path: a file or a directory)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    trace = to_trace(sim, host_events=(fmt in ("xspace", "kineto")))
    if fmt in ("xspace", "xspace-device"):
        from tracelens_dev.writers import xspace
        hosts = trace.devices["host"].unique().len()
        target = out / ("step.xplane.pb" if hosts == 1 else "logdir")
        xspace.write(trace, target, layout="file" if hosts == 1 else "logdir", run="run")
        return [target]
    if fmt == "kineto":
        from tracelens_dev.writers import kineto
        kineto.write(trace, out / "kineto", host_calls=True)
        return [out / "kineto"]
    from tracelens_dev.writers import rocprof
    if fmt == "rocpd":
        return rocprof.write_rocpd(trace, out / "step.db")
    if fmt == "rpd":
        return rocprof.write_rpd(trace, out / "step.rpd")
    if fmt == "rocprof-json":
        return rocprof.write_json(trace, out / "step_results.json")
    if fmt == "rocprof-csv":
        rocprof.write_csv(trace, out / "csv")
        return [out / "csv"]
    raise ValueError(f"unknown format {fmt!r}; known: {', '.join(FORMATS)}")
