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
