"""The engine (issue 17) on an XProf log directory of 64 hosts × 8 GPUs × 20k kernels.

    python benchmarks/bench_engine.py [--hosts 64] [--per-gpu 20000] [--workers 2]
                                      [--command summarize] [--data DIR] [--load] [--maps N]

Generates the job with ``tracelens_dev.synth`` + ``tracelens_dev.writers.xspace`` (8 hosts at
a time, one seed per 8 hosts, distinct host names, one run folder; into ``--data DIR``,
default ``/tmp/tracelens-bench-engine``, reused when there), then measures, each in a fresh
process:

- ``in-process``: the command's map and reduce in one process (``--workers 1``; the command
  is ``summarize`` or ``collectives``, through the functions the CLI calls);
- ``cluster-N``: the same on a ``LocalCluster`` of N worker processes (its start included);
- with ``--load``, ``load-all``: the one-process loader of every host's events
  (``tracelens.load`` + ``summarize``), the path the engine replaces;
- with ``--maps N``, ``maps-N``: the first N hosts' maps one after another in one process,
  as a worker runs them (its CPU per host: the map's own cost, without a cluster's noise);
- with ``--floor``, ``floor``: the bare upb ``ParseFromString`` of the largest host file, its
  RSS after the imports and its peak: what decoding the file alone adds to a process; and
  ``runtime-floor``: a worker's own floor before and during that file: its RSS after the
  imports a map makes (the loader, the engine, polars, the summary analysis), after one map
  of a bundled 0.3 MB sample (every lazy import and polars' first queries done: a worker's
  state before its first host), the events frame the loader leaves for the largest host
  file (``estimated_size``, the model's columns and nothing else) and the peak of loading
  it (VmHWM, reset after the warm-up through ``/proc/self/clear_refs``).

For each: wall time, CPU time (this process and its children) / wall, the client's peak RSS,
each worker's peak RSS (``resource.getrusage`` in the worker via ``client.run``) and its RSS
after imports, each host's map time on its worker and the pickled size of what it sent back.
Prints the numbers as JSON and writes them to ``benchmarks/results/engine.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

from run import bench_env  # benchmarks/run.py: the script's own folder is on sys.path

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable

MEASURE = r"""
import json, os, pickle, resource, sys, time
mode, data, command = sys.argv[1], sys.argv[2], sys.argv[3]
t0 = time.perf_counter()

def cpu():
    a, b = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return a.ru_utime + a.ru_stime + b.ru_utime + b.ru_stime

def peak(_dask_worker=None):
    # this process's own high-water mark (VmHWM): ru_maxrss starts at the parent's peak when
    # the parent was larger (Linux keeps it across exec; a parent that just generated the
    # job reads ~380 MB in its child before the child did anything)
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024

def now():
    import psutil
    return psutil.Process().memory_info().rss

out = {"mode": mode}

def watch():  # where the client's RSS peaked: its main thread's frames at the highest sample
    import threading, traceback
    main_id = threading.main_thread().ident
    def run():
        best = 0
        while True:
            r = now()
            if r > best:
                best = r
                frames = traceback.extract_stack(sys._current_frames().get(main_id))[-5:]
                out["client_peak_sampled"] = [r, " <- ".join(
                    f"{f.name}:{f.lineno}" for f in reversed(frames))]
            time.sleep(0.02)
    threading.Thread(target=run, daemon=True).start()

watch()
if mode == "floor":  # the bare decode of the largest host file: upb's ParseFromString
    from pathlib import Path
    from parsers.xplane_schema import xspace_class
    f = max(Path(data).glob("*.xplane.pb"), key=lambda p: p.stat().st_size)
    cls = xspace_class()
    out["rss_after_imports_bytes"] = now()
    cls().ParseFromString(f.read_bytes())
    out["file_bytes"] = f.stat().st_size
elif mode == "runtime-floor":  # what a worker holds before its first host, and the model
    from pathlib import Path
    import polars, tracelens.loading.loader, tracelens.engine.hosts  # a map's first imports,
    # and the
    from tracelens.analyze.summary.types import SummaryOptions  # analysis it unpickles
    from tracelens.analyze.summary.build import SummaryAnalysis
    from tracelens.engine.hosts import HostFile, MapOptions, map_host
    from tracelens.loading.loader import load_host
    from tracelens.engine.protocol import Task

    def status(key):
        line = next(x for x in open("/proc/self/status") if x.startswith(key + ":"))
        return int(line.split()[1]) * 1024

    out["rss_after_imports_bytes"] = now()
    sample = Path(sys.argv[4]) / "sample_traces" / "mi300x_8gpu_llama_step.xplane.pb"
    map_host(HostFile(sample), MapOptions(tasks=(Task(SummaryAnalysis(), SummaryOptions()),)))
    out["sample_bytes"] = sample.stat().st_size
    out["rss_warm_bytes"] = now()
    f = max(Path(data).glob("*.xplane.pb"), key=lambda p: p.stat().st_size)
    with open("/proc/self/clear_refs", "w") as hwm:
        hwm.write("5")  # VmHWM := VmRSS (Linux)
    out["rss_hwm_reset_bytes"] = status("VmHWM")
    trace, _ = load_host(f, 0, True)
    out["load_peak_rss_bytes"] = status("VmHWM")
    out["events_frame_bytes"] = trace.events.estimated_size()
    out["events"] = trace.events.height
    out["file_bytes"] = f.stat().st_size
elif mode.startswith("maps-"):  # N host maps one after another, as one worker runs them
    from tracelens.analyze.summary.types import SummaryOptions
    from tracelens.analyze.summary.build import SummaryAnalysis
    from tracelens.engine.hosts import HostFile, MapOptions, map_host
    from tracelens.engine.protocol import Task
    from pathlib import Path
    files = sorted(Path(data).glob("*.xplane.pb"))[:int(mode.split("-")[1])]
    options = MapOptions(tasks=(Task(SummaryAnalysis(), SummaryOptions()),))
    c0 = cpu()
    out["map_s"] = [map_host(HostFile(f), options).map_s for f in files]
    out["hosts"] = len(files)
    out["cpu_per_host_s"] = round((cpu() - c0) / len(files), 4)
elif mode == "load-all":
    import tracelens
    from tracelens.analyze.summary.build import summarize
    summarize(tracelens.load([data]))
else:
    from tracelens.analyze.summary.types import SummaryOptions
    from tracelens.engine.cluster import local_cluster
    from tracelens.analyze.communication.collective_parts import (
        CollectivesAnalysis,
        CollectivesOptions,
    )
    from tracelens.analyze.summary.build import SummaryAnalysis
    from tracelens.engine.hosts import EngineOptions, LoadOptions, run_tasks
    from tracelens.engine.protocol import Task
    from tracelens.results.encode import encode

    def run_command(command, paths, workers=None, scheduler=None):
        engine = EngineOptions(workers, scheduler)
        if command == "summarize":
            (res,), job = run_tasks([Task(SummaryAnalysis(), SummaryOptions())], paths,
                                    LoadOptions(), engine)
            return job, json.dumps(encode(res))
        (res,), job = run_tasks([Task(CollectivesAnalysis(), CollectivesOptions())], paths,
                                LoadOptions(), engine)
        return job, json.dumps(encode(res))

    workers = int(mode.split("-")[1]) if mode.startswith("cluster") else 1
    if workers > 1:
        import shutil, tempfile
        from distributed import Client
        scratch = tempfile.mkdtemp(prefix="tracelens-bench-dask-")
        cluster = local_cluster(workers, scratch)
        client = Client(cluster, set_as_default=False)
        out["cluster_start_s"] = round(time.perf_counter() - t0, 3)
        def warm(_dask_worker=None):
            import tracelens.loading.loader, tracelens.engine.hosts, polars  # a map's imports
            return now()
        out["worker_rss_after_imports_bytes"] = sorted(client.run(warm).values())
        job, result = run_command(command, [data], scheduler=cluster.scheduler_address)
        out["worker_peak_rss_bytes"] = sorted(client.run(peak).values())
        client.close(); cluster.close(); shutil.rmtree(scratch, ignore_errors=True)
    else:
        job, result = run_command(command, [data], workers=1)
    out["hosts"] = len(job.hosts)
    out["map_s"] = [h.map_s for h in job.hosts]
    out["partial_bytes"] = [len(pickle.dumps(h)) for h in job.hosts]
    out["result_bytes"] = len(result)
    import hashlib
    out["result_sha256"] = hashlib.sha256(result.encode()).hexdigest()
out["wall_s"] = round(time.perf_counter() - t0, 3)
out["cpu_s"] = round(cpu(), 3)
out["client_peak_rss_bytes"] = peak()
out["client_ru_maxrss_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps(out))
"""


def make_job(data: Path, hosts: int, per_gpu: int) -> Path:
    """``hosts`` × 8 GPUs × ``per_gpu`` kernels in one XProf run folder (8 hosts per seed)."""
    from tracelens_dev.writers.xspace import write
    from tracelens_dev.synth import Scenario, build, scaled

    root = data / f"engine_{hosts}x8_{per_gpu}"
    run_dir = root / "plugins" / "profile" / "bench"
    if run_dir.exists() and len(list(run_dir.glob("*.xplane.pb"))) == hosts:
        return run_dir
    for first in range(0, hosts, 8):
        n = min(8, hosts - first)
        names = tuple(f"node{i:04d}" for i in range(first, first + n))
        sc = scaled(Scenario(device="mi355x", hosts=n, gpus=8, layers=32, seed=17 + first,
                             hostnames=names), per_gpu)
        write(build(sc, truth=False).trace, root, layout="logdir", run="bench")
        print(f"  wrote hosts {first}..{first + n - 1}", flush=True)
    return run_dir



def make_ar_job(data: Path, hosts: int, per_gpu: int, every: int = 50,
                transfer_ns: int = 100_000) -> Path:
    """Issue 45's shape: ``hosts`` × 8 GPUs × ``per_gpu`` compute kernels on stream 1 (two
    names alternating, 20-60 µs each, 1-3 µs apart, seeded per host and GPU), after every
    ``every``-th of them an all-reduce on stream 2, no step markers and no host events. An
    all-reduce starts when its GPU issued it and the previous one ended (stream order) and
    ends ``transfer_ns`` after the last GPU of the job arrived (one instance across all
    ranks, the k-th on every GPU). Two passes: the arrivals of every GPU first (kept: GPUs ×
    all-reduces), then 8 hosts at a time written as one XProf log directory."""
    import numpy as np
    import polars as pl

    from tracelens.core.model import (DEVICE_SCHEMA, EVENT_SCHEMA, HOST_EVENT_SCHEMA, STEP_SCHEMA,
                                 Trace, conform)
    from tracelens_dev.writers.xspace import write

    root = data / f"ar{every}_{hosts}x8_{per_gpu}"
    run_dir = root / "plugins" / "profile" / "bench"
    if run_dir.exists() and len(list(run_dir.glob("*.xplane.pb"))) == hosts:
        return run_dir
    n_ar = per_gpu // every
    t0 = 1_000_000

    def compute(h: int, g: int) -> tuple[np.ndarray, np.ndarray]:
        rng = np.random.default_rng([17, h, g])
        dur = rng.integers(20_000, 60_000, per_gpu)
        gap = rng.integers(1_000, 3_000, per_gpu)
        end = t0 + np.cumsum(gap + dur)
        return end - dur, end

    arrive = np.empty((hosts * 8, n_ar), np.int64)
    for h in range(hosts):
        for g in range(8):
            _, end = compute(h, g)
            arrive[h * 8 + g] = end[every - 1::every][:n_ar] + 500  # issued after its kernel
    ar_start = np.empty_like(arrive)
    ar_end = np.empty(n_ar, np.int64)
    prev = 0
    for i in range(n_ar):
        ar_start[:, i] = np.maximum(arrive[:, i], prev)
        prev = ar_end[i] = int(ar_start[:, i].max()) + transfer_ns
    names = np.array(["Cijk_Ailk_Bljk_BBS_BH_MT256x224x64_MI16x16x16x1_SN_1LDSB0.kd",
                      "loop_add_fusion.kd"])
    ops = np.array(["dot.1", "add_fusion"])
    ar_name, ar_op = "ncclDevKernel_Generic_4(x)", "all-reduce-start.1"
    for first in range(0, hosts, 8):
        frames = []
        for h in range(first, min(first + 8, hosts)):
            for g in range(8):
                start, end = compute(h, g)
                k = np.arange(per_gpu) % 2
                frames.append(pl.DataFrame({
                    "host": f"node{h:04d}", "rank": h, "device": g, "stream": 1,
                    "kind": "kernel", "name": names[k], "op": ops[k], "category": None,
                    "subcategory": None, "start_ns": start, "end_ns": end}))
                frames.append(pl.DataFrame({
                    "host": f"node{h:04d}", "rank": h, "device": g, "stream": 2,
                    "kind": "kernel", "name": ar_name, "op": ar_op, "category": "collective",
                    "subcategory": "all-reduce", "start_ns": ar_start[h * 8 + g],
                    "end_ns": ar_end}))
        events = conform(pl.concat(frames, how="vertical_relaxed"), EVENT_SCHEMA)
        devices = conform(events.select("host", "rank", "device").unique().sort(
            "rank", "device").with_columns(vendor=pl.lit("AMD"), arch=pl.lit("gfx942")),
            DEVICE_SCHEMA)
        trace = Trace(events=events, host_events=pl.DataFrame(schema=HOST_EVENT_SCHEMA),
                      steps=conform(pl.DataFrame(schema=STEP_SCHEMA), STEP_SCHEMA),
                      devices=devices)
        write(trace, root, layout="logdir", run="bench")
        print(f"  wrote hosts {first}..{min(first + 8, hosts) - 1}", flush=True)
    return run_dir


def measure(mode: str, data: Path, command: str, gather: bool = False) -> dict:
    env = bench_env(ROOT)
    # a cluster keeps summarize's partials on its workers by default (the summary reduced on
    # a worker, the critical path in rounds there); ``gather``: every part comes back here
    env["TRACELENS_CRITICAL_ROUNDS"] = "0" if gather else "1"
    proc = subprocess.run([PY, "-c", MEASURE, mode, str(data), command, str(ROOT)], env=env,
                          cwd=ROOT, capture_output=True, text=True, check=False)
    if proc.returncode:
        return {"mode": mode, "error": proc.stderr.strip().splitlines()[-1:]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hosts", type=int, default=64)
    ap.add_argument("--per-gpu", type=int, default=20_000)
    ap.add_argument("--shape", default="synth", choices=["synth", "ar50"],
                    help="synth: the synthetic FSDP job (steps, host launches off); ar50: "
                         "issue 45's job (an all-reduce every 50 kernels on a second stream, "
                         "no step markers)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--command", default="summarize", choices=["summarize", "collectives"])
    ap.add_argument("--data", type=Path, default=Path("/tmp/tracelens-bench-engine"))
    ap.add_argument("--load", action="store_true", help="also time the one-process loader")
    ap.add_argument("--maps", type=int, default=0,
                    help="also time this many host maps one after another in one process")
    ap.add_argument("--floor", action="store_true",
                    help="also the bare ParseFromString of the largest host file (a worker's "
                         "floor: its peak RSS less its RSS after imports), and a worker's "
                         "runtime before it and the model's frame of it")
    ap.add_argument("--rounds", action="store_true",
                    help="the default (kept for old command lines): the cluster keeps "
                         "summarize's partials on its workers, reduces the summary on one "
                         "and solves the critical path in rounds there")
    ap.add_argument("--gather", action="store_true",
                    help="every host's parts come back to the client and are merged there, "
                         "the critical path as one job graph (TRACELENS_CRITICAL_ROUNDS=0)")
    ap.add_argument("--skip-in-process", action="store_true", help="only the cluster (and --load)")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "engine.json")
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    args.data.mkdir(parents=True, exist_ok=True)
    t = time.perf_counter()
    job = make_job(args.data, args.hosts, args.per_gpu) if args.shape == "synth" else \
        make_ar_job(args.data, args.hosts, args.per_gpu)
    files = sorted(job.glob("*.xplane.pb"))
    sizes = [f.stat().st_size for f in files]
    print(f"job: {job} ({len(files)} files, {sum(sizes) / 1e6:.1f} MB, "
          f"made in {time.perf_counter() - t:.1f} s)", flush=True)
    runs = []
    modes = ([] if args.skip_in_process else ["in-process"]) + [f"cluster-{args.workers}"]
    extra = (["load-all"] if args.load else []) + ([f"maps-{args.maps}"] if args.maps else []) \
        + (["floor", "runtime-floor"] if args.floor else [])
    for mode in modes + extra:
        runs.append(measure(mode, job, args.command, args.gather))
        print(json.dumps({k: v for k, v in runs[-1].items()
                          if k not in ("map_s", "partial_bytes")}), flush=True)
    report = {"workload": f"{args.hosts} hosts × 8 GPUs × {args.per_gpu:,} kernels"
                          + (", an all-reduce every 50 on a second stream, no step markers"
                             if args.shape == "ar50" else ""),
              "command": args.command, "rounds": not args.gather, "files": len(files),
              "file_bytes": sizes,
              "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, Python "
                         f"{platform.python_version()}", "runs": runs}
    args.out.write_text(json.dumps(report, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
