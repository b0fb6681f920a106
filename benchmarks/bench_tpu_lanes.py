"""The TPU reader's lane assignment of async spans (issue 48): ``parsers.xspace.tpu.lanes``
(columnar, :func:`~parsers.xspace.tpu.lane_numbers`) against the heap loop it replaced (one
Python step per span, kept here as the reference), on random spans with ~40 in flight, and
its share of ``tracelens.load`` on a writer-made TPU trace.

    python benchmarks/bench_tpu_lanes.py [--spans 1000000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import heapq
import tempfile
import time
from pathlib import Path

import numpy as np
import polars as pl

import parsers.xspace.tpu as tpu


def heap_lanes(df: pl.DataFrame) -> pl.DataFrame:
    """The replaced loop: each span on the first lane free at its start, in start order."""
    df = df.sort("start_ns", "end_ns", maintain_order=True)
    ends: list[tuple[int, int]] = []
    free: list[int] = []
    out = []
    for start, end in zip(df["start_ns"].to_list(), df["end_ns"].to_list()):
        while ends and ends[0][0] <= start:
            heapq.heappush(free, heapq.heappop(ends)[1])
        lane = heapq.heappop(free) if free else len(ends) + len(free)
        heapq.heappush(ends, (end, lane))
        out.append(lane)
    return df.with_columns(stream=pl.col("stream") + (pl.Series(out, dtype=pl.Int64) + 1)
                           * tpu.LANE_STREAM)


def best(fn, arg, rounds: int) -> tuple[float, pl.DataFrame]:
    times, out = [], None
    for _ in range(rounds):
        t0 = time.perf_counter()
        out = fn(arg)
        times.append(time.perf_counter() - t0)
    return min(times), out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--spans", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    rng = np.random.default_rng(48)
    start = np.cumsum(rng.integers(0, 2000, args.spans))
    df = pl.DataFrame({"start_ns": start, "end_ns": start + rng.integers(100, 40_000, args.spans),
                       "stream": np.full(args.spans, 4, np.int64)})
    t_old, old = best(heap_lanes, df, args.rounds)
    t_new, new = best(tpu.lanes, df, args.rounds)
    print(f"{args.spans:,} spans: heap loop {t_old:.3f} s, columnar {t_new:.3f} s "
          f"({t_old / t_new:.1f}x); lanes {old['stream'].n_unique()} vs "
          f"{new['stream'].n_unique()}")

    import tracelens
    from tracelens_dev.writers.xspace import TpuLayout, build_tpu_xspace

    path = Path(tempfile.gettempdir()) / "tl_bench_tpu_8x100x100.xplane.pb"
    if not path.exists():
        path.write_bytes(build_tpu_xspace(TpuLayout(chips=8, steps=100, layers=100)))
    spent = [0.0]
    timed = tpu.lanes

    def counting(frame: pl.DataFrame) -> pl.DataFrame:
        t0 = time.perf_counter()
        try:
            return timed(frame)
        finally:
            spent[0] += time.perf_counter() - t0

    tpu.lanes = counting
    t_load, trace = best(tracelens.load, path, args.rounds)
    print(f"load of {path.name} ({path.stat().st_size / 1e6:.1f} MB, {trace.events.height:,} "
          f"events): {t_load:.2f} s, lanes {spent[0] / args.rounds:.3f} s a load")


if __name__ == "__main__":
    main()
