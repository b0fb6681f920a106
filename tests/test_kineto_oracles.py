"""tracelens against HTA's temporal breakdown on the shared Kineto traces.

``tests/data/kineto_hta_oracle.json`` is HTA 0.5's ``get_temporal_breakdown`` per rank (made by
``benchmarks/hta_oracle.py`` in a separate environment). Where the definitions differ, the
test applies HTA's to tracelens's events, and each difference is named here:

- HTA rounds every event to whole µs (start up, end down); tracelens keeps exact ns;
- with two or more ``ProfilerStep`` names, HTA drops device activity launched after the last
  step's CPU start (``include_last_profiler_step=False``) and any activity whose correlation
  id matches no CPU-side event; tracelens keeps the whole trace;
- HTA's "compute" is every kernel whose name is not NCCL/HIP/Memcpy/Memset/DMA; tracelens's
  compute is its classifier's compute categories (a copy kernel is ``memory`` there);
- tracelens clips same-stream overlaps (an in-order stream runs one activity at a time;
  ``meta.warnings`` counts them); HTA does not: each clipped overlap may move a rounded total
  by 1 µs.
"""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path

import polars as pl
import pytest

import tracelens
from tests.conftest import ROOT, SHARED

KINETO = SHARED / "traces" / "kineto"
ORACLE = ROOT / "tests" / "data" / "kineto_hta_oracle.json"
CASES = sorted(json.loads(ORACLE.read_text()).items())
COMM = r"(^nccl.*)|(^hip)|(^hccl)|(.*ncclKernel.*)"
MEMORY = r"(^(hip)?Memcpy)|(^(hip)?Memset)|(^dma)"


def _union(df: pl.DataFrame) -> int:
    total, cur_s, cur_e = 0, None, None
    for s, e in df.sort("s").select("s", "e").iter_rows():
        if cur_e is None or s > cur_e:
            total += 0 if cur_e is None else cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    return total + (0 if cur_e is None else cur_e - cur_s)


def _last_step_start(files: list[Path]) -> dict[int, float | None]:
    """Per file (rank order): HTA's cut, the CPU start of the last ProfilerStep, in µs."""
    out = {}
    for i, f in enumerate(files):
        evs = json.loads(gzip.decompress(f.read_bytes()))["traceEvents"]
        steps = [e for e in evs if e.get("ph") == "X" and "ProfilerStep" in str(e.get("name"))]
        out[i] = max(e["ts"] for e in steps) if len({e["name"] for e in steps}) > 1 else None
    return out


@pytest.mark.parametrize("key,rows", CASES, ids=[k for k, _ in CASES])
def test_temporal_breakdown_agrees_with_hta(key: str, rows) -> None:
    path = KINETO / key
    if not path.exists():
        pytest.skip(f"{path} not present")
    if isinstance(rows, dict):
        pytest.skip(f"HTA fails on this trace ({rows['error']}); nothing to compare")
    trace = tracelens.load(path)
    files = sorted(path.glob("*.json.gz")) if path.is_dir() else [path]
    cuts = _last_step_start(files)
    clipped = sum(int(w.split()[1]) for w in trace.meta.warnings
                  if w.startswith("clipped "))
    api = trace.host_events.filter(pl.col("kind") == "api").select(
        "rank", "correlation_id", l_ts="start_ns").unique(["rank", "correlation_id"])
    for row in rows:
        rank = row["rank"]
        ev = trace.events.filter(pl.col("rank") == rank)
        if cuts[rank] is not None:
            # HTA's clock: cut at the last step's CPU start, before any alignment shift
            shift = (trace.host_events.filter(pl.col("rank") == rank)["start_ns"].min()
                     - _first_cpu_ns(files[rank]))
            cut_ns = math.floor(cuts[rank] * 1000) + shift
            ev = ev.join(api, on=["rank", "correlation_id"], how="inner").filter(
                pl.col("l_ts") < cut_ns)
        # integer µs, start up and end down (integer division: epoch ns exceed float64)
        ev = ev.with_columns(s=-((-pl.col("start_ns")) // 1000), e=pl.col("end_ns") // 1000)
        kernel_time = ev["e"].max() - ev["s"].min()
        idle = kernel_time - _union(ev)
        compute = _union(ev.filter(~pl.col("name").cast(pl.String).str.contains(COMM)
                                   & ~pl.col("name").cast(pl.String).str.contains(MEMORY)))
        assert kernel_time == row["kernel_time(us)"]
        assert abs(idle - row["idle_time(us)"]) <= clipped
        assert abs(compute - row["compute_time(us)"]) <= clipped


def _first_cpu_ns(f: Path) -> int:
    """The earliest start of the host events tracelens keeps, from the raw file (exact)."""
    import decimal

    evs = json.loads(gzip.decompress(f.read_bytes()), parse_float=decimal.Decimal)["traceEvents"]
    cats = {"cpu_op", "cuda_runtime", "cuda_driver", "user_annotation"}
    return min(int(decimal.Decimal(e["ts"]) * 1000) for e in evs
               if e.get("ph") == "X" and e.get("cat") in cats and "dur" in e)
