"""Typed compare and scaling results (issue 14): the JSON is exactly their conversion, and the
keys the CLI adds appear only where it sets them."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from tracelens.analyze.runs.compare import compare, comparison
from tracelens.analyze.runs.scaling import profile, scaling, scaling_transition, transition
from tracelens.cli.commands import main
from tracelens.loading.loader import load
from tracelens.results.encode import encode
from tracelens.results.filters import ActiveFilters
from tracelens.results.runs import Gate

ROOT = Path(__file__).resolve().parents[1]
MI300X = ROOT / "sample_traces" / "mi300x_8gpu_llama_step.xplane.pb"
MI355X = ROOT / "sample_traces" / "mi355x_8gpu_llama_fsdp.xplane.pb"


@pytest.fixture(scope="module")
def profiles():
    return [profile(load([p]), str(p)) for p in (MI300X, MI355X)]


def test_comparison_is_typed_and_its_json_is_the_cli_json(profiles) -> None:
    a, b = profiles
    c = comparison(a, b, top=5)
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.delta_ns = 0.0  # type: ignore[misc]
    assert encode(c) == compare(a, b, top=5)
    plain = encode(c)
    assert "steps_source" not in plain["base"] and "regression" not in plain
    assert "filters" not in plain and len(c.kernels) == 5
    assert c.delta_ns == b.step_ns - a.step_ns and c.busbw == scaling_transition(a, b).busbw
    # what the CLI adds, in the CLI's key order
    from tracelens.analyze.summary.build import summarize
    from tracelens.results.findings import findings_change
    cli = dataclasses.replace(c, base=dataclasses.replace(c.base, steps_source="annotation"),
                              new=dataclasses.replace(c.new, steps_source="annotation"),
                              gate=Gate(1.0, True), findings=findings_change(
                                  summarize(load([MI300X])).findings,
                                  summarize(load([MI355X])).findings))
    res = CliRunner().invoke(main, ["compare", str(MI300X), str(MI355X), "--format", "json",
                                    "--top", "5", "--fail-above", "1", "--quiet"])
    assert res.exit_code == 1
    got = json.loads(res.stdout[:res.stdout.rindex("}") + 1])
    got["base"]["path"], got["new"]["path"] = str(MI300X), str(MI355X)
    assert list(got) == list(encode(cli))
    assert got == json.loads(json.dumps(encode(cli)))


def test_scaling_is_typed_and_causes_carry_findings_only_when_found(profiles) -> None:
    a, b = profiles
    s = scaling([a, b], ["annotation", "annotation"], strong=True)
    t = s.transitions[0]
    assert t.mode == "strong" and t.devices == (8, 8) and s.filters is None
    # scaling adds where the runs differ in hardware or program (run_match) to the
    # transition's own warnings: MI300X -> MI355X is different hardware
    want = transition(a, b, strong=True)
    got = encode(t)
    assert got["warnings"][0].startswith("the runs are on different hardware")
    assert {**got, "warnings": got["warnings"][1:]} == want
    assert sum(c.delta_ns for c in t.causes) == pytest.approx(t.delta_ns)
    j = encode(s)
    assert list(j) == ["runs", "transitions"]
    for c, cj in zip(t.causes, j["transitions"][0]["causes"]):
        assert ("hlo_finding" in cj) == (c.hlo_finding is not None)
    assert j["transitions"][0]["busbw"] == {k: list(v) for k, v in t.busbw.items()}
    assert "filters" in encode(dataclasses.replace(s, filters=ActiveFilters(category=("gemm",))))
