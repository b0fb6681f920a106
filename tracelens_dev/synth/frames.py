"""The construction as a :class:`~tracelens.core.model.Trace`: the format-neutral form every writer
consumes.

The trace is what a reader of a perfect trace of this job would return before classification:
``category`` and ``rule`` are null; ``subcategory`` only where a format states it (memcpy
direction, the collective type of a collective kernel); ``step`` is left to the loader.
``msg_bytes``/``group_size`` of collectives and ``bytes`` of copies are filled (formats that
carry them, such as RCCL API rows or memcpy records, can write them).

``trace.meta`` carries what formats need beyond the frames (documented in
docs/synthetic.md): ``hosts`` (rank, ``profile_start_ns``, ``pid`` of each) and ``writer`` (a
:class:`~tracelens_dev.hints.SynthMeta` field: launch geometry by kernel name, plane stats,
line-name and ``kernel_details`` styles of the device model, the scenario, and each host's
thread of the step annotations).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import polars as pl

from tracelens.core.model import (DEVICE_SCHEMA, EVENT_SCHEMA, HOST_EVENT_SCHEMA, MODULE_SCHEMA,
                             STEP_SCHEMA, HostInfo, Trace, conform)
from tracelens_dev.hints import SynthMeta, WriterHints
from tracelens_dev.synth.devices import DeviceModel
from tracelens_dev.synth.hlo import program_proto
from tracelens_dev.synth.program import Program
from tracelens_dev.synth.scenario import Scenario
from tracelens_dev.synth.schedule import Records


def hostnames(sc: Scenario, model: DeviceModel) -> list[str]:
    if sc.hostnames is not None:
        return list(sc.hostnames)
    return [model.host_pattern.format(key=model.key, h=h) for h in range(sc.hosts)]


def program_hlo(sc: Scenario, prog: Program) -> bytes:
    """The program's serialized ``xla.HloProto``: every op its kernels name, with the shapes
    of the construction (one SPMD partition per device of the job)."""
    return program_proto(sc.module, sc.program_id, sc.hosts * sc.gpus, prog.recipes())


def _spec_frame(prog: Program, sc: Scenario) -> pl.DataFrame:
    n_job = sc.hosts * sc.gpus
    rows = []
    for s in prog.specs:
        group = None if s.group is None else (sc.gpus if s.group == "host" else n_job)
        rows.append({
            "kind": s.kind, "name": s.name, "op": s.op,
            "module": sc.module if s.in_program else None,
            "program_id": sc.program_id if s.in_program else None,
            "subcategory": s.subcategory, "msg_bytes": s.msg_bytes, "group_size": group,
            "bytes": float(s.copy_bytes) if (s.copy_bytes is not None and s.kind != "kernel")
            else None,
            "role": s.role, "api": s.api})
    return pl.DataFrame(rows, schema={
        "kind": pl.String, "name": pl.String, "op": pl.String, "module": pl.String,
        "program_id": pl.Int64, "subcategory": pl.String, "msg_bytes": pl.Int64,
        "group_size": pl.Int32, "bytes": pl.Float64, "role": pl.Int32, "api": pl.String})


def assemble(sc: Scenario, model: DeviceModel, prog: Program, rec: Records) -> Trace:
    rng = np.random.default_rng([sc.seed, 7])
    hosts = hostnames(sc, model)
    offsets = list(sc.host_offsets_ns) if sc.host_offsets_ns is not None else \
        [0] + [int(x) for x in rng.integers(1_000, 50_000, sc.hosts - 1)]
    pids = [int(x) for x in rng.integers(2_000, 60_000, sc.hosts)]
    tid_base = [int(x) for x in rng.integers(1_000, 30_000, sc.hosts)]
    python_tid = [int(x) for x in rng.integers(2**40, 2**62, sc.hosts)]
    corr_base = [int(x) for x in rng.integers(1, 500, sc.hosts)]

    specs = _spec_frame(prog, sc)
    rank = (rec.dev // sc.gpus).astype(np.int32)
    device = (rec.dev % sc.gpus).astype(np.int32)
    role = specs["role"].to_numpy()[rec.spec]
    stream = np.asarray(model.streams, np.int64)[role]
    # Launch order per host: correlation ids increase with the launch time.
    launch = rec.start - rng.integers(5_000, 25_000, len(rec.start))
    by_launch = np.lexsort((stream, device, launch, rank))
    first_of_rank = np.searchsorted(rank[by_launch], np.arange(sc.hosts))
    corr = np.empty(len(rank), np.int64)
    corr[by_launch] = (np.arange(len(rank)) - first_of_rank[rank[by_launch]] + 1
                       + np.asarray(corr_base, np.int64)[rank[by_launch]])
    order = np.lexsort((rec.end, rec.start, stream, device, rank))
    host_col = pl.Series("host", hosts, dtype=pl.String).gather(rank[order])
    ev = specs[rec.spec[order]].with_columns(
        host_col, rank=pl.Series(rank[order]), device=pl.Series(device[order]),
        stream=pl.Series(stream[order]), start_ns=pl.Series(rec.start[order]),
        end_ns=pl.Series(rec.end[order]), correlation_id=pl.Series(corr[order]))
    host_frames = [_step_events(rec, hosts, pids, python_tid)]
    if sc.host_launches:
        host_frames.append(_launch_events(specs["api"].to_numpy()[rec.spec], rank, device,
                                          launch, corr, hosts, pids, tid_base))
    events = conform(ev, EVENT_SCHEMA)
    host_events = conform(pl.concat(host_frames, how="diagonal_relaxed"), HOST_EVENT_SCHEMA) \
        .sort("rank", "tid", "start_ns")
    steps = conform(pl.DataFrame({
        "rank": rec.step_host.astype(np.int32), "step": rec.step_num.astype(np.int32),
        "start_ns": rec.step_start, "end_ns": rec.step_end}).with_columns(
        source=pl.lit("step_num")), STEP_SCHEMA).sort("rank", "step")
    row = model.devices_row()
    devices = conform(pl.DataFrame([{**row, "host": hosts[h], "rank": h, "device": g}
                                    for h in range(sc.hosts) for g in range(sc.gpus)],
                                   schema_overrides=dict(DEVICE_SCHEMA)), DEVICE_SCHEMA)
    proto = program_hlo(sc, prog)
    modules = conform(pl.DataFrame([{"host": hosts[h], "rank": h, "program_id": sc.program_id,
                                     "module": sc.module, "hlo_proto": proto}
                                    for h in range(sc.hosts)],
                                   schema_overrides=dict(MODULE_SCHEMA)), MODULE_SCHEMA)
    kernels = {s.name: s.geometry.as_dict() for s in prog.specs}
    meta = SynthMeta(
        sources=[{"path": f"<synthetic:{sc.name}>", "format": "synthetic"}],
        alignment="synthetic (one clock)",
        hosts={hosts[h]: HostInfo(profile_start_ns=sc.profile_start_ns + offsets[h],
                                  ranks=[h], pid=pids[h])
               for h in range(sc.hosts)},
        writer=WriterHints(kernels=kernels, plane_stats=[list(kv) for kv in model.plane_stats],
                           line_names=model.line_names, kernel_details=model.kernel_details,
                           scenario=dataclasses.asdict(sc), device_model=model.key,
                           python_tids={hosts[h]: python_tid[h] for h in range(sc.hosts)}))
    return Trace(events=events, host_events=host_events, steps=steps, devices=devices,
                 meta=meta, modules=modules)


def _step_events(rec: Records, hosts: list[str], pids: list[int],
                 python_tid: list[int]) -> pl.DataFrame:
    """JAX's StepTraceAnnotation("train", step_num=i): one host event per host and step."""
    h = rec.step_host
    return pl.DataFrame({
        "host": [hosts[i] for i in h], "rank": h.astype(np.int32),
        "pid": [pids[i] for i in h], "tid": [python_tid[i] for i in h],
        "name": ["train"] * len(h), "start_ns": rec.step_start, "end_ns": rec.step_end,
        "kind": ["step"] * len(h)})


def _launch_events(api: np.ndarray, rank: np.ndarray, device: np.ndarray, launch: np.ndarray,
                   corr: np.ndarray, hosts: list[str], pids: list[int],
                   tid_base: list[int]) -> pl.DataFrame:
    """One launch API call per activity, on its device's host thread, ending before the next
    launch on that thread (at most 3 µs long)."""
    tid = np.asarray(tid_base, np.int64)[rank] + device
    order = np.lexsort((corr, launch, tid, rank))
    start = launch[order]
    same = np.r_[(rank[order][1:] == rank[order][:-1]) & (tid[order][1:] == tid[order][:-1]),
                 False]
    nxt = np.r_[start[1:], 0]
    end = np.where(same, np.minimum(start + 3_000, nxt), start + 3_000)
    r = rank[order]
    return pl.DataFrame({
        "host": pl.Series(hosts, dtype=pl.String).gather(r), "rank": r,
        "pid": np.asarray(pids, np.int64)[r], "tid": tid[order],
        "name": pl.Series(api[order], dtype=pl.String), "start_ns": start, "end_ns": end,
        "correlation_id": corr[order], "kind": pl.Series(["api"], dtype=pl.String)
        .gather(np.zeros(len(r), np.int64))})
