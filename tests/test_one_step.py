"""One step (docs/definitions.md#the-headline-step): the headline's median step is a step that
ran, never an interpolation, and the findings and the critical path are of that same step;
a step cut by the profiler at a trace's edge is partial, left out and said."""

from __future__ import annotations

import polars as pl
import pytest

import tracelens
from tests.conftest import SAMPLES, SHARED, real_trace
from tracelens.loading.step_choice import headline_step, hosts_disagree, partial_rows

KINETO = SHARED / "traces" / "kineto"


def _spans(steps: pl.DataFrame) -> dict[int, int]:
    """Each step's longest rank's span."""
    return dict(steps.group_by("step").agg((pl.col("end_ns") - pl.col("start_ns")).max())
                .iter_rows())


def _one_step(path) -> tuple[dict, dict[int, int]]:  # noqa: ANN001
    trace = tracelens.load(path)
    return tracelens.summarize(trace), _spans(trace.steps)


def test_an_even_count_of_steps_gives_the_lower_middle_step_not_their_mean() -> None:
    # two steps of 31.379 and 42.6 ms: the median was 36.990 ms, a time no step took
    s, spans = _one_step(SAMPLES / "h100_8gpu_moe_ddp.xplane.pb")
    assert sorted(spans.values())[0] == 31378942 and len(spans) == 2
    assert s["headline"]["median_step_ns"] == 31378942
    assert s["critical_path"]["step"] == s["findings"]["step"] == 0
    assert s["findings"]["step_ns"] == s["headline"]["median_step_ns"]


def test_the_findings_are_of_the_headlines_step() -> None:
    # conv 8 GPU: the findings solved step 2 (4.169 ms) under a 26.163 ms headline median
    s, spans = _one_step(real_trace("mi300x_jax08_conv_8gpu.xplane.pb"))
    assert s["headline"]["median_step_ns"] == spans[1] == 26162553
    assert s["findings"]["step"] == s["critical_path"]["step"] == 1
    assert s["findings"]["step_ns"] == s["critical_path"]["step_ns"] == 26162553


@pytest.mark.parametrize("name", ["h100_8gpu_moe_ddp.xplane.pb",
                                  "mi355x_8gpu_llama_fsdp.xplane.pb",
                                  "mi300x_8gpu_llama_step.xplane.pb", "tpu/sync.xplane.pb",
                                  "mi355x_2x8gpu_straggler"])
def test_on_every_sample_the_headline_step_ran_and_the_path_is_of_it(name: str) -> None:
    s, spans = _one_step(SAMPLES / name)
    assert s["headline"]["median_step_ns"] in spans.values()
    assert s["findings"]["step_ns"] == s["headline"]["median_step_ns"]


def test_a_truncated_last_step_is_partial_and_said() -> None:
    path = KINETO / "mi250_rocm62_minitoy_train.json.gz"
    if not path.exists():
        pytest.skip(f"{path} not present")
    trace = tracelens.load(path)
    s = tracelens.summarize(trace)
    # step 2: a 0.049 ms CPU window after an 8.912 ms step: no step, no median, no MFU
    assert trace.steps["step"].to_list() == [1]
    assert s["headline"]["steps"] == 1 and s["headline"]["median_step_ns"] == 8911887
    assert any("partial step" in n and "step 2 (0.049 ms)" in n for n in s["notes"])


def _steps(rows: list[tuple[int, int, int, int]]) -> pl.DataFrame:
    return pl.DataFrame(rows, schema={"rank": pl.Int32, "step": pl.Int32,
                                      "start_ns": pl.Int64, "end_ns": pl.Int64}, orient="row")


def test_only_short_steps_at_the_edges_are_partial() -> None:
    st = _steps([(0, 0, 0, 4), (0, 1, 10, 20), (0, 2, 20, 23), (0, 3, 30, 40),
                 (0, 4, 40, 50), (0, 5, 50, 51), (1, 0, 0, 10), (1, 1, 10, 20)])
    # rank 0: median span 6.5; step 0 (4) is over half of it, step 2 (3) is not at an edge
    assert partial_rows(st).select("rank", "step").rows() == [(0, 5)]
    assert partial_rows(st.head(1)).height == 0


def test_the_headline_step_is_the_lower_middle_by_mean_span() -> None:
    st = _steps([(0, 0, 0, 10), (0, 1, 10, 30), (0, 2, 30, 45), (0, 3, 45, 85),
                 (1, 0, 0, 30), (1, 1, 0, 10), (1, 2, 0, 15), (1, 3, 0, 40)])
    # mean spans: step 0 20, 1 15, 2 15, 3 40 -> by (span, step): 1, 2, 0, 3 -> step 2
    assert headline_step(st) == 2
    assert headline_step(st.head(0)) is None


def test_hosts_that_picked_different_steps_are_not_solved_together() -> None:
    win = pl.DataFrame({"host": ["a", "b"], "rank": [0, 1], "step": [3, 4]})
    assert "step 3 (a, ...); step 4 (b, ...)" in hosts_disagree(win)  # type: ignore[operator]
    assert hosts_disagree(win.with_columns(step=pl.lit(3))) is None
