"""tracelens benchmarks: the five workloads of issue 8 against their floors and peers.

    python benchmarks/run.py [--quick] [--repeat N] [--only 1,4] [--data DIR] [--before DIR]
                             [--out benchmarks/RESULTS.md]

Generates the workloads with fixed seeds (into a temporary directory, or ``--data DIR`` to keep
and reuse them), runs every measurement in a fresh process ``--repeat`` times, and writes the
tables into ``benchmarks/RESULTS.md`` (between the ``results`` markers; the notes around them
are kept) and the raw numbers into ``benchmarks/results/run.json``. See benchmarks/README.md.

Workloads (``--quick`` divides every size by about ten):

1. XSpace, 8 GPUs x 250k kernels with host launch events and HLO metadata:
   ``tracelens summarize --format json`` vs the bare ``XSpace.ParseFromString`` (floor) and
   XProf's ``kernel_stats`` and ``hlo_stats`` converters (each on a fresh copy: XProf caches
   its results next to the input).
2. rocpd SQLite, 2M dispatches (``benchmarks/bench_rocpd.py``'s database): ``summarize`` vs a
   bare ``SELECT`` of the dispatch rows into polars.
3. rocprofv3 JSON, 1M dispatches: ``summarize`` vs bare ``json.loads`` (and ``orjson.loads``
   when installed).
4. XProf log directory, 16 hosts x 8 GPUs x 50k kernels: ``summarize``; CPU time / wall time
   shows whether both cores work.
5. ``tracelens report`` (HTML) on workload 1.

Peak RSS is the measured process's own (``wait4``), CPU time its user + system time including
its child processes. ``--before DIR`` also times the tracelens commands with the code in DIR
(e.g. a ``git worktree`` of an older commit) and keeps them in ``results/before.json``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parent.parent
RESULTS_MD = ROOT / "benchmarks" / "RESULTS.md"
RESULTS_DIR = ROOT / "benchmarks" / "results"
START, END = "<!-- results:start -->", "<!-- results:end -->"
PY = sys.executable

FLOOR_XSPACE = """
import sys
from parsers.xplane_schema import xspace_class
raw = open(sys.argv[1], "rb").read()
xspace_class()().ParseFromString(raw)
"""
XPROF_TOOL = """
import sys
from xprof.convert.raw_to_tool_data import xspace_to_tool_data
data, _ = xspace_to_tool_data([sys.argv[1]], sys.argv[2], {})
assert data, "xprof returned nothing"
"""
JSON_LOAD = """
import sys, {mod}
with open(sys.argv[1], "rb") as fh:
    doc = {mod}.loads(fh.read())
assert doc
"""

SIZES = {  # full, --quick, --smoke (the test suite's run)
    "w1_per_gpu": (250_000, 25_000, 1_000),
    "w2_dispatches": (2_000_000, 200_000, 8_000),
    "w3_dispatches": (1_000_000, 100_000, 4_000),
    "w4_hosts": (16, 4, 2),
    "w4_per_gpu": (50_000, 5_000, 500),
}


@dataclass
class Run:
    """The runs of one measured command."""

    name: str
    cmd: list[str]
    wall: list[float] = field(default_factory=list)
    rss_mb: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    error: str | None = None

    @property
    def median(self) -> float | None:
        return statistics.median(self.wall) if self.wall else None

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "cmd": self.cmd, "wall_s": self.wall, "rss_mb": self.rss_mb,
                "cpu_s": self.cpu, "median_s": self.median, "error": self.error}


# Runs one command and reports its wall time and rusage. A small process of its own: a child
# forked from this (large) runner would start with the runner's peak RSS as its own.
LAUNCHER = """
import json, os, subprocess, sys, time
t0 = time.perf_counter()
proc = subprocess.Popen(sys.argv[2:], stdout=subprocess.DEVNULL)
_, status, ru = os.wait4(proc.pid, 0)
wall = time.perf_counter() - t0
with open(sys.argv[1], "w") as fh:
    json.dump({"wall": wall, "rss_kb": ru.ru_maxrss, "cpu": ru.ru_utime + ru.ru_stime,
               "code": os.waitstatus_to_exitcode(status)}, fh)
"""


def measure(name: str, cmd: list[str], repeat: int, env: dict[str, str] | None = None,
            cwd: Path = ROOT, setup: Callable[[], list[str]] | None = None) -> Run:
    """Run ``cmd`` ``repeat`` times in a fresh process: wall time, the process's peak RSS and
    CPU time (user + system, its own children included). ``setup`` runs before each run and
    returns extra arguments."""
    run = Run(name, cmd)
    for _ in range(repeat):
        args = cmd + (setup() if setup else [])
        with tempfile.TemporaryFile() as err, tempfile.NamedTemporaryFile(suffix=".json") as rep:
            subprocess.run([PY, "-c", LAUNCHER, rep.name, *args], stderr=err, cwd=cwd, env=env,
                           check=False)
            try:
                got = json.loads(Path(rep.name).read_text() or "{}")
            except ValueError:
                got = {}
            if got.get("code") != 0:
                err.seek(0)
                last = err.read().decode(errors="replace").strip().splitlines()[-1:]
                run.error = f"exit {got.get('code')}: {(last or [''])[0][:300]}"
                print(f"  {name}: FAILED ({run.error})", flush=True)
                return run
        run.wall.append(round(got["wall"], 3))
        run.rss_mb.append(round(got["rss_kb"] / 1024, 1))
        run.cpu.append(round(got["cpu"], 3))
    print(f"  {name}: median {run.median:.2f} s  peak RSS {max(run.rss_mb):.0f} MB  "
          f"runs {run.wall}", flush=True)
    return run


def bench_env(code_dir: Path | None = None) -> dict[str, str]:
    """The environment of a timed command running the code of ``code_dir`` (None: this
    checkout, the commands' working directory), with bytecode as an installed package has
    it. A checkout without ``__pycache__`` (``PYTHONDONTWRITEBYTECODE``, as this project's
    machines set it) compiles every module on every run: 0.6 s of a 2M-kernel ``summarize``
    that ``pip install`` users never pay, while the peers' installed packages load ``.pyc``.
    The code's modules are compiled once, into its (git-ignored) ``__pycache__`` folders: a
    ``PYTHONPYCACHEPREFIX`` would also move the interpreter's and the peers' caches, and
    their first measured run would compile them. Python checks each ``.pyc`` against its
    source."""
    code = (code_dir or ROOT).resolve()
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")}
    if code_dir is not None:
        env["PYTHONPATH"] = str(code)
    if code not in _COMPILED:
        dirs = [str(code / d) for d in ("tracelens", "parsers", "reports") if (code / d).is_dir()]
        subprocess.run([PY, "-m", "compileall", "-q", *dirs], env=env, cwd=code, check=True,
                       stdout=subprocess.DEVNULL)
        _COMPILED.add(code)
    return env


_COMPILED: set[Path] = set()


def tracelens_cmd(*args: str) -> list[str]:
    return [PY, "-m", "tracelens.cli.commands", *args]


def _bench_rocpd() -> Any:
    """The rocpd benchmark module (its synthetic database and floor), or None."""
    path = ROOT / "benchmarks" / "bench_rocpd.py"
    if not path.exists():
        return None
    spec = importlib.util.spec_from_file_location("bench_rocpd", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


# ---------------------------------------------------------------------------------------------
# Workloads
# ---------------------------------------------------------------------------------------------

def make_w1(data: Path, per_gpu: int) -> Path:
    """8 GPUs x ``per_gpu`` kernels with host launch events and HLO metadata (seed 1)."""
    from dataclasses import replace

    from tracelens_dev.writers.xspace import write
    from tracelens_dev.synth import Scenario, build, scaled

    path = data / f"w1_8gpu_{per_gpu}.xplane.pb"
    if not path.exists():
        sc = replace(scaled(Scenario(device="mi355x", gpus=8, layers=32, seed=1), per_gpu),
                     host_launches=True)
        write(build(sc, truth=False).trace, path)
    return path


def make_w4(data: Path, hosts: int, per_gpu: int) -> Path:
    """An XProf log directory: ``hosts`` x 8 GPUs x ``per_gpu`` kernels (seed 4)."""
    from tracelens_dev.writers.xspace import write
    from tracelens_dev.synth import Scenario, build, scaled

    root = data / f"w4_{hosts}x8_{per_gpu}"
    run_dir = root / "plugins" / "profile" / "bench"
    if not run_dir.exists():
        sc = scaled(Scenario(device="mi355x", hosts=hosts, gpus=8, layers=32, seed=4), per_gpu)
        write(build(sc, truth=False).trace, root, layout="logdir", run="bench")
    return run_dir


def make_w2(data: Path, dispatches: int, bench: Any) -> Path:
    path = data / f"w2_rocpd_{dispatches}_results.db"
    if not path.exists():
        bench.build(path, dispatches)
    return path


def make_w3(data: Path, dispatches: int, bench: Any) -> Path:
    from tracelens_dev.writers.rocprof import write_json

    path = data / f"w3_rocprof_{dispatches}_results.json"
    if not path.exists():
        write_json(bench.synthetic_trace(dispatches), path)
    return path


def _size_mb(path: Path) -> float:
    files = [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()]
    return round(sum(p.stat().st_size for p in files) / 2**20, 1)


# ---------------------------------------------------------------------------------------------
# Measurements
# ---------------------------------------------------------------------------------------------

def run_w1(path: Path, repeat: int, before: Path | None) -> dict[str, Any]:
    runs = {"tracelens": measure("summarize --format json", tracelens_cmd(
        "summarize", str(path), "--format", "json"), repeat, bench_env())}
    runs["floor"] = measure("bare ParseFromString (floor)", [PY, "-c", FLOOR_XSPACE, str(path)],
                            repeat, bench_env())
    for tool in ("kernel_stats", "hlo_stats"):
        copies = Path(tempfile.mkdtemp(prefix=f"tracelens_xprof_{tool}_"))

        def fresh_copy(tool: str = tool, copies: Path = copies) -> list[str]:
            d = Path(tempfile.mkdtemp(dir=copies))  # XProf writes its cache beside the input
            target = d / path.name
            os.link(path, target) if _same_fs(path, d) else shutil.copy(path, target)
            return [str(target), tool]

        runs[f"xprof_{tool}"] = measure(f"XProf {tool} (fresh copy)", [PY, "-c", XPROF_TOOL],
                                        repeat, bench_env(), setup=fresh_copy)
        shutil.rmtree(copies, ignore_errors=True)
    if before is not None:
        runs["before"] = measure("summarize, before", tracelens_cmd(
            "summarize", str(path), "--format", "json"), 1, bench_env(before), cwd=before)
    return {"input": str(path), "input_mb": _size_mb(path), "runs": runs}


def _same_fs(a: Path, b: Path) -> bool:
    return os.stat(a).st_dev == os.stat(b).st_dev


def run_w2(path: Path, repeat: int, bench: Any, before: Path | None) -> dict[str, Any]:
    args = ["summarize", str(path), "--format", "json", "--step-marker", bench.STEP_MARKER]
    runs = {"tracelens": measure("summarize --format json", tracelens_cmd(*args), repeat,
                                 bench_env())}
    runs["floor"] = measure("bare SELECT into polars (floor)", [PY, "-c", bench.FLOOR,
                                                                str(path)], repeat, bench_env())
    if before is not None:
        runs["before"] = measure("summarize, before", tracelens_cmd(*args), 1, bench_env(before),
                                 cwd=before)
    return {"input": str(path), "input_mb": _size_mb(path), "runs": runs}


def run_w3(path: Path, repeat: int, bench: Any, before: Path | None) -> dict[str, Any]:
    args = ["summarize", str(path), "--format", "json", "--step-marker", bench.STEP_MARKER]
    runs = {"tracelens": measure("summarize --format json", tracelens_cmd(*args), repeat,
                                 bench_env())}
    runs["floor"] = measure("bare json.loads (floor)", [PY, "-c", JSON_LOAD.format(mod="json"),
                                                         str(path)], repeat, bench_env())
    if importlib.util.find_spec("orjson") is not None:
        runs["orjson"] = measure("bare orjson.loads", [PY, "-c", JSON_LOAD.format(mod="orjson"),
                                                       str(path)], repeat, bench_env())
    if before is not None:
        runs["before"] = measure("summarize, before", tracelens_cmd(*args), 1, bench_env(before),
                                 cwd=before)
    return {"input": str(path), "input_mb": _size_mb(path), "runs": runs}


def run_w4(path: Path, repeat: int, before: Path | None) -> dict[str, Any]:
    cmd = tracelens_cmd("summarize", str(path), "--format", "json")
    runs = {"tracelens": measure("summarize --format json", cmd, repeat, bench_env())}
    one = bench_env()
    one["TRACELENS_WORKERS"] = "1"
    runs["one_worker"] = measure("summarize, files read one at a time", cmd, repeat, one)
    if before is not None:
        runs["before"] = measure("summarize, before", cmd, 1, bench_env(before), cwd=before)
    return {"input": str(path), "input_mb": _size_mb(path), "runs": runs,
            "files": len(list(path.glob("*.xplane.pb*")))}


def run_w5(path: Path, repeat: int, scratch: Path, before: Path | None) -> dict[str, Any]:
    out = scratch / "report.html"
    runs = {"tracelens": measure("report -o report.html", tracelens_cmd(
        "report", str(path), "-o", str(out), "--quiet"), repeat, bench_env())}
    if before is not None:
        runs["before"] = measure("report, before", tracelens_cmd(
            "report", str(path), "-o", str(out), "--quiet"), 1, bench_env(before), cwd=before)
    return {"input": str(path), "input_mb": _size_mb(path), "runs": runs}


STAGES = """
import json, sys, time
from pathlib import Path
t0 = time.perf_counter()
from parsers import xspace as xspace_reader
from tracelens.analyze.summary.build import summarize
from tracelens.classify import classify
from tracelens.cost.events import annotate, op_cost_table, with_hlo_kind
from tracelens.loading.loader import combine
from tracelens.core.model import validate
from tracelens.loading.prepare import assign_steps, clip_stream_overlaps
out, t = {"import": time.perf_counter() - t0}, time.perf_counter()
def lap(name):
    global t
    now = time.perf_counter(); out[name] = round(now - t, 3); t = now
try:  # code of issue 26 and later identifies devices after the reader (tracelens.loading.reading)
    from tracelens.loading.reading import file_stages
except ImportError:
    file_stages = lambda trace: trace
trace = file_stages(xspace_reader.read(Path(sys.argv[1])))
lap("read (XSpace decode + frames)")
trace = combine([trace]); trace.events = trace.events.rechunk()
trace.events, _, _ = clip_stream_overlaps(trace.events); lap("combine + clip overlaps")
costs = op_cost_table(trace.events, trace.modules); lap("HLO cost table")
trace.events = classify(with_hlo_kind(trace.events, costs[0])).drop("hlo"); lap("classify")
annotate(trace, table=costs); lap("cost annotation")
trace.events = assign_steps(trace.events, trace.steps); lap("assign steps")
validate(trace); lap("validate")
s = summarize(trace); lap("summarize (timelines, collectives, roofline, MFU, top)")
json.dumps(s); lap("JSON")
print(json.dumps(out))
"""


def stages(path: Path, code_dir: Path | None = None) -> dict[str, float] | None:
    """Where workload 1's time goes, stage by stage, in one process (best of two)."""
    best: dict[str, float] | None = None
    for _ in range(2):
        res = subprocess.run([PY, "-c", STAGES, str(path)], capture_output=True, text=True,
                             cwd=code_dir or ROOT, env=bench_env(code_dir))
        if res.returncode != 0:
            return None
        got = json.loads(res.stdout.strip().splitlines()[-1])
        best = got if best is None else {k: min(v, got.get(k, v)) for k, v in best.items()}
    return best


# ---------------------------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------------------------

def head_commit() -> str:
    """HEAD's commit id, read from .git (no git command)."""
    git = ROOT / ".git"
    try:
        ref = (git / "HEAD").read_text().strip()
        if not ref.startswith("ref: "):
            return ref
        name = ref[5:]
        loose = git / name
        if loose.exists():
            return loose.read_text().strip()
        for line in (git / "packed-refs").read_text().splitlines():
            if line.endswith(" " + name):
                return line.split()[0]
    except OSError:
        pass
    return "unknown"


def _fmt(x: float | None, unit: str = "", digits: int = 2) -> str:
    return "–" if x is None else f"{x:.{digits}f}{unit}"


def _ratio(a: Run | None, b: Run | None) -> float | None:
    if a is None or b is None or not a.median or not b.median:
        return None
    return a.median / b.median


def _row(run: Run, label: str, ratio: str = "") -> str:
    if run.error:
        return f"| {label} | failed: {run.error} | | | | |\n"
    cpu = statistics.median(run.cpu) if run.cpu else None
    return (f"| {label} | {_fmt(run.median, ' s')} | {max(run.rss_mb):.0f} MB | "
            f"{_fmt(cpu, ' s')} | {_fmt(cpu / run.median if cpu and run.median else None)} | "
            f"{ratio} |\n")


def render(results: dict[str, Any], meta: dict[str, Any], before: dict[str, Any]) -> str:
    def runs(w: str) -> dict[str, Run]:
        return results.get(w, {}).get("runs", {})

    out = [f"Measured {meta['date']} on {meta['machine']} ({meta['cpus']} CPUs, "
           f"{meta['mem_gb']} GB), Python {meta['python']}, polars {meta['polars']}, "
           f"protobuf {meta['protobuf']} ({meta['protobuf_backend']}); XSpace decoder: "
           f"{meta['decoder']}.  \n"
           f"Code: HEAD `{meta['commit']}` + uncommitted changes of the working tree. "
           f"Command: `{meta['command']}` ({meta['repeat']} runs per measurement, median "
           f"wall time; peak RSS is the largest of the runs).\n"]
    head = ("| measurement | median wall | peak RSS | CPU | CPU/wall | tracelens ÷ this |\n"
            "|---|---|---|---|---|---|\n")
    titles = {
        "w1": "1. XSpace, 8 GPUs × {n} kernels + host launches + HLO",
        "w2": "2. rocpd SQLite, {n} dispatches",
        "w3": "3. rocprofv3 JSON, {n} dispatches",
        "w4": "4. XProf log directory, {n}",
        "w5": "5. `report` on workload 1",
    }
    for w, title in titles.items():
        if w not in results:
            continue
        r = results[w]
        out.append(f"\n### {title.format(n=r.get('label', ''))}\n\nInput: {r['input_mb']} MB"
                   f"{' in %d files' % r['files'] if r.get('files') else ''}.\n\n" + head)
        rr = runs(w)
        tl = rr.get("tracelens")
        for key, run in rr.items():
            if key == "tracelens":
                out.append(_row(run, f"**tracelens {run.name}**"))
            else:
                out.append(_row(run, run.name, _fmt(_ratio(tl, run), "×")))
    out.append("\n### Targets (issue 8)\n\n| target | measured | met |\n|---|---|---|\n")
    for line in targets(results):
        out.append(line)
    if meta.get("stages"):
        out.append("\n### Where workload 1's time goes (in one process, best of two)\n\n"
                   "| stage | s |\n|---|---|\n")
        for k, v in meta["stages"].items():
            out.append(f"| {k} | {v:.3f} |\n")
    if before:
        out.append(f"\n### Before (code of `{before.get('code', '?')}`, one run each, "
                   f"measured {before.get('date', '?')})\n\n"
                   "| workload | before | now | speed-up |\n|---|---|---|---|\n")
        for w, b in sorted(before.get("runs", {}).items()):
            now = runs(w).get("tracelens")
            if now is None or now.median is None or not b.get("median_s"):
                continue
            out.append(f"| {w} | {b['median_s']:.2f} s, {b['rss_mb']:.0f} MB | "
                       f"{now.median:.2f} s, {max(now.rss_mb):.0f} MB | "
                       f"{b['median_s'] / now.median:.1f}× |\n")
        if before.get("stages"):
            out.append("\nBefore, stage by stage (workload 1): " + ", ".join(
                f"{k} {v:.2f} s" for k, v in before["stages"].items()) + ".\n")
    return "".join(out)


def targets(results: dict[str, Any]) -> list[str]:
    lines = []

    def line(what: str, value: str, ok: bool | None) -> None:
        lines.append(f"| {what} | {value} | {'yes' if ok else ('–' if ok is None else 'no')} |\n")
    r1 = results.get("w1", {}).get("runs", {})
    if r1:
        ratio = _ratio(r1.get("tracelens"), r1.get("floor"))
        line("workload 1 within 2.5× of bare ParseFromString", _fmt(ratio, "×"),
             None if ratio is None else ratio <= 2.5)
        for tool in ("kernel_stats", "hlo_stats"):
            ratio = _ratio(r1.get("tracelens"), r1.get(f"xprof_{tool}"))
            line(f"workload 1 faster than XProf {tool}", _fmt(ratio, "× of its time"),
                 None if ratio is None else ratio < 1)
    r2 = results.get("w2", {}).get("runs", {})
    if r2:
        ratio = _ratio(r2.get("tracelens"), r2.get("floor"))
        line("workload 2 within 1.5× of bare SELECT", _fmt(ratio, "×"),
             None if ratio is None else ratio <= 1.5)
    for w in ("w1", "w2", "w3", "w4"):
        r = results.get(w)
        tl = (r or {}).get("runs", {}).get("tracelens")
        if tl is None or not tl.rss_mb:
            continue
        x = max(tl.rss_mb) / r["input_mb"]
        line(f"workload {w[1]} peak RSS ≤ 3× input ({r['input_mb']} MB)",
             f"{max(tl.rss_mb):.0f} MB = {x:.1f}×", x <= 3)
    r4 = results.get("w4", {}).get("runs", {}).get("tracelens")
    if r4 is not None and r4.cpu:
        x = statistics.median(r4.cpu) / r4.median
        line("workload 4 uses both cores (CPU time / wall time)", f"{x:.2f}", x > 1.3)
    return lines


def write_markdown(text: str, path: Path) -> None:
    old = path.read_text() if path.exists() else (
        "# Benchmark results\n\nGenerated by `python benchmarks/run.py`; the notes outside "
        "the markers are hand-written.\n\n" + START + "\n" + END + "\n")
    if START in old and END in old:
        pre, rest = old.split(START, 1)
        post = rest.split(END, 1)[1]
        new = f"{pre}{START}\n{text}\n{END}{post}"
    else:
        new = f"{old.rstrip()}\n\n{START}\n{text}\n{END}\n"
    path.write_text(new)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="about a tenth of every size")
    ap.add_argument("--smoke", action="store_true", help="tiny sizes: checks that it runs")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--only", default="1,2,3,4,5", help="workloads to run, e.g. 1,4")
    ap.add_argument("--data", type=Path, help="keep generated inputs here (and reuse them)")
    ap.add_argument("--before", type=Path, help="also time this code checkout (one run)")
    ap.add_argument("--out", type=Path, default=RESULTS_MD)
    ap.add_argument("--no-write", action="store_true", help="print, do not write files")
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    q = 2 if args.smoke else 1 if args.quick else 0
    only = {int(x) for x in args.only.split(",") if x.strip()}
    tmp = Path(tempfile.mkdtemp(prefix="tracelens_bench_"))
    data = args.data or tmp
    data.mkdir(parents=True, exist_ok=True)
    bench = _bench_rocpd()
    results: dict[str, Any] = {}
    stage_times = None
    try:
        if only & {1, 5}:
            n = SIZES["w1_per_gpu"][q]
            t = time.perf_counter()
            w1 = make_w1(data, n)
            print(f"workload 1: {w1} ({_size_mb(w1)} MB, made in "
                  f"{time.perf_counter() - t:.0f} s)", flush=True)
            if 1 in only:
                results["w1"] = run_w1(w1, args.repeat, args.before)
                results["w1"]["label"] = f"{n:,}"
                stage_times = stages(w1)
            if 5 in only:
                results["w5"] = run_w5(w1, args.repeat, tmp, args.before)
        if only & {2, 3} and bench is None:
            print("workloads 2 and 3 need benchmarks/bench_rocpd.py; skipped", flush=True)
        if 2 in only and bench is not None:
            n = SIZES["w2_dispatches"][q]
            w2 = make_w2(data, n, bench)
            print(f"workload 2: {w2} ({_size_mb(w2)} MB)", flush=True)
            results["w2"] = run_w2(w2, args.repeat, bench, args.before)
            results["w2"]["label"] = f"{n:,}"
        if 3 in only and bench is not None:
            n = SIZES["w3_dispatches"][q]
            w3 = make_w3(data, n, bench)
            print(f"workload 3: {w3} ({_size_mb(w3)} MB)", flush=True)
            results["w3"] = run_w3(w3, args.repeat, bench, args.before)
            results["w3"]["label"] = f"{n:,}"
        if 4 in only:
            hosts, n = SIZES["w4_hosts"][q], SIZES["w4_per_gpu"][q]
            w4 = make_w4(data, hosts, n)
            print(f"workload 4: {w4} ({_size_mb(w4)} MB)", flush=True)
            results["w4"] = run_w4(w4, args.repeat, args.before)
            results["w4"]["label"] = f"{hosts} hosts × 8 GPUs × {n:,} kernels"
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    meta = _meta(args, stage_times)
    before = _before(results, args)
    text = render(results, meta, before)
    print(text)
    if not args.no_write:
        RESULTS_DIR.mkdir(parents=True, exist_ok=True)
        (RESULTS_DIR / "run.json").write_text(json.dumps({
            "meta": meta, "results": {w: {**r, "runs": {k: v.as_dict() for k, v in
                                                        r["runs"].items()}}
                                      for w, r in results.items()}}, indent=1) + "\n")
        write_markdown(text, args.out)


def _before(results: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    """The "before" numbers: measured now with ``--before``, else the last recorded ones."""
    path = RESULTS_DIR / "before.json"
    if args.before is None:
        return json.loads(path.read_text()) if path.exists() else {}
    runs = {w: r["runs"]["before"].as_dict() | {"rss_mb": max(r["runs"]["before"].rss_mb or
                                                               [0])}
            for w, r in results.items() if "before" in r["runs"] and
            r["runs"]["before"].median is not None}
    for r in results.values():
        r["runs"].pop("before", None)
    rec = {"code": str(args.before), "date": time.strftime("%Y-%m-%d"), "runs": runs,
           "stages": stages(Path(results["w1"]["input"]), args.before)
           if "w1" in results and Path(results["w1"]["input"]).exists() else None}
    if not args.no_write:
        RESULTS_DIR.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(rec, indent=1) + "\n")
    return rec


def _meta(args: argparse.Namespace, stage_times: dict[str, float] | None) -> dict[str, Any]:
    import google.protobuf
    import polars
    from google.protobuf.internal import api_implementation

    from parsers.xspace import native as xspace_native

    try:
        mem_gb = round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30)
    except (ValueError, OSError):
        mem_gb = "?"
    return {"date": time.strftime("%Y-%m-%d %H:%M"), "machine": platform.machine(),
            "cpus": os.cpu_count(), "mem_gb": mem_gb, "python": platform.python_version(),
            "polars": polars.__version__, "protobuf": google.protobuf.__version__,
            "protobuf_backend": api_implementation.Type(),
            "decoder": "C extension" if xspace_native.available() else
            f"pure Python ({xspace_native.unavailable_reason()})",
            "commit": head_commit(), "repeat": args.repeat,
            "command": "python benchmarks/run.py " + " ".join(sys.argv[1:]),
            "stages": stage_times}


if __name__ == "__main__":
    main()
