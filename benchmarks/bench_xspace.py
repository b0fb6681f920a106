"""XSpace ``summarize`` against its floor and XProf, side by side (issue 26).

    python benchmarks/bench_xspace.py [--per-gpu 250000] [--host-launches] [--rounds 3]
                                      [--data DIR] [--before DIR] [--no-xprof] [--stages]

The input is ``benchmarks/run.py``'s workload 1 generator (8 MI355X GPUs x ``--per-gpu``
kernels, 32 layers, seed 1, HLO metadata), without host launch events unless
``--host-launches`` (the issue's "2M-kernel XSpace without host events"). Every round runs,
each in a fresh process and in turn: the bare upb ``XSpace.ParseFromString`` of the file (the
floor), ``tracelens summarize FILE --format json``, the same with the code of ``--before DIR``
(a ``git worktree`` of an older commit) and XProf's ``kernel_stats`` converter on a fresh
copy (XProf caches its results next to its input). Reported per command: median wall, median
CPU (user + system) and the largest peak RSS (``wait4`` of the process itself), and
tracelens's ratios to each in CPU time. ``--stages`` adds the CPU seconds of the main stages
of one in-process ``summarize`` (``process_time`` around each function). Raw numbers go to
``benchmarks/results/xspace_issue26.json``.
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "benchmarks" / "results" / "xspace_issue26.json"

STAGES = """
import functools, importlib, json, sys, time
T = {}
def wrap(modname, fname):
    try:
        mod = importlib.import_module(modname)
    except ImportError:  # an older checkout without that module
        return
    f = getattr(mod, fname, None)
    if f is None:
        return
    @functools.wraps(f)
    def g(*a, **k):
        t = time.process_time()
        try:
            return f(*a, **k)
        finally:
            T[fname] = round(T.get(fname, 0.0) + time.process_time() - t, 3)
    setattr(mod, fname, g)
t0 = time.process_time()
import tracelens.cli.commands as cli
import tracelens.analyze.summary.build
T["imports"] = round(time.process_time() - t0, 3)
for m, fs in [("tracelens.loading.reading", ["read_all"]),
              ("tracelens.loading.loader", ["load_host", "_classify", "_costs", "_steps"]),
              ("tracelens.analyze.summary.build", ["summary_partial", "_device_rows", "_idle",
                                             "device_and_step_breakdowns", "mfu",
                                             "device_mfu", "partial_activities",
                                             "device_axis", "reduce_summary", "roofline",
                                             "roofline_frame", "_kernel_groups",
                                             "_roofline_mix", "without_flops",
                                             "flops_coverage"]),
              ("tracelens.analyze.compute.kernel_table", ["kernel_table", "roofline_of"])]:
    for f in fs:
        wrap(m, f)
sys.argv = ["tracelens", "summarize", sys.argv[1], "--format", "json"]
try:
    cli.main()
except SystemExit:
    pass
T["total"] = round(time.process_time() - t0, 3)
print(json.dumps(T), file=sys.stderr)
"""


@functools.cache
def _run_py() -> Any:
    spec = importlib.util.spec_from_file_location("bench_run", ROOT / "benchmarks" / "run.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["bench_run"] = mod  # its dataclasses look their module up
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


def make_input(data: Path, per_gpu: int, host_launches: bool) -> Path:
    """Workload 1's scenario, with or without the host launch events."""
    from dataclasses import replace

    from tracelens_dev.synth import Scenario, build, scaled
    from tracelens_dev.writers.xspace import write

    path = data / f"xspace_8gpu_{per_gpu}{'_host' if host_launches else ''}.xplane.pb"
    if not path.exists():
        sc = replace(scaled(Scenario(device="mi355x", gpus=8, layers=32, seed=1), per_gpu),
                     host_launches=host_launches)
        write(build(sc, truth=False).trace, path)
    return path


def stage_times(path: Path, code: Path) -> dict[str, float]:
    env = _env(code)
    res = subprocess.run([sys.executable, "-c", STAGES, str(path)], capture_output=True,
                         text=True, cwd=code, env=env, check=False)
    return json.loads(res.stderr.strip().splitlines()[-1])


def _commit(code: Path) -> str:
    """The checkout's commit (``unknown`` outside git, e.g. a ``git archive``)."""
    res = subprocess.run(["git", "rev-parse", "HEAD"], cwd=code, capture_output=True,
                         text=True, check=False)
    return res.stdout.strip() or "unknown"


def _env(code: Path) -> dict[str, str]:
    """``run.bench_env``: the code of ``code``, from bytecode compiled once."""
    return _run_py().bench_env(code)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--per-gpu", type=int, default=250_000)
    ap.add_argument("--host-launches", action="store_true")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--data", type=Path, default=None)
    ap.add_argument("--before", type=Path, default=None)
    ap.add_argument("--no-xprof", action="store_true")
    ap.add_argument("--stages", action="store_true")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    run = _run_py()
    data = args.data or Path(tempfile.mkdtemp(prefix="tracelens_bench_xspace_"))
    data.mkdir(parents=True, exist_ok=True)
    path = make_input(data, args.per_gpu, args.host_launches)
    py = sys.executable
    cmds: dict[str, tuple[list[str], Path, Any]] = {
        "floor": ([py, "-c", run.FLOOR_XSPACE, str(path)], ROOT, None),
        "tracelens": ([py, "-m", "tracelens.cli", "summarize", str(path), "--format", "json"],
                      ROOT, None)}
    if args.before is not None:
        cmds["before"] = (cmds["tracelens"][0], args.before.resolve(), None)
    if not args.no_xprof:
        copies = Path(tempfile.mkdtemp(prefix="tracelens_xprof_", dir=data))

        def fresh() -> list[str]:
            d = Path(tempfile.mkdtemp(dir=copies))
            target = d / path.name
            target.hardlink_to(path)
            return [str(target), "kernel_stats"]
        cmds["xprof_kernel_stats"] = ([py, "-c", run.XPROF_TOOL], ROOT, fresh)
    runs: dict[str, dict[str, list[float]]] = {k: {"wall": [], "cpu": [], "rss_mb": []}
                                               for k in cmds}
    for i in range(args.rounds):
        for name, (cmd, cwd, setup) in cmds.items():
            r = run.measure(f"{name} (round {i + 1})", cmd, 1, _env(cwd), cwd=cwd,
                            setup=setup)
            if r.error:
                raise SystemExit(f"{name}: {r.error}")
            for k, v in (("wall", r.wall), ("cpu", r.cpu), ("rss_mb", r.rss_mb)):
                runs[name][k] += v
    stages = {}
    if args.stages:
        stages["after"] = stage_times(path, ROOT)
        if args.before is not None:
            stages["before"] = stage_times(path, args.before.resolve())
    size = path.stat().st_size / 1e6
    result = {"input": str(path), "input_mb": round(size, 1), "rounds": args.rounds,
              "runs": runs, "stages": stages, "commit": _commit(ROOT),
              "before_commit": _commit(args.before) if args.before else None}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(render(result))


def render(result: dict[str, Any]) -> str:
    runs = result["runs"]
    med = {k: (statistics.median(v["wall"]), statistics.median(v["cpu"]), max(v["rss_mb"]))
           for k, v in runs.items()}
    tl = med["tracelens"][1]
    lines = [f"Input: {result['input_mb']} MB ({Path(result['input']).name}), "
             f"{result['rounds']} alternating rounds.", "",
             "| command | median wall | median CPU | peak RSS | tracelens CPU ÷ this |",
             "|---|---|---|---|---|"]
    for k, (w, c, m) in med.items():
        lines.append(f"| {k} | {w:.2f} s | {c:.2f} s | {m:.0f} MB | {tl / c:.2f}× |")
    for side, st in result.get("stages", {}).items():
        lines.append("")
        lines.append(f"Stages ({side}), CPU s: " + ", ".join(f"{k} {v}" for k, v in st.items()))
    return "\n".join(lines)


if __name__ == "__main__":
    main()
