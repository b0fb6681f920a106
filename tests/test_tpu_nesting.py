"""On TPU, as on XLA:CPU, a ``while``/``conditional``/``call`` op around its body is nesting:
its body's ops are the work, and the critical path goes through them (issue 56, item 3). The
path also goes on past a gap nothing in the trace explains (a program boundary), the gap as
idle, instead of calling the whole window before it idle (multi.xplane.pb: "90% of the
critical path is idle" on a chip 99.8% busy)."""

from __future__ import annotations

from pathlib import Path

import tracelens
from tests.conftest import SAMPLES
from tracelens_dev.writers.xspace import TPU_V5E_STATS, Activity, _tpu_op, build_xspace

BF16 = "bf16[1024,1024]{1,0}"
STEPS, ITERS, CONV, LOOP, GAP, BOUNDARY, OPT = 3, 4, 300_000, 50_000, 40_000, 30_000, 80_000
PRE = 2_000  # the while's own time before its body (XLA:CPU's real ones: a few µs)


def _scan_trace(tmp_path: Path, gap: int = GAP) -> Path:
    """One TPU v5e chip, 3 steps; each a ``while`` (2 µs its own) around 4 iterations of a
    convolution fusion and a loop fusion, then, 30 µs later (another program: nothing in
    the trace says why it waits), an optimizer fusion; 40 µs between steps."""
    acts: list[Activity] = []
    t = 1_000_000
    for step in range(STEPS):
        s0 = t
        body = PRE + ITERS * (CONV + LOOP)
        acts.append(_tpu_op("while.7", BF16, "while", "while", 0, 0, "XLA Ops", t, body, 0))
        t += PRE
        for _ in range(ITERS):
            acts.append(_tpu_op("convolution_fusion.3", BF16, "fusion", "convolution fusion",
                                2 * 1024**3, 6 << 20, "XLA Ops", t, CONV, 0))
            t += CONV
            acts.append(_tpu_op("add_fusion.4", BF16, "fusion", "loop fusion", 1024**2,
                                6 << 20, "XLA Ops", t, LOOP, 0, ", kind=kLoop"))
            t += LOOP
        t += BOUNDARY
        acts.append(_tpu_op("adam_fusion.9", BF16, "fusion", "loop fusion", 1024**2,
                            6 << 20, "XLA Ops", t, OPT, 0, ", kind=kLoop"))
        t += OPT
        acts.append(Activity(0, 1, str(step), s0, t - s0, line_name="Steps"))
        t += gap
    path = tmp_path / f"scan{gap}.xplane.pb"
    path.write_bytes(build_xspace(acts, host="tpu0", device_plane="/device:TPU:",
                                  device_stats={0: TPU_V5E_STATS}))
    return path


def test_a_tpu_while_is_nesting_and_its_body_is_on_the_path(tmp_path: Path) -> None:
    trace = tracelens.load(_scan_trace(tmp_path))
    assert not any("same-stream overlaps" in w for w in trace.meta.warnings)
    assert any(n.code == "load.nested" for n in trace.meta.notices)
    s = tracelens.summarize(trace)
    cp = s["critical_path"]
    comp = {c["component"]: c["ns"] for c in cp["composition"]}
    (st,) = [x for x in s["devices"][0]["steps"] if x["step"] == cp["step"]]
    # the body's convolution fusions (GEMMs on TPU) are the work on the path, every one
    assert comp["gemm"] == ITERS * CONV and comp["other"] == PRE  # (the while's own 2 µs)
    # the path's idle is the chip's own idle in the step (the program boundary), no more
    assert comp.get("idle", 0) <= st["timeline"]["idle_ns"] == BOUNDARY
    assert not [f for f in s["findings"]["items"] if f["kind"] == "idle"]


def test_the_multi_program_tpu_sample_has_its_gemms_on_the_path() -> None:
    # busy 99.8%; the path read "idle 11.142 of 12.378 ms" and had no GEMM
    s = tracelens.summarize(tracelens.load(SAMPLES / "tpu" / "multi.xplane.pb"))
    cp = s["critical_path"]
    comp = {c["component"]: c["ns"] for c in cp["composition"]}
    assert comp["gemm"] > 0.75 * cp["step_ns"]
    (st,) = [x for x in s["devices"][0]["steps"] if x["step"] == cp["step"]]
    # the path's idle: the chip's idle in the step plus what in-flight copies cover (the
    # async lanes are no path nodes): tens of µs of a 12.378 ms step
    assert comp.get("idle", 0) < st["timeline"]["idle_ns"] + 10_000
    assert not [f for f in s["findings"]["items"] if f["kind"] == "idle"]


def test_exposed_memory_is_a_projected_finding() -> None:
    # multi.xplane.pb: 10.4% of the chip's time is memory copies under no compute; the
    # what-if runs the path's copies in no time (overlapped), solved as the others
    s = tracelens.summarize(tracelens.load(SAMPLES / "tpu" / "multi.xplane.pb"))
    (f,) = [f for f in s["findings"]["items"] if (f["kind"], f["target"]) == ("hide", "memory")]
    (w,) = [w for w in s["critical_path"]["what_if"] if (w["change"], w["target"])
            == ("hide", "memory")]
    assert f["saved_ns"] == w["saved_ns"] > 0.05 * w["step_ns"]
    assert w["saved_ns"] <= w["on_path_ns"]  # it moves at most the path's copies
    assert f"{s['headline']['totals']['exposed_memory_ns'] / 1e6:,.3f} of" in f["evidence"]


def test_a_host_pause_between_steps_is_a_finding_with_its_size(tmp_path: Path) -> None:
    # 5 ms of idle between 1.51 ms device steps (the host sleeps, logs, loads input): the
    # steps' windows hold none of it, so no path does; the finding says the wait per step
    step = PRE + ITERS * (CONV + LOOP) + BOUNDARY + OPT
    s = tracelens.summarize(tracelens.load(_scan_trace(tmp_path, gap=5_000_000)))
    assert s["headline"]["median_step_ns"] == step
    (f,) = [f for f in s["findings"]["items"] if f["kind"] == "host_pause"]
    assert "the device waits 5.000 ms per step for the host" in f["title"]
    assert f"steps start every {(step + 5_000_000) / 1e6:,.3f} ms" in f["evidence"]
    assert f"come every {step / 1e6:,.3f} ms" in f["evidence"]
    # 40 µs between steps (3% of a step): no finding
    s = tracelens.summarize(tracelens.load(_scan_trace(tmp_path)))
    assert not [f for f in s["findings"]["items"] if f["kind"] == "host_pause"]
