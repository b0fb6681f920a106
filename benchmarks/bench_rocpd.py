"""Benchmark: ``tracelens summarize`` on a 2M-dispatch rocpd database against its floor.

    python benchmarks/bench_rocpd.py [--dispatches 2000000] [--repeat 3] [--rebuild] [--stages]

Writes (once, cached under the temp directory) a synthetic rocprofv3 database with
``tracelens_dev.writers.rocprof.write_rocpd``: 8 GPUs, 3 streams each,
GEMM/attention/elementwise/reduction kernels, RCCL all-gather and reduce-scatter kernels with
their RCCL API rows, 100 steps as ROCTx ranges. Then times, each in a fresh process, median of
``--repeat`` runs:

- ``summarize``: ``tracelens summarize DB --format json --step-marker ...`` end to end;
- ``floor``: a bare ``SELECT`` of the dispatch columns the reader needs, into polars.

Prints the timings and the ratio (issue 8 asks for <= 1.5x) and records them in
``benchmarks/results/rocpd.json``. ``--stages`` also times each stage in-process (read,
combine and clip, classify, steps, validate, summarize) to show where the time goes.
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
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

STEP_MARKER = r"^step (\d+)$"
FLOOR = """
import sqlite3, sys, polars as pl
con = sqlite3.connect(f"file:{sys.argv[1]}?mode=ro&immutable=1", uri=True)
rows = con.execute('SELECT pid, agent_id, queue_id, stream_id, tid, kernel_id, start, "end" '
                   'FROM rocpd_kernel_dispatch').fetchall()
df = pl.DataFrame(rows, schema=["pid", "agent", "queue", "stream", "tid", "kernel_id", "start",
                                "end"], orient="row")
assert df.height > 0
"""
KERNELS = [  # (name, category, subcategory, duration ns)
    ("Cijk_Ailk_Bljk_BBS_BH_MT256x224x64_MI16x16x16x1_SN_1LDSB0_ISA942_WGM1.kd", "gemm",
     None, 42_000),
    ("Cijk_Ailk_Bljk_BBS_BH_MT128x128x64_MI16x16x16x1_SN_1LDSB0_ISA942_WGM16.kd", "gemm",
     None, 19_000),
    ("void ck_tile::kentry<ck_tile::gfx942_t, 2, ck_tile::FmhaFwdKernel<...>>", "attention",
     "fwd", 31_000),
    ("loop_add_fusion.kd", "elementwise", None, 4_500),
    ("loop_multiply_fusion.kd", "elementwise", None, 3_100),
    ("input_reduce_fusion.kd", "reduction", None, 3_800),
    ("__amd_rocclr_copyBuffer.kd", "memory", "copy", 2_000),
]
RCCL = "ncclDevKernel_Generic_4(ncclDevKernelArgsStorage<4096ul>)"


def synthetic_trace(n: int):
    """``n`` dispatches on 8 GPUs as a Trace (times in ns, steps every 1/100 of the run)."""
    import polars as pl

    from tracelens.core.model import (DEVICE_SCHEMA, EVENT_SCHEMA, HOST_EVENT_SCHEMA, STEP_SCHEMA,
                                 Trace, conform)
    per_dev = n // 8
    i = pl.int_range(0, per_dev, dtype=pl.Int64, eager=True)
    k = len(KERNELS)
    frames = []
    for dev in range(8):
        slot = i % (k + 1)
        is_rccl = slot == k
        name_idx = slot.clip(0, k - 1)
        df = pl.DataFrame({"i": i, "slot": slot, "rccl": is_rccl, "idx": name_idx})
        df = df.with_columns(
            name=pl.when("rccl").then(pl.lit(RCCL)).otherwise(
                pl.col("idx").replace_strict({j: kk[0] for j, kk in enumerate(KERNELS)})),
            category=pl.when("rccl").then(pl.lit("collective")).otherwise(
                pl.col("idx").replace_strict({j: kk[1] for j, kk in enumerate(KERNELS)})),
            subcategory=pl.when("rccl").then(
                pl.when((pl.col("i") // (k + 1)) % 2 == 0).then(pl.lit("all-gather"))
                .otherwise(pl.lit("reduce-scatter"))).otherwise(
                pl.col("idx").replace_strict({j: kk[2] for j, kk in enumerate(KERNELS)},
                                             return_dtype=pl.String)),
            dur=pl.when("rccl").then(60_000).otherwise(
                pl.col("idx").replace_strict({j: kk[3] for j, kk in enumerate(KERNELS)})),
            stream=pl.when("rccl").then(2).when(pl.col("idx") == k - 1).then(3).otherwise(1))
        df = df.with_columns(start_ns=1_000_000 + pl.col("i") * 20_000 + dev * 37,
                             device=pl.lit(dev, pl.Int32))
        frames.append(df.with_columns(end_ns=pl.col("start_ns") + pl.col("dur") // 4))
    ev = pl.concat(frames).with_columns(host=pl.lit("bench-node0"), rank=pl.lit(0),
                                        kind=pl.lit("kernel"))
    span = int(ev["end_ns"].max())
    steps = pl.DataFrame({"step": list(range(100))}).with_columns(
        rank=pl.lit(0), start_ns=1_000_000 + pl.col("step") * (span // 100),
        end_ns=1_000_000 + (pl.col("step") + 1) * (span // 100) - 1_000, source=pl.lit("step"))
    dev = pl.DataFrame({"device": list(range(8))}).with_columns(
        host=pl.lit("bench-node0"), rank=pl.lit(0), vendor=pl.lit("amd"), arch=pl.lit("gfx942"),
        product=pl.lit("AMD Instinct MI300X"), compute_units=pl.lit(304),
        clock_mhz=pl.lit(2100.0), memory_bytes=pl.lit(206_141_652_992))
    return Trace(events=conform(ev, EVENT_SCHEMA), host_events=pl.DataFrame(
        schema=HOST_EVENT_SCHEMA), steps=conform(steps, STEP_SCHEMA),
        devices=conform(dev, DEVICE_SCHEMA))


def build(path: Path, n: int) -> float:
    from tracelens_dev.writers.rocprof import write_rocpd
    t0 = time.perf_counter()
    write_rocpd(synthetic_trace(n), path)
    return time.perf_counter() - t0


def timed(cmd: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, cwd=ROOT)
    return time.perf_counter() - t0


def stages(path: Path) -> dict[str, float]:
    """Where the time goes, in-process (the loader's steps, then the summary)."""
    from parsers import rocprof
    from tracelens.analyze.summary.build import summarize
    from tracelens.classify import classify
    from tracelens.loading.reading import file_stages
    from tracelens.loading.loader import combine
    from tracelens.core.model import validate
    from tracelens.loading.prepare import assign_steps, clip_stream_overlaps
    out, t = {}, time.perf_counter()

    def lap(name: str) -> None:
        nonlocal t
        now = time.perf_counter()
        out[name] = round(now - t, 3)
        t = now
    trace = rocprof.read_rocpd(path, step_marker=STEP_MARKER)
    file_stages(trace)  # counter costs and device identification, as reading does
    lap("read rocpd (SQL + build)")
    trace = combine([trace])
    trace.events, _, _ = clip_stream_overlaps(trace.events)
    lap("combine + clip")
    trace.events = classify(trace.events)
    lap("classify")
    trace.events = assign_steps(trace.events, trace.steps)
    lap("assign steps")
    validate(trace)
    lap("validate")
    summarize(trace)
    lap("summarize")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dispatches", type=int, default=2_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--rebuild", action="store_true")
    ap.add_argument("--stages", action="store_true")
    ap.add_argument("--db", type=Path, default=None)
    args = ap.parse_args()
    db = args.db or Path(tempfile.gettempdir()) / "tracelens_bench" / \
        f"rocpd_{args.dispatches}_results.db"
    built = None
    if args.rebuild or not db.exists():
        db.parent.mkdir(parents=True, exist_ok=True)
        built = build(db, args.dispatches)
        print(f"wrote {db} ({db.stat().st_size / 2**20:.0f} MiB) in {built:.1f} s")
    summarize = [sys.executable, "-m", "tracelens.cli.commands", "summarize", str(db), "--format",
                 "json", "--step-marker", STEP_MARKER]
    floor = [sys.executable, "-c", FLOOR, str(db)]
    runs = {"summarize": [], "floor": []}
    for _ in range(args.repeat):  # interleaved, so both see the same page-cache state
        runs["floor"].append(timed(floor))
        runs["summarize"].append(timed(summarize))
    med = {k: statistics.median(v) for k, v in runs.items()}
    ratio = med["summarize"] / med["floor"]
    print(f"bare SELECT into polars: {med['floor']:.2f} s   summarize --format json: "
          f"{med['summarize']:.2f} s   ratio {ratio:.2f}x (target <= 1.5x)")
    result = {"benchmark": "rocpd", "dispatches": args.dispatches, "db_bytes": db.stat().st_size,
              "runs_s": runs, "median_s": med, "ratio": round(ratio, 3),
              "python": platform.python_version(), "cpus": os.cpu_count(),
              "machine": platform.machine(), "date": time.strftime("%Y-%m-%d")}
    if built is not None:
        result["write_s"] = round(built, 2)
    if args.stages:
        result["stages_s"] = stages(db)
        print("stages (in-process):", json.dumps(result["stages_s"]))
    out = ROOT / "benchmarks" / "results" / "rocpd.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
