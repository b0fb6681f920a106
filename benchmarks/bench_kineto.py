"""Benchmark: ``tracelens summarize`` on Kineto JSON against HTA and a bare ``orjson.loads``.

    python benchmarks/bench_kineto.py [--hta-python /work/venv-hta/bin/python] [--copies 16]
                                      [--repeat 1] [--before DIR]

Inputs: the largest real Kineto trace in ``../shared/traces/kineto`` (xDiT FLUX.1 on MI300X,
63 MB of JSON), the A100 NCCL trace, and a synthetic large file (not committed; cached in the
temp directory): the A100 trace's events repeated ``--copies`` times end to end (timestamps
shifted by the trace's span, correlation and External ids offset), written uncompressed.
Each tool runs in a fresh process under ``/usr/bin/time`` (wall and CPU seconds, peak RSS;
sizes in decimal MB, RSS as well, so RSS / JSON is a plain ratio):

- ``tracelens``: ``python -m tracelens.cli.commands summarize FILE --format json`` end to end;
- ``hta``: HTA's ``TraceAnalysis(trace_dir=...)`` load plus ``get_temporal_breakdown`` in its
  own virtual environment (``pip install HolisticTraceAnalysis``);
- ``floor``: read, gunzip and ``orjson.loads`` the document, nothing else;
- ``floor_nogc``: the same with the garbage collector off (what a reader that pauses it
  during its bulk decode can reach: the collector scans the growing document again and again);
- ``before`` (with ``--before DIR``, a checkout of an earlier commit): its ``summarize``,
  in the same run, so a change is measured against the same load.

Each round runs every tool once, in turn, so a change of load hits all of them alike.
- ``startup`` (once): importing what ``summarize`` imports, no input: the fixed cost.
- ``--stages N``: N rounds of the reader alone on the synthetic file, stage by stage (CPU
  seconds of its main functions in one process), this tree and ``--before`` alternating.

Prints a table and writes ``benchmarks/results/kineto.json`` (medians, and every round's
numbers under ``runs``).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parent.parent
KINETO = ROOT.parent / "shared" / "traces" / "kineto"
FLOOR = ("import gzip, sys, orjson\nraw = open(sys.argv[1], 'rb').read()\n"
         "raw = gzip.decompress(raw) if raw[:2] == b'\\x1f\\x8b' else raw\n"
         "assert orjson.loads(raw)['traceEvents']\n")
FLOOR_NOGC = "import gc\ngc.disable()\n" + FLOOR
STARTUP = ("import tracelens.loading.loader, tracelens.analyze.summary.build, reports.summary, "
           "parsers.kineto.reader")
# the reader's stages in one process: CPU seconds (getrusage, polars' threads included) of
# each function, by name where the tree has it (stages nest: "chunk frames" includes the
# selection, "columns" the chunk decode and frames, "build" the link); printed as JSON
STAGES = """
import functools, json, resource, sys
from pathlib import Path
import parsers.kineto.reader as r, parsers.kineto.typed as ty
def cpu():
    u = resource.getrusage(resource.RUSAGE_SELF)
    return u.ru_utime + u.ru_stime
acc = {}
def add(label, t):
    acc[label] = acc.get(label, 0.0) + cpu() - t
def wrap(mod, name, label):
    if not hasattr(mod, name):
        return
    f = getattr(mod, name)
    @functools.wraps(f)
    def g(*a, **k):
        t = cpu()
        try:
            return f(*a, **k)
        finally:
            add(label, t)
    setattr(mod, name, g)
class Timed:
    def __init__(self, dec):
        self.dec = dec
    def decode(self, b):
        t = cpu()
        try:
            return self.dec.decode(b)
        finally:
            add("chunk decode", t)
for name in ("_EVENTS", "_QUIET_EVENTS"):
    if hasattr(ty, name):
        setattr(ty, name, Timed(getattr(ty, name)))
for mod, name, label in ((r, "read_maybe_gzip", "read file"), (ty, "decode", "split events"),
                         (r, "_select_typed", "selection + field lists"),
                         (r, "_chunk_frame", "chunk frames"), (r, "columns", "columns"),
                         (r, "link_activity", "link"), (r, "_build", "build")):
    wrap(mod, name, label)
t = cpu()
r.read(Path(sys.argv[1]))
acc["reader"] = cpu() - t
acc["peak RSS MB"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e6
print(json.dumps(acc))
"""
HTA = ("import sys, logging\nlogging.disable(logging.CRITICAL)\n"
       "from hta.trace_analysis import TraceAnalysis\n"
       "ta = TraceAnalysis(trace_dir=sys.argv[1])\n"
       "print(ta.get_temporal_breakdown(visualize=False).to_json())\n")


def synthetic(src: Path, copies: int) -> Path:
    """``src``'s events ``copies`` times, end to end, as one uncompressed JSON file."""
    out = Path(tempfile.gettempdir()) / f"tracelens_bench_kineto_{src.name.split('.')[0]}" \
        f"_x{copies}.json"
    if out.exists():
        return out
    doc = orjson.loads(gzip.decompress(src.read_bytes()))
    evs = doc["traceEvents"]
    timed = [e for e in evs if isinstance(e.get("ts"), (int, float))]
    t0 = min(e["ts"] for e in timed)
    span = max(e["ts"] + e.get("dur", 0) for e in timed) - t0 + 1000.0
    ids = max([e.get("args", {}).get("correlation", 0) for e in evs] +
              [e.get("args", {}).get("External id", 0) for e in evs] +
              [e.get("id", 0) if isinstance(e.get("id"), int) else 0 for e in evs]) + 1
    new = []
    for k in range(copies):
        for e in evs:
            if e.get("ph") == "M" and k:
                continue
            e2 = dict(e)
            if isinstance(e2.get("ts"), (int, float)):
                e2["ts"] = round(e2["ts"] + k * span, 3)
            if isinstance(e2.get("id"), int):
                e2["id"] = e2["id"] + k * ids
            a = e2.get("args")
            if isinstance(a, dict):
                a = dict(a)
                for key in ("correlation", "External id"):
                    if isinstance(a.get(key), int):
                        a[key] = a[key] + k * ids
                if isinstance(e2.get("name"), str) and e2["name"].startswith("ProfilerStep#"):
                    e2["name"] = f"ProfilerStep#{k * 1000 + int(e2['name'][13:])}"
                e2["args"] = a
            new.append(e2)
    doc["traceEvents"] = new
    out.write_bytes(orjson.dumps(doc))
    return out


def timed(cmd: list[str], cwd: Path | None = None, env: dict | None = None) -> dict:
    """Wall and CPU (user + system) seconds and peak RSS (MB, 10^6 bytes) of one fresh
    process (``/usr/bin/time``)."""
    with tempfile.NamedTemporaryFile("r", suffix=".time") as tf:
        res = subprocess.run(["/usr/bin/time", "-f", "%e %U %S %M", "-o", tf.name, *cmd],
                             cwd=cwd, env=env, capture_output=True, text=True)
        wall, user, system, rss = tf.read().strip().splitlines()[-1].split()
    out = {"wall_s": float(wall), "cpu_s": round(float(user) + float(system), 2),
           "rss_mb": int(rss) * 1024 / 1e6, "ok": res.returncode == 0}
    if res.returncode:
        out["error"] = (res.stderr.strip().splitlines() or ["?"])[-1][:200]
    return out


def run(path: Path, hta_python: str | None, repeat: int, before: Path | None = None) -> dict:
    size = len(gzip.decompress(path.read_bytes())) if path.name.endswith(".gz") \
        else path.stat().st_size
    row: dict = {"file": path.name, "json_mb": size / 1e6}
    summarize = [sys.executable, "-m", "tracelens.cli.commands", "summarize", str(path), "--format",
                 "json"]
    cmds = {"tracelens": (summarize, ROOT), "floor": ([sys.executable, "-c", FLOOR, str(path)],
                                                      ROOT),
            "floor_nogc": ([sys.executable, "-c", FLOOR_NOGC, str(path)], ROOT)}
    if before:
        cmds["before"] = (summarize, before)
    with tempfile.TemporaryDirectory() as d:
        (Path(d) / path.name).symlink_to(path.resolve())
        if hta_python:
            cmds["hta"] = ([hta_python, "-c", HTA, d], ROOT)
        runs: dict[str, list[dict]] = {name: [] for name in cmds}
        for _ in range(repeat):  # in turn: a change of load hits every tool alike
            for name, (cmd, tree) in cmds.items():
                env = {**os.environ, "PYTHONPATH": str(tree)}
                runs[name].append(timed(cmd, cwd=Path(d), env=env))
        for name, got in runs.items():
            best = dict(min(got, key=lambda r: r["wall_s"]))
            for key in ("wall_s", "cpu_s", "rss_mb"):
                best[key] = statistics.median(r[key] for r in got)
            best["runs"] = [{k: r[k] for k in ("wall_s", "cpu_s", "rss_mb")} for r in got]
            row[name] = best
    return row


def stages(path: Path, rounds: int, before: Path | None) -> dict:
    """The reader's stage CPU seconds on ``path``, this tree and ``before`` alternating in
    fresh processes; per tree, every round's numbers and their medians."""
    trees = {"after": ROOT, **({"before": before} if before else {})}
    got: dict[str, list[dict]] = {name: [] for name in trees}
    for _ in range(rounds):
        for name, tree in trees.items():
            res = subprocess.run([sys.executable, "-c", STAGES, str(path)], cwd=tree,
                                 env={**os.environ, "PYTHONPATH": str(tree)},
                                 capture_output=True, text=True, check=True)
            got[name].append(json.loads(res.stdout.strip().splitlines()[-1]))
    out = {}
    for name, runs in got.items():
        out[name] = {"median": {k: round(statistics.median(r[k] for r in runs), 3)
                                for k in runs[0]}, "runs": runs}
        print(f"stages ({name}): " + ", ".join(f"{k} {v:.3f}"
                                                 for k, v in out[name]["median"].items()))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hta-python", default="/work/venv-hta/bin/python")
    ap.add_argument("--copies", type=int, default=16)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--before", type=Path, default=None,
                    help="a checkout of an earlier commit, run in the same rounds")
    ap.add_argument("--only", default=None, help="only the inputs whose name contains this")
    ap.add_argument("--stages", type=int, default=0, metavar="N",
                    help="also N rounds of the reader's stages on the synthetic file")
    args = ap.parse_args()
    hta = args.hta_python if Path(args.hta_python).exists() else None
    inputs = [KINETO / "mi300x_inference" / "xdit_flux1_aiter_sage_rank0.json.gz",
              KINETO / "a100_nccl_2rank_rank0.json.gz"]
    inputs.append(synthetic(inputs[1], args.copies))
    inputs = [p for p in inputs if args.only is None or args.only in p.name]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    startup = [timed([sys.executable, "-c", STARTUP], env=env) for _ in range(args.repeat)]
    start = {k: statistics.median(r[k] for r in startup) for k in ("wall_s", "cpu_s", "rss_mb")}
    print(f"startup (imports only): {start['wall_s']:.2f} s wall, {start['cpu_s']:.2f} s CPU, "
          f"{start['rss_mb']:.0f} MB")
    rows = [run(p, hta, args.repeat, args.before) for p in inputs]
    for r in rows:
        t, f = r["tracelens"], r["floor"]
        h = r.get("hta", {})
        print(f"{r['file']}: {r['json_mb']:.1f} MB JSON | tracelens {t['wall_s']:.2f} s "
              f"({t['cpu_s']:.2f} CPU) {t['rss_mb']:.0f} MB | floor {f['wall_s']:.2f} s "
              f"({f['cpu_s']:.2f} CPU) {f['rss_mb']:.0f} MB | HTA "
              + (f"{h['wall_s']:.2f} s ({h['cpu_s']:.2f} CPU) {h['rss_mb']:.0f} MB"
                 if h.get("ok") else
                 f"failed ({h.get('error', 'not run')})")
              + f" | vs floor {t['wall_s'] / f['wall_s']:.2f}x, RSS/JSON "
              f"{t['rss_mb'] / r['json_mb']:.2f}x"
              + (f", HTA/tracelens {h['wall_s'] / t['wall_s']:.1f}x" if h.get("ok") else ""))
        g = r["floor_nogc"]
        print(f"    CPU s: tracelens {t['cpu_s']:.2f}, floor {f['cpu_s']:.2f}, floor without gc "
              f"{g['cpu_s']:.2f}" + (f", HTA {h['cpu_s']:.2f} (HTA/tracelens "
                                     f"{h['cpu_s'] / t['cpu_s']:.1f}x)" if h.get("ok") else "")
              + (f", before {r['before']['cpu_s']:.2f} ({r['before']['rss_mb']:.0f} MB)"
                 if "before" in r else ""))
    out = {"machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
           "repeat": args.repeat, "before": str(args.before) if args.before else None,
           "startup": start, "rows": rows}
    if args.stages:
        out["stages"] = stages(synthetic(KINETO / "a100_nccl_2rank_rank0.json.gz", args.copies),
                               args.stages, args.before)
    (ROOT / "benchmarks" / "results" / "kineto.json").write_text(json.dumps(out, indent=1)
                                                                 + "\n")


if __name__ == "__main__":
    main()
