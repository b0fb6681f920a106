"""``scaling`` names the HLO finding behind an exposed-communication cause (issue 15)."""

from __future__ import annotations

from dataclasses import replace

import tracelens
from tracelens.analyze.runs.scaling import profile, transition

from .conftest import SAMPLES


def test_exposed_allreduce_cause_names_the_loop_finding() -> None:
    b = profile(tracelens.load(SAMPLES / "hlo" / "planted.xplane.pb"), "planted")
    assert "loop while.15" in b.hlo_findings["all-reduce"]
    # the same run without its exposed all-reduce: all the added time is that component
    grown = b.components["exposed_comm:all-reduce"]
    a = replace(b, path="base", step_ns=b.step_ns - grown,
                components={**b.components, "exposed_comm:all-reduce": 0.0}, hlo_findings={})
    t = transition(a, b)
    cause = next(c for c in t["causes"] if c["component"] == "exposed_comm:all-reduce")
    assert cause["share"] == 1.0
    assert cause["hlo_finding"] == b.hlo_findings["all-reduce"]
    assert any("psum.13" in line and "4-iteration loop" in line for line in t["verdict"])


def test_no_hlo_no_finding() -> None:
    t = tracelens.load(SAMPLES / "mi300x_8gpu_llama_step.xplane.pb")
    assert profile(t.__class__(events=t.events, host_events=t.host_events, steps=t.steps,
                               devices=t.devices, meta=t.meta)).hlo_findings == {}
