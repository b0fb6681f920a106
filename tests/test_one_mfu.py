"""One MFU (issue 25 C8): with steps, the headline MFU is the median step's, and every output
(JSON, terminal, Markdown, HTML card) shows that one value under the label that says so;
without steps it is over the span."""

from __future__ import annotations

import json
import re
from pathlib import Path

import polars as pl

import tracelens
from tracelens.api.analysis import TraceAnalysis
from tests.conftest import cli, real_trace

GEMM = "mi300x_jax08_gemm.xplane.pb"  # jit_dot(49) runs 3 times in a 9.5 ms span


def _lower_median(values: list[float]) -> float:
    known = sorted(v for v in values if v is not None)
    return known[(len(known) - 1) // 2]


def test_with_steps_the_headline_mfu_is_the_median_steps() -> None:
    trace = tracelens.load(real_trace(GEMM))
    s = tracelens.summarize(trace)
    (dev,) = s["devices"]
    by_step = [st["mfu"] for st in dev["steps"]]
    assert len(by_step) == 3 and s["headline"]["mfu_basis"] == "median step"
    assert s["headline"]["mfu"] == dev["mfu"] == _lower_median(by_step)
    # the span's MFU (idle before, between and after the steps) is another, lower number
    span = dev["model_flops"] / (dev["timeline"]["span_ns"]
                                 * dev["spec"]["peak_tflops"][dev["mfu_dtype"]] * 1e3)
    assert s["headline"]["mfu"] > 2 * span
    # the Python API's per-device MFU is the same number
    (row,) = TraceAnalysis(trace).mfu.iter_rows(named=True)
    assert (round(row["mfu"], 6), row["mfu_basis"]) == (dev["mfu"], "median step")


def test_without_steps_the_mfu_is_over_the_span() -> None:
    trace = tracelens.load(real_trace(GEMM))
    trace.steps = trace.steps.head(0)
    trace.events = trace.events.with_columns(step=pl.lit(None, trace.events["step"].dtype))
    s = tracelens.summarize(trace)
    (dev,) = s["devices"]
    span = dev["model_flops"] / (dev["timeline"]["span_ns"]
                                 * dev["spec"]["peak_tflops"][dev["mfu_dtype"]] * 1e3)
    assert s["headline"]["mfu_basis"] == "span"
    assert abs(s["headline"]["mfu"] - span) < 1e-6


def test_every_output_shows_the_same_mfu(tmp_path: Path) -> None:
    path = str(real_trace(GEMM))
    res = cli("summarize", "--format", "json", path)
    assert res.returncode == 0, res.stderr
    mfu = json.loads(res.stdout)["headline"]["mfu"]
    shown = f"{100 * mfu:.1f}%"
    term = cli("summarize", path).stdout  # the short headline, then the --all table
    assert re.search(rf"MFU \(median step\) {re.escape(shown)}", term)
    full = cli("summarize", path, "--all").stdout
    assert re.search(rf"MFU \(median step\)\s*│\s*{re.escape(shown)}", full)
    md = cli("summarize", "--format", "markdown", path).stdout
    assert re.search(rf"MFU \(median step\) {re.escape(shown)}", md)
    md = cli("summarize", "--format", "markdown", "--all", path).stdout
    assert re.search(rf"\| MFU \(median step\) \| {re.escape(shown)} \|", md)
    out = tmp_path / "r.html"
    assert cli("report", path, "-o", str(out)).returncode == 0
    card = re.search(r'id="mfu"><span class="k">([^<]*)</span><span class="v">([^<]*)<',
                     out.read_text("utf-8"))
    assert card and card.groups() == ("MFU (median step)", shown)


def test_per_step_mfu_without_clipping_equals_clipping() -> None:
    """When no activity crosses a step boundary (``timeline.step_rows``), the per-step MFU
    takes each model kernel's own step instead of clipping: the same frame, zero-length
    kernels left out as clipping leaves them out. Checked where it applies (the samples)
    and with a zero-length kernel planted."""
    from polars.testing import assert_frame_equal

    from tests.conftest import SAMPLES
    from tracelens.analyze.compute.roofline import device_specs, mfu, model_kernels, spec_frame
    from tracelens.analyze.timeline.breakdown import device_axis, step_rows

    for path in (SAMPLES / "mi355x_8gpu_llama_fsdp.xplane.pb", SAMPLES / "mi355x_2x8gpu_straggler",
                 real_trace("mi300x_jax08_gemm.xplane.pb")):
        t = tracelens.load(path)
        ev = t.events
        first = ev.filter(pl.col("category") == "gemm").head(1)
        ev = pl.concat([ev, first.with_columns(end_ns=pl.col("start_ns"))])  # zero length
        assert step_rows(ev, t.steps, device_axis(ev)) is not None
        specs = spec_frame(device_specs(t.devices))
        model = model_kernels(ev)
        assert_frame_equal(mfu(ev, specs, t.steps, model, inside=True),
                           mfu(ev, specs, t.steps, model))


def test_per_step_mfu_without_clipping_ignores_a_stale_step_column() -> None:
    """A ``--time`` filter cuts activities after their steps were assigned: a kernel that
    started in step 0 and is cut to start inside step 1 still says step 0. The per-step MFU
    without clipping finds each kernel's window itself, as clipping does."""
    from polars.testing import assert_frame_equal

    from tracelens.analyze.compute.roofline import mfu, spec_frame
    from tracelens.analyze.timeline.breakdown import device_axis, step_rows
    from tracelens.core.model import EVENT_SCHEMA, STEP_SCHEMA, conform

    ev = conform(pl.DataFrame({
        "host": ["h"] * 3, "rank": [0] * 3, "device": [0] * 3, "stream": [1] * 3,
        "kind": ["kernel"] * 3, "name": ["Cijk_a", "Cijk_b", "Cijk_c"],
        "category": ["gemm"] * 3, "start_ns": [110, 140, 300], "end_ns": [130, 160, 320],
        "flops": [1e6, 2e6, 4e6], "dtype": ["bf16"] * 3, "step": [0, 1, None]}), EVENT_SCHEMA)
    steps = conform(pl.DataFrame({"rank": [0], "step": [1], "start_ns": [110],
                                  "end_ns": [200], "source": ["step_num"]}), STEP_SCHEMA)
    assert step_rows(ev, steps, device_axis(ev)) is not None
    specs = spec_frame({("h", 0, 0): None})
    fast = mfu(ev, specs, steps, inside=True)
    assert_frame_equal(fast, mfu(ev, specs, steps))
    assert fast["model_flops"].to_list() == [3e6]
