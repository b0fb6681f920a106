"""Benchmark: tracelens's fixed start-up cost (CPU seconds) against the interpreter's floor.

    python benchmarks/bench_startup.py [--rounds 7] [--before DIR] [--no-pyc] [--json]

Each command runs in a fresh process (``run.py``'s launcher: CPU = user + system from
``wait4``, children included) once per round, all commands alternating within a round so that
the machine's load falls on all of them alike; the table gives the median and the minimum CPU
over the rounds. Measured side by side:

- ``python -c pass`` and ``python -c "import polars"``: the floor (no tracelens can start
  faster than the interpreter plus the frame library it is written in);
- ``tracelens --help``;
- ``tracelens summarize`` on tiny real traces (``../shared/traces``): the 6.8 kB Kineto file
  (terminal table and ``--format json``), the 1.6 MB rocprofv3 JSON file, the 110 kB XSpace
  file (which needs protobuf and the HLO decoder);
- with ``--before DIR`` the same tracelens commands with the code of DIR (e.g. a
  ``git worktree add /tmp/before main``, with the C decoder copied to its root).

Bytecode: the imports are timed from ``.pyc`` files, as an installed package has them. The
caches go to a private ``PYTHONPYCACHEPREFIX`` (the checkout is not touched) that a warm-up
round fills. ``--no-pyc`` sets ``PYTHONDONTWRITEBYTECODE=1`` and no prefix: the installed
packages load from their own ``.pyc`` files and the checkout's modules are compiled on every
run (when the checkout has no ``__pycache__``), what this project's checkouts pay.

Prints a Markdown table and writes ``benchmarks/results/startup.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TRACES = ROOT.parent / "shared" / "traces"
KINETO = TRACES / "kineto" / "mi250_rocm62_minitoy_train.json.gz"
ROCPROF = TRACES / "rocprof" / "mi350x_908_results.json.gz"
XSPACE = TRACES / "xprof" / "mi300x_jax08_gemm.xplane.pb"
PY = sys.executable
LAUNCHER = """
import json, os, subprocess, sys, time
t0 = time.perf_counter()
proc = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
_, status, ru = os.wait4(proc.pid, 0)
print(json.dumps({"wall": time.perf_counter() - t0, "cpu": ru.ru_utime + ru.ru_stime,
                  "rss_kb": ru.ru_maxrss, "code": os.waitstatus_to_exitcode(status)}))
"""


def commands() -> dict[str, tuple[list[str], bool]]:
    """name -> (argv, whether it runs tracelens code: those are repeated with ``--before``)."""
    tl = [PY, "-m", "tracelens.cli.commands"]
    out = {"python -c pass (floor)": ([PY, "-c", "pass"], False),
           "python -c 'import polars' (floor)": ([PY, "-c", "import polars"], False),
           "tracelens --help": ([*tl, "--help"], True)}
    for label, path, extra in (("Kineto 6.8 kB", KINETO, []),
                               ("Kineto 6.8 kB, --format json", KINETO, ["--format", "json"]),
                               ("rocprofv3 JSON 1.6 MB", ROCPROF, []),
                               ("XSpace 110 kB", XSPACE, [])):
        if path.exists():
            out[f"summarize {label}"] = ([*tl, "summarize", str(path), *extra], True)
    return out


def once(cmd: list[str], env: dict[str, str], cwd: Path) -> dict[str, float]:
    """One fresh process: wall and CPU seconds, peak RSS (MB)."""
    res = subprocess.run([PY, "-c", LAUNCHER, *cmd], env=env, cwd=cwd, capture_output=True,
                         text=True, check=True)
    got = json.loads(res.stdout)
    if got["code"] != 0:
        raise SystemExit(f"{' '.join(cmd)}: exit {got['code']}")
    return {"wall_s": got["wall"], "cpu_s": got["cpu"], "rss_mb": got["rss_kb"] / 1024}


def env_for(code: Path, cache: Path, no_pyc: bool) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")}
    env["PYTHONPATH"] = str(code)
    if no_pyc:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    else:
        env["PYTHONPYCACHEPREFIX"] = str(cache)
    return env


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--before", type=Path, help="also time the tracelens commands with this code")
    ap.add_argument("--no-pyc", action="store_true", help="compile every module on every run")
    ap.add_argument("--json", type=Path, default=ROOT / "benchmarks" / "results" / "startup.json")
    args = ap.parse_args()
    cmds = commands()
    with tempfile.TemporaryDirectory() as tmp:
        codes = {"": ROOT} | ({" (before)": args.before.resolve()} if args.before else {})
        envs = {tag: env_for(code, Path(tmp) / (tag.strip() or "now"), args.no_pyc)
                for tag, code in codes.items()}
        plan = [(name + tag, cmd, envs[tag], codes[tag]) for name, (cmd, ours) in cmds.items()
                for tag in codes if ours or not tag]
        if not args.no_pyc:  # warm-up: write the .pyc files, and the page cache
            for _, cmd, env, cwd in plan:
                once(cmd, env, cwd)
        runs: dict[str, list[dict[str, float]]] = {name: [] for name, *_ in plan}
        for _ in range(args.rounds):
            for name, cmd, env, cwd in plan:
                runs[name].append(once(cmd, env, cwd))
    rows = {name: {"cpu_median_s": statistics.median(r["cpu_s"] for r in rs),
                   "cpu_min_s": min(r["cpu_s"] for r in rs),
                   "wall_median_s": statistics.median(r["wall_s"] for r in rs),
                   "rss_max_mb": max(r["rss_mb"] for r in rs), "runs": rs}
            for name, rs in runs.items()}
    floor = rows["python -c 'import polars' (floor)"]["cpu_median_s"]
    print(f"{args.rounds} rounds, {'no .pyc' if args.no_pyc else 'from .pyc'}; "
          f"{os.cpu_count()} CPUs, Python {platform.python_version()}\n")
    print("| command | CPU median | CPU min | wall median | peak RSS | CPU − polars import |")
    print("|---|---|---|---|---|---|")
    for name, r in rows.items():
        print(f"| {name} | {r['cpu_median_s']:.2f} s | {r['cpu_min_s']:.2f} s | "
              f"{r['wall_median_s']:.2f} s | {r['rss_max_mb']:.0f} MB | "
              f"{r['cpu_median_s'] - floor:+.2f} s |")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(
        {"machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
         "rounds": args.rounds, "pyc": not args.no_pyc,
         "before": str(args.before) if args.before else None, "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
