"""``tracelens critical-path`` on real traces (issue 27): on every rank the composition adds
up to the window exactly, and no what-if saves more than the time it removes from the path;
the engine gives the same result on a Dask cluster; the command's outputs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

import tracelens
from tracelens.analyze.critical_path import CriticalPath, CriticalPathOptions
from tracelens.cli import main
from tracelens.engine import EngineOptions, run
from tracelens.protocol import run_trace
from tracelens.results.encode import encode

from .conftest import SAMPLES, SHARED

TRACES = SHARED / "traces"
SMALL = ["xprof/cpu_4dev_dp_allreduce.xplane.pb", "xprof/mi300x_jax08_conv_8gpu.xplane.pb",
         "kineto/a100_nccl_2rank_rank0.json.gz",
         "kineto/mi300x_inference/sglang_qwen3_8b_decode.json.gz",
         "kineto/sampled_128rank_job"]


def _check(result: object) -> None:
    r = result
    assert r.paths  # type: ignore[attr-defined]
    for p in r.paths:  # type: ignore[attr-defined]
        assert sum(c.ns for c in p.composition) == p.length_ns == \
            p.window.end_ns - p.window.start_ns, (p.host, p.device)
        assert all(c.ns > 0 for c in p.composition)
        assert sum(a.on_path_ns for a in p.activities) <= p.length_ns
    for w in r.what_if:  # type: ignore[attr-defined]
        assert 0 <= w.saved_ns <= w.on_path_ns, w
        assert w.projected_step_ns == w.step_ns - w.saved_ns


@pytest.mark.parametrize("name", SMALL)
def test_real_trace_composition_and_savings(name: str) -> None:
    path = TRACES / name
    if not path.exists():
        pytest.skip(f"{path} not present")
    _check(run_trace(CriticalPath(), tracelens.load(path), CriticalPathOptions()))


def test_waits_across_devices_name_the_last_to_arrive() -> None:
    """The JAX CPU trace (4 devices, one all-reduce per step): GPU3 arrives last, so the
    others' paths wait for it, and it arriving on time is measured to save time."""
    path = TRACES / SMALL[0]
    if not path.exists():
        pytest.skip(f"{path} not present")
    r = run_trace(CriticalPath(), tracelens.load(path), CriticalPathOptions(step=1))
    waits = {c.component for p in r.paths for c in p.composition if c.component.startswith("wait:")}
    assert waits == {"wait:vm/GPU3"}
    best = r.what_if[0]
    assert (best.change, best.target) == ("on_time", "vm/GPU3") and best.saved_ns > 0


def test_engine_on_a_dask_cluster_agrees(tmp_path: Path) -> None:
    files = [SAMPLES / "mi355x_2x8gpu_straggler"]  # two hosts, one file each
    here = run_trace(CriticalPath(), tracelens.load(files), CriticalPathOptions())
    there = run(CriticalPath(), files, CriticalPathOptions(), engine=EngineOptions(workers=2))
    assert encode(here) == encode(there)
    assert {p.host for p in here.paths} and len({p.rank for p in here.paths}) == 2
    _check(here)


def test_command_outputs(tmp_path: Path) -> None:
    trace = SAMPLES / "mi300x_8gpu_llama_step.xplane.pb"
    out = CliRunner().invoke(main, ["critical-path", str(trace), "--format", "json",
                                    "--rank", "0", "--top", "2", "--step", "1",
                                    "--perfetto", str(tmp_path / "p.json")])
    assert out.exit_code == 0, out.output
    doc = json.loads(out.output)
    assert list(doc) == ["paths", "what_if", "notes"]
    assert len(doc["what_if"]) == 2 and len(doc["paths"]) == 8
    p = doc["paths"][0]
    assert list(p) == ["rank", "host", "device", "step", "window", "length_ns", "graph",
                       "composition", "activities"]
    assert sum(c["ns"] for c in p["composition"]) == p["length_ns"]
    assert list(doc["what_if"][0]) == ["change", "target", "step_ns", "projected_step_ns",
                                       "saved_ns", "on_path_ns"]
    flows = [e for e in json.loads((tmp_path / "p.json").read_text())["traceEvents"]
             if e["ph"] in ("s", "f")]
    assert flows and len(flows) % 2 == 0
    md = CliRunner().invoke(main, ["critical-path", str(trace), "--format", "markdown"])
    assert md.exit_code == 0 and "## What if" in md.output
    table = CliRunner().invoke(main, ["critical-path", str(trace)])
    assert table.exit_code == 0 and "Critical path per device" in table.output


@pytest.mark.parametrize("args, problem", [
    (["--step", "9"], "no step 9"),
    (["--window", "("], "not a regular expression"),
    (["--window", "^no such annotation$"], "no host annotation matching"),
])
def test_bad_options_exit_2_with_one_line(args: list[str], problem: str) -> None:
    trace = SAMPLES / "mi300x_8gpu_llama_step.xplane.pb"
    out = CliRunner().invoke(main, ["critical-path", str(trace), *args])
    assert out.exit_code == 2 and problem in out.output
    assert "Traceback" not in out.output
