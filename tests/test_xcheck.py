"""``tracelens xcheck``: our kernel table against XProf's kernel_stats, in the tool."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner

import tracelens
from tracelens.analyze import xcheck
from tracelens.cli.commands import main

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


def _as_read(path: Path) -> dict[str, tuple[int, float]]:
    """What XProf's kernel_stats gives for a file, taken from our own reading of it (our
    counts and times before the clip): a stand-in that agrees, so a test needs no XProf."""
    t = tracelens.load(path)
    return {r.name: (r.ours_count, r.ours_us)
            for r in xcheck.compare_kernels(t.events, {}, t.meta.clips)}


def _job_folder(tmp_path: Path) -> Path:
    """A folder as a job leaves it: two GPU XSpace files (one a level down), a Kineto file
    and an XLA:CPU XSpace file beside them."""
    import shutil

    d = tmp_path / "job"
    (d / "host1").mkdir(parents=True)
    shutil.copy(SAMPLE, d / "host0.xplane.pb")
    _overlapping_kernels(d / "host1" / "overlap.xplane.pb")
    shutil.copy(Path(__file__).resolve().parent / "data" / "jax_async" / "async_steps.xplane.pb",
                d / "cpu.xplane.pb")
    (d / "rank0.json").write_text(json.dumps({"traceEvents": [
        {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1.0, "dur": 2.0,
         "args": {"device": 0, "stream": 7, "correlation": 1}}]}))
    return d


def test_a_folder_checks_each_xspace_file(tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 47: ``xcheck DIR`` said "cannot read: Is a directory"; now each XSpace file of the
    folder is checked against XProf's kernel_stats of that file, its rows naming it, and the
    files it cannot check are listed with why."""
    d = _job_folder(tmp_path)
    asked: list[str] = []

    def theirs(path: Path) -> dict[str, tuple[int, float]]:
        asked.append(path.name)
        return _as_read(path)

    monkeypatch.setattr(xcheck, "xprof_kernel_stats", theirs)
    r = CliRunner().invoke(main, ["xcheck", str(d), "--format", "json"])
    assert r.exit_code == 0, r.stderr
    out = json.loads(r.stdout)
    assert sorted(asked) == ["host0.xplane.pb", "overlap.xplane.pb"]
    files = {row["file"] for row in out["kernels"]}
    assert files == {"host0.xplane.pb", "host1/overlap.xplane.pb"}
    n0 = tracelens.load(SAMPLE).events.filter(pl.col("kind") == "kernel")["name"].n_unique()
    assert out["total"] == out["agree"] == n0 + 2
    assert out["clipped"]["us"] == 0.193  # the second file's clip, added back as for a file
    skipped = {s["file"]: s["reason"] for s in out["skipped"]}
    assert set(skipped) == {"cpu.xplane.pb", "rank0.json"}
    assert "XLA:CPU" in skipped["cpu.xplane.pb"] and "kineto" in skipped["rank0.json"]
    md = CliRunner().invoke(main, ["xcheck", str(d), "--format", "markdown"]).stdout
    assert "| file | kernel |" in md and "not checked: cpu.xplane.pb" in md


def test_a_difference_in_one_file_of_a_folder_exits_1(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    d = _job_folder(tmp_path)

    def theirs(path: Path) -> dict[str, tuple[int, float]]:
        got = _as_read(path)
        if path.name == "overlap.xplane.pb":
            got["loop_mul_fusion.kd"] = (2, 0.5)
        return got

    monkeypatch.setattr(xcheck, "xprof_kernel_stats", theirs)
    r = CliRunner().invoke(main, ["xcheck", str(d), "--format", "json"])
    assert r.exit_code == 1
    first = json.loads(r.stdout)["kernels"][0]
    assert (first["file"], first["kernel"], first["agrees"]) == (
        "host1/overlap.xplane.pb", "loop_mul_fusion.kd", False)


def test_a_folder_with_nothing_to_check_is_one_error(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Exit 2 and one line naming the folder and why each file it holds cannot be checked."""
    monkeypatch.setattr(xcheck, "xprof_kernel_stats", lambda path: {})
    d = _job_folder(tmp_path)
    (d / "host0.xplane.pb").unlink()
    (d / "host1" / "overlap.xplane.pb").unlink()
    r = CliRunner().invoke(main, ["xcheck", str(d)])
    assert r.exit_code == 2 and r.stdout == ""
    assert r.stderr.startswith(f"error: {d}: ") and len(r.stderr.strip().splitlines()) == 1
    assert "cpu.xplane.pb: XProf's kernel_stats lists GPU kernels only" in r.stderr
    assert "rank0.json: a kineto trace, not XSpace" in r.stderr
    (d / "cpu.xplane.pb").unlink()
    r = CliRunner().invoke(main, ["xcheck", str(d)])
    assert r.exit_code == 2 and "holds none (rank0.json: a kineto trace" in r.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    r = CliRunner().invoke(main, ["xcheck", str(empty)])
    assert r.exit_code == 2 and "holds no trace files" in r.stderr


def test_xprof_itself_on_a_folder(tmp_path: Path) -> None:
    pytest.importorskip("xprof", reason="XProf (tracelens[xprof]) is not installed")
    d = tmp_path / "job"
    (d / "a").mkdir(parents=True)
    _overlapping_kernels(d / "a" / "h.xplane.pb")
    _overlapping_kernels(d / "b.xplane.pb")
    r = CliRunner().invoke(main, ["xcheck", str(d), "--format", "json"])
    assert r.exit_code == 0, r.stdout
    out = json.loads(r.stdout)
    assert out["agree"] == out["total"] == 4 and out["skipped"] == []
    assert {row["file"] for row in out["kernels"]} == {"a/h.xplane.pb", "b.xplane.pb"}
