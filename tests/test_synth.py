"""Synthetic traces: every committed sample and random scenarios, written as XSpace and read back
by ``tracelens.load`` + ``tracelens.summarize``, reproduce their ground truth exactly (ns)."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tracelens
from tests.conftest import SAMPLES
from tests.synth_helpers import (assert_busbw_matches_truth, assert_costs_match_truth,
                                 timeline_numbers,
                                 assert_mfu_matches_truth, assert_step_categories_match,
                                 assert_summary_matches_truth, by_category, collective_rows,
                                 write_and_load)
from tracelens.core.model import CATEGORIES
from tracelens_dev.synth import Scenario, Straggler, build
from tracelens_dev.synth.samples import SAMPLES as SAMPLE_DEFS
from tracelens_dev.synth.truth import sweep

SAMPLE_NAMES = [s.name for s in SAMPLE_DEFS]


def _sample(name: str) -> tuple[tracelens.Trace, dict]:
    sample = next(s for s in SAMPLE_DEFS if s.name == name)
    truth = json.loads((SAMPLES / f"{name}.truth.json").read_text())
    assert truth["trace"] == sample.trace_path
    return tracelens.load(SAMPLES / sample.trace_path), truth


@pytest.mark.parametrize("name", SAMPLE_NAMES)
def test_committed_sample_reproduces_truth(name: str) -> None:
    trace, truth = _sample(name)
    assert_summary_matches_truth(tracelens.summarize(trace), truth)
    assert_step_categories_match(trace, truth)
    # Costs from the program's HLO: every activity, MFU, and busbw of every instance.
    assert_costs_match_truth(trace, truth)
    assert_mfu_matches_truth(trace, truth)
    assert_busbw_matches_truth(trace, truth)
    # Collective counts and kernel time per device and type.
    got = (collective_rows(trace).group_by("host", "device", "subcategory")
           .agg(count=pl.len(), sum_ns=pl.col("dur").sum()))
    got_map = {(h, d, t): (c, s) for h, d, t, c, s in got.iter_rows()}
    want_map = {(d["host"], d["device"], c["type"]): (c["count"], c["sum_ns"])
                for d in truth["devices"] for c in d["collectives"]}
    assert got_map == want_map
    for d in truth["devices"]:
        for c in d["collectives"]:
            assert c["sum_ns"] == c["transfer_ns"] + c["wait_ns"] and c["msg_bytes"] > 0


@pytest.mark.parametrize("name", SAMPLE_NAMES)
def test_committed_truth_is_the_generator_output(name: str) -> None:
    """The committed truth is what tracelens_dev.synth computes for the sample's scenario now."""
    sample = next(s for s in SAMPLE_DEFS if s.name == name)
    truth = json.loads((SAMPLES / f"{name}.truth.json").read_text())
    fresh = json.loads(json.dumps(build(sample.scenario).truth))
    assert {k: v for k, v in truth.items() if k not in ("trace", "what")} == fresh


def test_straggler_peers_wait_inside_the_collective() -> None:
    trace, truth = _sample("mi355x_2x8gpu_straggler")
    s = truth["planted"]["straggler"]
    assert (s["rank"], s["device"], s["slowdown"]) == (1, 3, 1.3)
    rows = collective_rows(trace)
    inst = rows.group_by("op", "k").agg(
        n=pl.len(), ends=pl.col("end_ns").n_unique(), end=pl.col("end_ns").first(),
        shortest=pl.col("dur").min(),
        last=pl.col("start_ns").max(),
        straggler_start=pl.col("start_ns").filter((pl.col("rank") == s["rank"])
                                                  & (pl.col("device") == s["device"])).first())
    # Every instance: all 16 kernels end together, the shortest is the true transfer.
    want = {(i["op"], i["step"]): i for i in truth["collective_instances"]}
    assert inst.height == len(want)
    assert set(inst["n"]) == {16} and set(inst["ends"]) == {1}
    steps_of_op = rows.select("op", "k", "step").unique().sort("op", "k")
    for row in inst.join(steps_of_op, on=["op", "k"]).iter_rows(named=True):
        w = want[(row["op"], row["step"])]
        assert (row["end"], row["shortest"]) == (w["end_ns"], w["transfer_ns"])
    # The straggler arrives last at the collectives that follow its compute...
    last = inst.filter(pl.col("straggler_start") == pl.col("last")).height
    assert last >= inst.height * 2 // 3
    # ... so its peers' kernels hold the planted wait (kernel time minus transfer).
    wait = (rows.join(inst.select("op", "k", "shortest"), on=["op", "k"])
            .group_by("rank", "device").agg(w=(pl.col("dur") - pl.col("shortest")).sum()))
    got = {(r, d): w for r, d, w in wait.iter_rows()}
    planted = {(d["rank"], d["device"]): sum(c["wait_ns"] for c in d["collectives"])
               for d in truth["devices"]}
    assert got == planted
    peers = [w for k, w in planted.items() if k != (s["rank"], s["device"])]
    assert min(peers) > 50 * planted[(s["rank"], s["device"])] > 0


def test_sweep_matches_a_per_nanosecond_count() -> None:
    """The truth's sweep against brute force on a tiny hand-made device."""
    import numpy as np

    start = np.array([0, 5, 8, 8, 20, 3, 30])
    end = np.array([10, 12, 9, 25, 22, 4, 31])
    prio = np.array([0, 6, 7, 3, 6, 7, 1])  # gemm, collective, memory, elementwise, ...
    tl, cats = sweep(start, end, prio, (2, 28))
    active = [[c for s, e, c in zip(start, end, prio) if s <= t < e] for t in range(2, 28)]
    comp = [any(c < 6 for c in a) for a in active]
    comm = [6 in a for a in active]
    mem = [7 in a for a in active]
    assert tl["busy_ns"] == sum(bool(a) for a in active)
    assert tl["compute_ns"] == sum(comp)
    assert tl["exposed_comm_ns"] == sum(c and not p for c, p in zip(comm, comp))
    assert tl["exposed_memory_ns"] == sum(m and not p and not c
                                          for m, c, p in zip(mem, comm, comp))
    excl = {c["category"]: c["exclusive_ns"] for c in cats}
    for k, name in enumerate(CATEGORIES):
        assert excl.get(name, 0) == sum(bool(a) and min(a) == k for a in active)
    assert tl["span_ns"] == 26 and tl["idle_ns"] == 26 - tl["busy_ns"]


scenarios = st.builds(
    Scenario,
    device=st.sampled_from(["mi300x", "mi355x", "h100"]),
    hosts=st.integers(1, 2), gpus=st.integers(1, 3), steps=st.integers(1, 2),
    layers=st.integers(1, 2), hidden=st.sampled_from([512, 1024]),
    ffn=st.sampled_from([1536, 2816]), heads=st.just(8), kv_heads=st.sampled_from([2, 8]),
    seq=st.sampled_from([512, 2048]), fsdp=st.booleans(), moe=st.booleans(),
    grad_norm=st.booleans(), optimizer=st.booleans(),
    overlap=st.floats(0.0, 1.0, allow_nan=False),
    jitter=st.floats(0.0, 0.2, allow_nan=False),
    launch_gap_ns=st.sampled_from([(1, 1), (500, 3_000), (2_000, 40_000)]),
    step_gap_ns=st.sampled_from([1, 50_000]),
    step_marker_ns=st.sampled_from([None, None, 300_000]),
    async_markers=st.booleans(), host_launches=st.booleans(),
    straggler=st.one_of(st.none(), st.builds(Straggler, host=st.just(0),
                                             device=st.just(0),
                                             slowdown=st.floats(1.0, 2.0))),
    seed=st.integers(0, 2**31))


@settings(max_examples=14, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(sc=scenarios)
def test_random_scenarios_reproduce_truth(sc: Scenario, tmp_path_factory) -> None:
    syn = build(sc)
    trace, _ = write_and_load(syn, tmp_path_factory.mktemp("synth"))
    # No repair was needed: no same-stream overlap, nothing dropped, ignored or unknown.
    assert not [w for w in trace.meta.warnings
                if any(k in w for k in ("clipped", "dropped", "ignored", "unknown event"))]
    summary = tracelens.summarize(trace)
    # Markers that end before the device runs the step (fixed short ones, or async_markers:
    # the host's dispatch) can hold under half of the step program's device time:
    # tracelens.loading.steps then takes the program's executions as the steps (the async dispatch
    # rule, tests/test_steps.py), which the truth, made of the markers, is not.
    markers = summary["steps_source"] == "annotation"
    if not markers:
        assert sc.step_marker_ns is not None or sc.async_markers
        assert summary["steps_source"].startswith("program:")
        assert any(w.startswith("the step annotations hold only") for w in summary["warnings"])
    assert_summary_matches_truth(summary, syn.truth, steps=markers)
    assert_costs_match_truth(trace, syn.truth)
    assert_mfu_matches_truth(trace, syn.truth, steps=markers)
    assert_busbw_matches_truth(trace, syn.truth)
    if not markers:
        return
    step = syn.truth["devices"][0]["steps"][-1]
    got = tracelens.summarize(trace, step=step["step"])
    for d in got["devices"]:
        want = next(w for w in syn.truth["devices"]
                    if (w["host"], w["device"]) == (d["host"], d["device"]))
        ws = next(s for s in want["steps"] if s["step"] == step["step"])
        assert timeline_numbers(d["timeline"]) == ws["timeline"]
        assert by_category(d["categories"]) == by_category(ws["categories"])


def test_same_seed_same_trace_other_seed_other_trace(tmp_path: Path) -> None:
    a = build(Scenario(gpus=2, steps=1, layers=1, seed=4))
    b = build(Scenario(gpus=2, steps=1, layers=1, seed=4))
    c = build(Scenario(gpus=2, steps=1, layers=1, seed=5))
    assert a.truth == b.truth and a.trace.events.equals(b.trace.events)
    assert a.trace.host_events.equals(b.trace.host_events)
    assert not a.trace.events.equals(c.trace.events)


def test_overlap_knob_moves_communication_under_compute() -> None:
    def exposed(overlap: float) -> int:
        syn = build(Scenario(gpus=2, steps=1, layers=3, overlap=overlap, jitter=0.0, seed=1))
        return sum(d["timeline"]["exposed_comm_ns"] for d in syn.truth["devices"])

    values = [exposed(x) for x in (0.0, 0.5, 1.0)]
    assert values[0] > values[1] > values[2]


def test_scenario_errors() -> None:
    with pytest.raises(ValueError, match="straggler is not a device"):
        build(Scenario(gpus=2, straggler=Straggler(0, 5)))
    with pytest.raises(ValueError, match="overlap"):
        build(Scenario(overlap=1.5))
    with pytest.raises(ValueError, match="unknown layer roles"):
        build(Scenario(layer_roles=("norm", "conv")))
    with pytest.raises(ValueError, match="multiple of heads"):
        build(Scenario(hidden=1000, heads=16))
    with pytest.raises(ValueError, match="multiple of kv_heads"):
        build(Scenario(heads=32, kv_heads=6))
    with pytest.raises(ValueError, match="unknown device model"):
        build(Scenario(device="tpu"))


def test_synth_never_imports_parsers_writers_or_analyzers() -> None:
    """synth imports no parser and no writer, and of tracelens only the model, the hardware
    table and its products (``tracelens.loading.identify``) and the HLO model (element types)
    it builds protos with, of the parsers only the HLO
    schema (field numbers, no decoding): the truth never comes from the decoders, the
    analyzers, the classifier or the cost model (``tracelens.cost``)."""
    import ast

    import tracelens_dev.synth

    allowed = ("tracelens.core.model", "tracelens.core.hardware", "tracelens_dev.synth",
               "parsers.hlo.schema", "tracelens.core.hlo_model", "tracelens_dev.wire",
               "tracelens_dev.hints", "tracelens.loading.identify")
    files = sorted(Path(tracelens_dev.synth.__file__).parent.glob("*.py"))
    assert len(files) > 5  # the package is where this test looks
    for f in files:
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
                if node.module in ("tracelens", "tracelens_dev.synth", "tracelens.hlo",
                                   "tracelens.core", "tracelens.loading"):
                    names = [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            for name in names:
                assert not name.startswith("parsers") or name == "parsers.hlo.schema", f
                if name.split(".")[0] in ("tracelens", "tracelens_dev"):
                    assert name.startswith(allowed), (f, name)
