"""A blocking copy or sync call is ``sync``, never launch latency; a trace that replays graphs
gets no graph-launch advice (issue 56, item 4; tracelens.analyze.timeline.blocked)."""

from __future__ import annotations

import json

import numpy as np
import polars as pl
import pytest

from tests.conftest import SHARED, cli
from tracelens.analyze.timeline.blocked import blocked, covered_ns

INFERENCE = SHARED / "traces" / "kineto" / "mi300x_inference"


def _real(name: str):  # noqa: ANN202
    path = INFERENCE / name
    if not path.exists():
        pytest.skip(f"{path} not present")
    return path


def _summary(path) -> dict:  # noqa: ANN001
    return json.loads(cli("summarize", str(path), "--format", "json").stdout)


def test_a_493_ms_blocking_copy_is_sync_not_launch_latency() -> None:
    # SGLang prefill+decode: a kernel launched at 0.05 ms ran at 493.287 ms while its thread
    # sat in a 493.2 ms hipMemcpyWithStream (0.092 -> 493.300 ms); it was "launch_latency"
    # and "graphs save 494.481 ms (50.1%)"
    doc = _summary(_real("sglang_qwen3_8b_prefilldecode.json.gz"))
    comp = {c["component"]: c["ns"] for c in doc["critical_path"]["composition"]}
    assert comp["sync"] > 493_000_000 and comp.get("launch_latency", 0) < 1_000_000
    kinds = [f["kind"] for f in doc["findings"]["items"]]
    assert "graph_launch" not in kinds and "sync" in kinds
    (b,) = [d["timeline"]["idle_breakdown"] for d in doc["devices"]]
    assert b["sync_wait_ns"] > 493_000_000 and b["launch_latency_ns"] < 1_000_000
    assert all(w["change"] != "graph_launch" or w["saved_ns"] < 0.01 * w["step_ns"]
               for w in doc["critical_path"]["what_if"])


def test_a_trace_that_replays_graphs_gets_no_graph_advice() -> None:
    path = _real("sglang_qwen3_8b_decode.json.gz")
    doc = _summary(path)
    assert not [f for f in doc["findings"]["items"] if f["kind"] == "graph_launch"]
    assert any("replays CUDA/HIP graphs (hipGraphLaunch x1)" in n for n in doc["notes"])
    cp = json.loads(cli("critical-path", str(path), "--format", "json").stdout)
    assert not [w for w in cp["what_if"] if w["change"] == "graph_launch"]
    # the 463 ms stall outside the replayed step is said as what it is
    (f,) = [f for f in doc["findings"]["items"] if f["kind"] == "sync"]
    assert "463.035 ms" in f["title"]


def test_covered_time_counts_the_union_of_the_calls_once_per_key() -> None:
    rows = pl.DataFrame({"rank": [0, 0, 1, 0], "start_ns": [0, 50, 0, 200],
                         "end_ns": [100, 150, 100, 210]})
    cover = pl.DataFrame({"rank": [0, 0, 0], "start_ns": [10, 30, 120],
                          "end_ns": [40, 60, 300]})
    # rank 0's union: [10, 60) and [120, 300); rank 1 has no calls
    assert covered_ns(rows, cover, ["rank"]).tolist() == [50, 40, 0, 10]
    assert blocked(rows, cover, ["rank"]).to_list() == [True, False, False, True]
    assert covered_ns(rows.head(0), cover, ["rank"]).dtype == np.int64
