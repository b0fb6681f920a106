"""``tracelens xcheck``: our kernel table against XProf's kernel_stats, in the tool."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

import tracelens
from tracelens import xcheck
from tracelens.cli import main

from .conftest import SAMPLES

SAMPLE = SAMPLES / "h100_8gpu_moe_ddp.xplane.pb"


def test_sample_agrees_with_xprof() -> None:
    pytest.importorskip("xprof", reason="XProf (tracelens[xprof]) is not installed")
    r = CliRunner().invoke(main, ["xcheck", str(SAMPLE), "--format", "json"])
    assert r.exit_code == 0, r.stderr
    out = json.loads(r.stdout)
    kernels = tracelens.load(SAMPLE).events.filter(tracelens.load(SAMPLE).events["kind"]
                                                   == "kernel")["name"].n_unique()
    assert out["total"] == out["agree"] == kernels


def test_a_difference_exits_1(monkeypatch: pytest.MonkeyPatch) -> None:
    t = tracelens.load(SAMPLE)
    theirs = {r.name: (r.ours_count, r.ours_us) for r in xcheck.compare_kernels(t.events, {})}
    name = sorted(theirs)[0]
    theirs[name] = (theirs[name][0] + 1, theirs[name][1])
    monkeypatch.setattr(xcheck, "xprof_kernel_stats", lambda path: theirs)
    r = CliRunner().invoke(main, ["xcheck", str(SAMPLE), "--format", "json"])
    assert r.exit_code == 1
    rows = json.loads(r.stdout)["kernels"]
    assert rows[0]["kernel"] == name and rows[0]["agrees"] is False
    assert all(row["agrees"] for row in rows[1:])


def test_without_xprof_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "xprof" else real(name, *a))
    r = CliRunner().invoke(main, ["xcheck", str(SAMPLE)])
    assert r.exit_code == 2 and "pip install 'tracelens[xprof]'" in r.stderr


def test_not_xspace(tmp_path: Path) -> None:
    f = tmp_path / "x.csv"
    f.write_text("a,b\n1,2\n")
    r = CliRunner().invoke(main, ["xcheck", str(f)])
    assert r.exit_code == 2 and r.stderr.startswith("error: ")


def _overlapping_kernels(path: Path) -> Path:
    """One GPU stream whose second kernel starts 193 ns before the first one ends (the
    loader clips the first to 607 ns); XProf keeps the recorded 800 ns."""
    from tracelens_dev.writers.xspace import Activity, build_xspace

    kd = "regs:32 static_shared:0 dynamic_shared:0 grid:1,1,1 block:256,1,1 private_mem:0"

    def kernel(name: str, start: int, dur: int, corr: int) -> Activity:
        return Activity(0, 1, f"{name}.kd", start, dur,
                        {"hlo_op": name, "kernel_details": kd, "correlation_id": corr})

    acts = [kernel("loop_add_fusion", 1_000, 800, 1), kernel("loop_mul_fusion", 1_607, 500, 2),
            kernel("loop_add_fusion", 3_000, 800, 3)]
    path.write_bytes(build_xspace(acts, steps=[(0, 900, 4_000)]))
    return path


def test_same_stream_clip_is_added_back_exactly(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """XProf's own numbers for this file (2 × 800 ns, 500 ns), without XProf: our times are
    compared as read, the 193 ns the clip took shown apart, and said."""
    f = _overlapping_kernels(tmp_path / "overlap.xplane.pb")
    theirs = {"loop_add_fusion.kd": (2, 1.6), "loop_mul_fusion.kd": (1, 0.5)}
    monkeypatch.setattr(xcheck, "xprof_kernel_stats", lambda path: theirs)
    r = CliRunner().invoke(main, ["xcheck", str(f), "--format", "json"])
    assert r.exit_code == 0, r.stdout
    out = json.loads(r.stdout)
    rows = {row["kernel"]: row for row in out["kernels"]}
    assert rows["loop_add_fusion.kd"]["ours_us"] == 1.6
    assert rows["loop_add_fusion.kd"]["clipped_us"] == 0.193
    assert rows["loop_mul_fusion.kd"]["clipped_us"] == 0.0
    assert out["clipped"]["kernels"] == 1 and out["clipped"]["us"] == 0.193
    assert "before the same-stream clip" in out["clipped"]["note"]
    text = CliRunner().invoke(main, ["xcheck", str(f), "--format", "markdown"]).stdout
    assert "the clip took 0.193 µs from 1 kernel name(s)" in text


def test_clipped_times_are_not_accepted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The clip is added back, not allowed as a tolerance: a tool that reported our clipped
    1.407 µs would disagree."""
    f = _overlapping_kernels(tmp_path / "overlap.xplane.pb")
    theirs = {"loop_add_fusion.kd": (2, 1.407), "loop_mul_fusion.kd": (1, 0.5)}
    monkeypatch.setattr(xcheck, "xprof_kernel_stats", lambda path: theirs)
    r = CliRunner().invoke(main, ["xcheck", str(f), "--format", "json"])
    assert r.exit_code == 1
    assert json.loads(r.stdout)["kernels"][0]["kernel"] == "loop_add_fusion.kd"


def test_xprof_itself_agrees_despite_the_clip(tmp_path: Path) -> None:
    pytest.importorskip("xprof", reason="XProf (tracelens[xprof]) is not installed")
    f = _overlapping_kernels(tmp_path / "overlap.xplane.pb")
    r = CliRunner().invoke(main, ["xcheck", str(f), "--format", "json"])
    assert r.exit_code == 0, r.stdout
    assert json.loads(r.stdout)["clipped"]["us"] == 0.193


def test_a_cpu_trace_is_refused_with_the_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    """A real XLA:CPU trace: XProf's kernel_stats lists GPU kernels only (it returns no row
    for the trace's CPU ops), so every kernel 'disagreed' before; now exit 2, saying why."""
    f = Path(__file__).resolve().parent / "data" / "jax_async" / "async_steps.xplane.pb"
    monkeypatch.setattr(xcheck, "xprof_kernel_stats", lambda path: {})
    r = CliRunner().invoke(main, ["xcheck", str(f)])
    assert r.exit_code == 2, r.stdout
    assert r.stderr.startswith("error: ") and len(r.stderr.strip().splitlines()) == 1
    assert "CPU" in r.stderr and "kernel_stats" in r.stderr
