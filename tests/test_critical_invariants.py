"""Invariants every critical path must hold, on every bundled sample and every real trace in
../shared/traces (issue 45, item 4). A violated invariant is a bug in the analysis, never a
warning:

- the path's pieces add up to its window exactly;
- each device component's time on the path (a category, or ``communication`` for
  collectives) is at most that component's time in the window on the devices the path visits
  (the path cannot hold more GEMM than the devices ran);
- a what-if saves at most the time its target has on the paths (``on_path_ns``), and never
  makes the step longer.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

import tracelens
from tracelens.analyze.critical.path import CriticalPath, CriticalPathOptions
from tracelens.engine.protocol import run_trace

from .conftest import SAMPLES, SHARED

TRACES = SHARED / "traces"
SAMPLE_FILES = [*sorted(p.name for p in SAMPLES.glob("*.xplane.pb")), "mi355x_2x8gpu_straggler",
                *sorted(f"tpu/{p.name}" for p in (SAMPLES / "tpu").glob("*.xplane.pb"))]
REAL_FILES = [
    "xprof/mi300x_jax08_gemm.xplane.pb", "xprof/mi300x_jax08_attention.xplane.pb",
    "xprof/mi300x_jax08_conv_8gpu.xplane.pb", "xprof/cpu_4dev_dp_allreduce.xplane.pb",
    "kineto/a100_nccl_2rank_rank0.json.gz", "kineto/mi250_rocm62_minitoy_train.json.gz",
    "kineto/sampled_128rank_job", "kineto/mi300x_inference/sglang_qwen3_8b_decode.json.gz",
    "kineto/mi300x_inference/vllm_decode_full_graph.json.gz",
    "kineto/mi300x_inference/xdit_flux1_aiter_sage_rank0.json.gz",
    "kineto/mi300x_inference/normalization_layers_2gpu.json.gz",
    "rocprof/mi350x_908_results.json.gz",
]


def _check(path: Path) -> None:
    t = tracelens.load(path)
    r = run_trace(CriticalPath(), t, CriticalPathOptions(activities="all"))
    assert r.paths, path
    ev = t.events
    for p in r.paths:
        comp = {c.component: c.ns for c in p.composition}
        assert sum(comp.values()) == p.length_ns == p.window.end_ns - p.window.start_ns
        assert all(v > 0 for v in comp.values())
        visited = {(a.host, a.device) for a in p.activities if a.device is not None}
        if not visited:
            continue
        w0, w1 = p.window.start_ns, p.window.end_ns
        keys = pl.DataFrame({"host": [h for h, _ in visited], "device": [d for _, d in visited]},
                            schema={"host": pl.String, "device": pl.Int32})
        mine = ev.with_columns(pl.col("host").cast(pl.String)).join(
            keys, on=["host", "device"]).with_columns(
            ns=(pl.min_horizontal("end_ns", pl.lit(w1)) - pl.max_horizontal(
                "start_ns", pl.lit(w0))).clip(lower_bound=0),
            component=pl.when(pl.col("category").cast(pl.String) == "collective").then(
                pl.lit("communication")).otherwise(pl.col("category").cast(pl.String)))
        ran = dict(mine.group_by("component").agg(pl.col("ns").sum()).iter_rows())
        for k, v in comp.items():
            if k in ran or k in ("gemm", "attention", "convolution", "elementwise",
                                 "reduction", "memory", "other", "communication"):
                assert v <= ran.get(k, 0) + 1, (path.name, p.host, p.device, k, v, ran.get(k))
    for w in r.what_if:
        assert 0 <= w.saved_ns <= w.on_path_ns + 1, (path.name, w)
        assert w.projected_step_ns <= w.step_ns


@pytest.mark.parametrize("name", SAMPLE_FILES)
def test_invariants_on_the_samples(name: str) -> None:
    _check(SAMPLES / name)


@pytest.mark.parametrize("name", REAL_FILES)
def test_invariants_on_the_real_traces(name: str) -> None:
    path = TRACES / name
    if not path.exists():
        pytest.skip(f"{path} not present (shared/ is not beside this checkout)")
    _check(path)
