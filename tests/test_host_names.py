"""Issue 25 A4: host names. A trace file that names no host is its file name less the trace
suffix, dots kept (XSpace as Kineto: ``node.a_0.xplane.pb`` was host ``node``, so two such
files collided as ``node#0``/``node#1``); ranks of a trace that records no host name
(Kineto: ``rank<N>`` or the file name) are counted as ranks, not hosts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

import tracelens
from parsers.xplane_schema import xspace_class
from tracelens.analyze.summary.build import summary_partial
from tracelens.analyze.summary.merge import merge_partials
from tracelens.cli.commands import main
from tracelens.core.model import host_from_file_name
from tracelens_dev.writers.xspace import Activity, build_xspace
from tests.conftest import SAMPLES, SHARED

KINETO_JOB = SHARED / "traces" / "kineto" / "sampled_128rank_job"


def _unnamed_xspace(path: Path, dur: int = 50) -> Path:
    """A one-kernel XSpace whose ``hostnames`` is empty (the reader falls back on the file);
    ``dur`` tells two hosts' files apart (byte-identical files are one file read once)."""
    space = xspace_class()()
    space.ParseFromString(build_xspace([Activity(0, 1, "kernel_a", 100, dur)]))
    del space.hostnames[:]
    path.write_bytes(space.SerializeToString())
    return path


@pytest.mark.parametrize("name, host", [
    ("node.a_0.xplane.pb", "node.a_0"), ("h100_Qwen1.5-0.5B.xplane.pb.gz", "h100_Qwen1.5-0.5B"),
    ("node1.cluster_4242.1700000000123.pt.trace.json.gz", "node1.cluster_4242"),
    ("rank0.json", "rank0"), ("plain", "plain"),
])
def test_host_from_file_name_keeps_the_dots(name: str, host: str) -> None:
    assert host_from_file_name(name) == host


def test_xspace_host_from_its_file_name_keeps_its_dots(tmp_path: Path) -> None:
    files = [_unnamed_xspace(tmp_path / f"node.{x}_{i}.xplane.pb", 50 + i)
             for i, x in enumerate("ab")]
    trace = tracelens.load(files)
    assert sorted(trace.devices["host"].unique()) == ["node.a_0", "node.b_1"]  # not node#0/1
    parts = [summary_partial(tracelens.load([f])) for f in files]
    merged = merge_partials(parts)
    assert {d.host for d in merged.device_rows} == {"node.a_0", "node.b_1"}


def test_kineto_ranks_are_ranks_not_hosts(tmp_path: Path) -> None:
    if not KINETO_JOB.exists():
        pytest.skip(f"real trace {KINETO_JOB} not present")
    r = CliRunner().invoke(main, ["summarize", str(KINETO_JOB)])
    assert r.exit_code == 0 and "2 active of 2 devices on 2 ranks" in r.output, r.output
    r = CliRunner().invoke(main, ["summarize", str(KINETO_JOB), "--format", "json"])
    h = json.loads(r.output)["headline"]
    assert (h["hosts"], h["hosts_named"]) == (2, False)
    html = tmp_path / "r.html"
    r = CliRunner().invoke(main, ["report", str(KINETO_JOB), "-o", str(html)])
    assert r.exit_code == 0 and " active of 2 on 2 ranks" in html.read_text()
    # hosts an XSpace names stay hosts
    r = CliRunner().invoke(main, ["summarize", str(SAMPLES / "mi355x_2x8gpu_straggler")])
    assert r.exit_code == 0 and "16 active of 16 devices on 2 hosts" in r.output, r.output
