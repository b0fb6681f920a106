"""RCCL kernels get their collective type from the RCCL API call that launched them; steps from
ROCTx ranges; agents from every CSV agent-reference style."""

from __future__ import annotations

import polars as pl

from parsers.rocprof.agents import agent_frame, agent_row, resolve_refs
from parsers.rocprof.collectives import collective_types
from parsers.rocprof.markers import steps_from_markers

GEN = "ncclDevKernel_Generic_4(ncclDevKernelArgsStorage<4096ul>)"


def _apis(rows: list[tuple]) -> pl.DataFrame:
    return pl.DataFrame([dict(rank=0, domain=d, name=n, tid=t, corr=c, start=s, end=e)
                         for d, n, t, c, s, e in rows])


def _kernels(rows: list[tuple]) -> pl.DataFrame:
    return pl.DataFrame([dict(rank=0, name=n, tid=t, corr=c, start=s) for n, t, c, s in rows])


def test_every_way_a_kernel_is_launched() -> None:
    apis = _apis([
        ("RCCL_API", "ncclAllReduce", 7, 1, 100, 400),             # launches directly
        ("RCCL_API", "ncclAllGather", 7, 2, 1_000, 1_500),
        ("HIP_RUNTIME_API_EXT", "hipExtLaunchKernel", 7, 3, 1_100, 1_200),  # nested launch
        ("RCCL_API", "ncclGroupStart", 7, 4, 2_000, 2_010),
        ("RCCL_API", "ncclSend", 7, 5, 2_020, 2_030),
        ("RCCL_API", "ncclRecv", 7, 6, 2_040, 2_050),
        ("RCCL_API", "ncclGroupEnd", 7, 7, 2_060, 2_500),
        ("RCCL_API", "ncclGroupStart", 7, 8, 3_000, 3_010),
        ("RCCL_API", "ncclAllReduce", 7, 9, 3_020, 3_030),
        ("RCCL_API", "ncclAllReduce", 7, 10, 3_040, 3_050),
        ("RCCL_API", "ncclCommGetAsyncError", 7, 11, 3_060, 3_070),  # not a collective
        ("RCCL_API", "ncclGroupEnd", 7, 12, 3_080, 3_500),
        ("RCCL_API", "ncclGroupStart", 7, 13, 4_000, 4_010),
        ("RCCL_API", "ncclAllGather", 7, 14, 4_020, 4_030),
        ("RCCL_API", "ncclReduceScatter", 7, 15, 4_040, 4_050),
        ("RCCL_API", "ncclGroupEnd", 7, 16, 4_060, 4_500),
        ("HIP_RUNTIME_API_EXT", "hipLaunchKernel", 7, 17, 5_000, 5_100),  # outside RCCL
        ("RCCL_API", "ncclBroadcast", 8, 18, 6_000, 6_100),
    ])
    kernels = _kernels([
        (GEN, 9, 1, 500), (GEN, 9, 3, 1_300), (GEN, 9, 7, 2_600), (GEN, 9, 12, 3_600),
        (GEN, 9, 16, 4_600), (GEN, 9, 17, 5_200),
        (GEN, 8, 99, 6_500),                      # no API row: the latest call on its thread
        ("Cijk_Ailk_Bljk_gemm", 7, 1, 700),       # not RCCL: never typed
        (GEN, None, None, 7_000),                 # nothing to go by
    ])
    sub, stats = collective_types(kernels, apis)
    assert sub.to_list() == ["all-reduce", "all-gather", "send-recv", "all-reduce", None, None,
                             "collective-broadcast", None, None]
    assert stats == {"rccl_kernels": 8, "by_api": 4, "by_time": 1, "mixed": 1}


def test_no_rccl_rows_leaves_the_type_unknown() -> None:
    kernels = _kernels([(GEN, 1, 1, 10)])
    apis = _apis([("HIP_RUNTIME_API_EXT", "hipLaunchKernel", 1, 1, 0, 5)])
    sub, stats = collective_types(kernels, apis)
    assert sub.to_list() == [None] and stats["by_api"] == 0


def test_steps_from_markers() -> None:
    m = pl.DataFrame({"rank": [0, 0, 0, 0, 1], "name": ["fwd", "iter=7", "iter=8", "mark",
                                                       "iter=7"],
                      "start": [0, 10, 20, 25, 12], "end": [5, 19, 30, 25, 18]},
                     schema_overrides={"rank": pl.Int32})
    steps, warn = steps_from_markers(m, r"iter=(?P<step>\d+)")
    assert steps.select("rank", "step", "start_ns", "end_ns").rows() == [
        (0, 7, 10, 19), (0, 8, 20, 30), (1, 7, 12, 18)]
    assert warn == []
    ordered, _ = steps_from_markers(m, "iter")
    assert ordered["step"].to_list() == [0, 1, 0]
    overlapping, warn = steps_from_markers(m.with_columns(end=pl.lit(40)), "iter|fwd")
    assert overlapping.height == 4 and "overlap" in warn[0].text


def test_agent_references_of_every_csv_generation() -> None:
    agents = agent_frame([agent_row({"node_id": n, "logical_node_id": n, "type": t,
                                     "logical_node_type_id": i})
                          for n, t, i in ((0, 1, 0), (1, 1, 1), (2, 2, 0), (3, 2, 1))])
    refs = pl.Series(["2", "Agent 3", "GPU 1", "gpu_0", "CPU 1", "Agent 9", ""])
    nodes, bad = resolve_refs(refs, agents)
    assert nodes.to_list() == [2, 3, 3, 2, 1, None, None]
    assert bad == 1
