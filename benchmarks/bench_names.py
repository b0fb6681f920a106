"""Many distinct kernel names (issue 26): ``summarize`` on an XSpace whose kernels have 150,000
distinct names, against the same command of an older checkout, in alternating fresh processes.

    python benchmarks/bench_names.py [--names 150000] [--per-name 2] [--rounds 3]
                                     [--before DIR] [--data DIR]

The input (cached in ``--data``, default the temp directory): 8 GPU planes sharing
``--names`` distinct kernel names between them (an eighth each, 50-60 bytes like real Tensile
names), ``--per-name`` events per name back to back on one stream, every event an HLO op of
one program (``fusion.<i>``) so the cost, roofline and kernel tables see every name.
Each round runs ``tracelens summarize FILE --format json`` (this checkout, and ``--before``'s
when given) in turn; reported per command: median CPU (user + system of the process) and
wall, and the largest peak RSS. Raw numbers: ``benchmarks/results/names_issue26.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from run import bench_env  # benchmarks/run.py: the script's own folder is on sys.path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "benchmarks" / "results" / "names_issue26.json"


def make_input(path: Path, names: int, per_name: int) -> Path:
    """The XSpace described in the module doc, written once."""
    if path.exists():
        return path
    sys.path.insert(0, str(ROOT))
    from parsers.xplane_schema import xspace_class
    from tracelens_dev.wire import field_bytes
    from tracelens_dev.writers.xspace_encode import Column, encode_events, line_bytes

    planes = []
    share = -(-names // 8)  # each GPU runs its own share of the names
    for dev in range(8):
        first = dev * share + 1
        mine = np.arange(first, min(names, first + share - 1) + 1, dtype=np.int64)
        ids = np.tile(mine, per_name)
        n = len(ids)
        start = np.arange(n, dtype=np.int64) * 2_000_000  # ps: 2 µs apart
        dur = np.full(n, 1_500_000, np.int64)
        plane = xspace_class()().planes.add(id=dev, name=f"/device:GPU:{dev}")
        op_stat, prog_stat = 1, 2
        plane.stat_metadata[op_stat].id = op_stat
        plane.stat_metadata[op_stat].name = "hlo_op"
        plane.stat_metadata[prog_stat].id = prog_stat
        plane.stat_metadata[prog_stat].name = "program_id"
        for i in mine.tolist():
            md = plane.event_metadata[i]
            md.id = i
            md.name = f"Cijk_Alik_Bljk_HHS_BH_MT{i % 256}x{i % 64}x{i}_gemm_kernel_{i}"
            st = md.stats.add()
            st.metadata_id = op_stat
            st.str_value = f"fusion.{i}"
        head = plane.SerializeToString()
        body = encode_events(ids, start, dur, [Column(prog_stat, 4, np.full(n, 7, np.int64),
                                                      None)])
        planes.append(field_bytes(1, head + field_bytes(3, line_bytes(1, "Stream #1", 0,
                                                                        body))))
    path.write_bytes(b"".join(planes) + field_bytes(4, b"names-host"))
    return path


def _run(code: Path, path: Path) -> tuple[float, float, int]:
    """(CPU s, wall s, peak RSS bytes) of ``summarize`` with the code of ``code``."""
    env = bench_env(code)
    t = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "tracelens.cli.commands", "summarize", str(path),
                             "--format", "json"], cwd=code, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t
    err = proc.stderr.read().decode() if proc.stderr else ""
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"summarize failed ({code}): {err[-2000:]}")
    return usage.ru_utime + usage.ru_stime, wall, usage.ru_maxrss * 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--names", type=int, default=150_000)
    ap.add_argument("--per-name", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--before", type=Path, default=None)
    ap.add_argument("--data", type=Path, default=Path(tempfile.gettempdir()))
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    path = make_input(args.data / f"names_{args.names}x{args.per_name}.xplane.pb", args.names,
                      args.per_name)
    codes = {"tracelens": ROOT, **({"before": args.before} if args.before else {})}
    runs: dict[str, list[tuple[float, float, int]]] = {k: [] for k in codes}
    for _ in range(args.rounds):
        for label, code in codes.items():
            runs[label].append(_run(code, path))
    result = {"input": str(path), "bytes": path.stat().st_size, "names": args.names,
              "per_name": args.per_name, "rounds": args.rounds,
              "maxrss_units": resource.getpagesize() and "bytes", "runs": runs}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"Input: {path.name}, {path.stat().st_size / 1e6:.1f} MB, {args.names:,} names x "
          f"{args.per_name} x 8 GPUs; {args.rounds} alternating rounds\n")
    print("| command | median CPU | median wall | peak RSS |\n|---|---|---|---|")
    for label, rs in runs.items():
        print(f"| {label} | {statistics.median(r[0] for r in rs):.2f} s | "
              f"{statistics.median(r[1] for r in rs):.2f} s | "
              f"{max(r[2] for r in rs) / 1e6:.0f} MB |")


if __name__ == "__main__":
    main()
