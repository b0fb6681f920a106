"""Where the client's memory goes in the reduce of a many-host ``summarize`` (issue 26).

    python benchmarks/bench_reduce.py [--hosts 64] [--data DIR] [--conf JEMALLOC_OPTIONS]

Maps every host file of ``bench_engine.py``'s job (generated there; ``--data`` as there) in
one process and saves the partials (once, beside the job: ``partials.pkl``), then runs the
reduce alone in a fresh process, ``tracelens summarize --workers 1`` with the map replaced by
the saved partials, and prints the RSS before and after each reduce stage (and the peak so
far): the merge of the hosts' summary parts, the collectives and per-axis totals, the
critical path's merge and solve, the JSON. ``--conf``: polars' allocator options
(``_RJEM_MALLOC_CONF``) for that process, e.g. ``dirty_decay_ms:0`` to see what is live
rather than what the allocator keeps. The map's own process is not measured.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

DUMP = r"""
import pickle, sys
import tracelens.cli.commands, tracelens.engine.hosts as engine
out = sys.argv[2]

def saved(hosts, args):
    with open(out, "wb") as f:
        pickle.dump(hosts, f, protocol=5)
    raise SystemExit(0)

engine.reduce_hosts = saved
sys.argv = ["tracelens", "summarize", sys.argv[1], "--workers", "1", "--format", "json"]
tracelens.cli.commands.main()
"""

REDUCE = r"""
import importlib, pickle, sys, time
import distributed  # what a client of the engine imports

def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 >> 20

def hwm():
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) >> 10 for l in f if l.startswith("VmHWM"))

rows = []

def timed(module, name):
    obj = importlib.import_module(module)
    *owners, attr = name.split(".")
    for o in owners:
        obj = getattr(obj, o)
    fn = getattr(obj, attr)

    def wrapper(*args, **kwargs):  # (holds its arguments, so finish itself is not wrapped)
        before, cpu = rss(), time.process_time()
        try:
            return fn(*args, **kwargs)
        finally:
            rows.append((name, before, rss(), hwm(), time.process_time() - cpu))
    setattr(obj, attr, wrapper)

import tracelens.cli.commands, tracelens.engine.hosts as engine
print(f"imports: rss {rss()} MB")
with open(sys.argv[2], "rb") as f:
    hosts = pickle.load(f)
print(f"{len(hosts)} hosts' partials loaded: rss {rss()} MB")
calls = []

def saved_map(fn, items, *args, **kwargs):
    # the saved partials stand for the one map; a job read again (hosts aligned on
    # collective ends, not the wall clock) would need its second map measured too
    calls.append(len(items))
    if len(calls) > 1:
        sys.exit("bench_reduce: the reduce asked for a second map; this job cannot be replayed")
    return hosts

engine.run_map = saved_map
for module, name in [("tracelens.analyze.summary.build", "SummaryAnalysis.merge"),
                     ("tracelens.analyze.communication.collectives", "collectives_from_activities"),
                     ("tracelens.analyze.communication.axes", "axis_totals"),
                     ("tracelens.analyze.summary.reduce", "reduce_summary"),
                     ("tracelens.analyze.summary.build", "CriticalPieces.merged"),
                     ("tracelens.analyze.critical.path", "CriticalPath.finish"),
                     ("reports.summary", "render_json")]:
    timed(module, name)
sys.argv = ["tracelens", "summarize", sys.argv[1], "--workers", "1", "--format", "json"]
out, sys.stdout = sys.stdout, open("/dev/null", "w")
try:
    tracelens.cli.commands.main()
except SystemExit:
    pass
sys.stdout = out
for name, before, after, peak, cpu in rows:
    print(f"{name:32s} rss {before:5d} -> {after:5d} MB  peak so far {peak:5d} MB  cpu {cpu:.2f} s")
print(f"peak {hwm()} MB, cpu {time.process_time():.2f} s")
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hosts", type=int, default=64)
    ap.add_argument("--per-gpu", type=int, default=20_000)
    ap.add_argument("--data", type=Path, default=Path("/tmp/tracelens-bench-engine"))
    ap.add_argument("--conf", default=None, help="_RJEM_MALLOC_CONF for the reduce's process")
    args = ap.parse_args()
    job = args.data / f"engine_{args.hosts}x8_{args.per_gpu}"
    if not job.is_dir():
        sys.exit(f"{job}: no such job; generate it with benchmarks/bench_engine.py "
                 f"--hosts {args.hosts} --per-gpu {args.per_gpu} --data {args.data}")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    saved = job.parent / f"{job.name}.partials.pkl"
    if not saved.exists():
        subprocess.run([sys.executable, "-c", DUMP, str(job), str(saved)], check=True,
                       cwd=ROOT, env=env)
    if args.conf is not None:
        env["_RJEM_MALLOC_CONF"] = args.conf
    subprocess.run([sys.executable, "-c", REDUCE, str(job), str(saved)], check=True, cwd=ROOT,
                   env=env)


if __name__ == "__main__":
    main()
