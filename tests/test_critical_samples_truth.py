"""The critical path's what-ifs on the bundled samples against the samples regenerated with
the change (issue 45, "done when"): the generator (tracelens_dev.synth) makes the same job
again with only the planted delay removed, or with one collective type perfectly overlapped,
and the what-if must save what that regeneration saves, within 2%
(tracelens_dev/synth/counterfactual.py says which step time is compared).

The issue's "done when" compares the ``on_time`` projection with the step time of the
sample generated without the delay: both samples' projected steps are within 2% of their
regenerations' (MI300X 5.807 against 5.823 ms, -0.27%; 2x8 exact). Held to their savings, a
measure 30x stricter there, every case holds within 2% but the MI300X ``on_time GPU5``
(strict xfail, +8.9%): it saves the regeneration's 177.5 µs plus the 15.7 µs the
regeneration still waits for GPU5, whose own jitter leaves it last into one all-gather
(tested exactly below; docs/critical-path.md, "On the bundled samples").
"""

from __future__ import annotations

import dataclasses
from functools import lru_cache

import numpy as np
import polars as pl
import pytest

import tracelens
from tracelens.analyze.critical.path import CriticalPath, CriticalPathOptions
from tracelens.engine.protocol import run_trace
from tracelens.results.critical_path import CriticalPathResult
from tracelens_dev.synth.counterfactual import records, step_saving_ns
from tracelens_dev.synth.devices import device_model
from tracelens_dev.synth.program import COMPUTE, build_program
from tracelens_dev.synth.samples import SAMPLES as SAMPLE_DEFS
from tracelens_dev.synth.scenario import Scenario, Straggler

from .conftest import SAMPLES

BY_NAME = {s.name: s for s in SAMPLE_DEFS}
TOLERANCE = 0.02

_JITTER_WHY = (
    "issue 45: the what-if saves 193.2 us, the regeneration without GPU5's 8% slowdown 177.5 "
    "us (+8.9%): exactly the 15.7 us by which GPU5, unslowed, is still the last into one "
    "all-gather by its own jitter (test_on_time_differs_from_the_regeneration_by_its_"
    "residual_wait). on_time has no one wait for it; solving its arrivals from its own work "
    "instead cannot: the generator issues a collective a fixed time before its block ends, a "
    "time the trace ties to no activity (2x8: -47%, MI300X: -25% that way)")

CASES = [
    pytest.param("mi300x_8gpu_llama_step", "on_time", "mi300x-node0/GPU5",
                 {"straggler": None}, id="mi300x-on_time-GPU5",
                 marks=pytest.mark.xfail(strict=True, reason=_JITTER_WHY)),
    pytest.param("mi355x_2x8gpu_straggler", "on_time", "mi355x-node1/GPU3",
                 {"straggler": None}, id="2x8-on_time-node1-GPU3"),
    pytest.param("mi355x_8gpu_llama_fsdp", "hide", "all-gather",
                 {"hidden_collectives": ("all-gather",)}, id="mi355x-hide-all-gather"),
    # beyond the list: the other collective type, and the other samples
    pytest.param("mi355x_8gpu_llama_fsdp", "hide", "reduce-scatter",
                 {"hidden_collectives": ("reduce-scatter",)}, id="mi355x-hide-reduce-scatter"),
    pytest.param("mi300x_8gpu_llama_step", "hide", "reduce-scatter",
                 {"hidden_collectives": ("reduce-scatter",)}, id="mi300x-hide-reduce-scatter"),
    pytest.param("mi355x_2x8gpu_straggler", "hide", "reduce-scatter",
                 {"hidden_collectives": ("reduce-scatter",)}, id="2x8-hide-reduce-scatter"),
    pytest.param("mi355x_2x8gpu_straggler", "hide", "all-gather",
                 {"hidden_collectives": ("all-gather",)}, id="2x8-hide-all-gather"),
    pytest.param("mi300x_8gpu_llama_step", "hide", "all-gather",
                 {"hidden_collectives": ("all-gather",)}, id="mi300x-hide-all-gather"),
]


@lru_cache(maxsize=None)
def _analyzed(name: str) -> CriticalPathResult:
    path = SAMPLES / BY_NAME[name].trace_path
    return run_trace(CriticalPath(), tracelens.load([path]), CriticalPathOptions())


@pytest.mark.parametrize(("name", "change", "target", "knobs"), CASES)
def test_what_if_saves_what_the_regeneration_saves(name: str, change: str, target: str,
                                                    knobs: dict) -> None:
    result = _analyzed(name)
    got = [w for w in result.what_if if (w.change, w.target) == (change, target)]
    assert len(got) == 1, [(w.change, w.target) for w in result.what_if]
    steps = {p.step for p in result.paths}
    assert len(steps) == 1, steps
    sc = BY_NAME[name].scenario
    truth = step_saving_ns(sc, dataclasses.replace(sc, **knobs), steps.pop())
    assert truth > 0
    assert got[0].saved_ns == pytest.approx(truth, rel=TOLERANCE), (got[0].saved_ns, truth)


@pytest.mark.parametrize(("name", "target"), [
    ("mi300x_8gpu_llama_step", "mi300x-node0/GPU5"),
    ("mi355x_2x8gpu_straggler", "mi355x-node1/GPU3")])
def test_on_time_projects_the_step_of_the_sample_made_without_the_delay(name: str,
                                                                        target: str) -> None:
    """The done-when's measure: the late device named, and the step ``on_time`` projects
    within 2% of the step time of the same sample generated without its slowdown."""
    result = _analyzed(name)
    got = [w for w in result.what_if if (w.change, w.target) == ("on_time", target)]
    assert len(got) == 1, [(w.change, w.target) for w in result.what_if]
    (step,) = {p.step for p in result.paths}
    sc = BY_NAME[name].scenario
    regenerated = got[0].step_ns - step_saving_ns(sc, dataclasses.replace(sc, straggler=None),
                                                  step)
    assert regenerated < got[0].step_ns
    assert got[0].projected_step_ns == pytest.approx(regenerated, rel=TOLERANCE), (
        got[0].projected_step_ns, regenerated)


def test_on_time_differs_from_the_regeneration_by_its_residual_wait() -> None:
    """on_time removes every wait for the device. The MI300X sample regenerated without
    GPU5's slowdown still waits for GPU5 where its own jitter makes it the last to arrive:
    the what-if's saving is the regeneration's plus those waits (within 2%): what on time
    means beyond the regeneration, measured, not a tolerance."""
    name, step = "mi300x_8gpu_llama_step", 1
    result = _analyzed(name)
    got = next(w for w in result.what_if if (w.change, w.target) == ("on_time",
                                                                       "mi300x-node0/GPU5"))
    sc = BY_NAME[name].scenario
    fast = dataclasses.replace(sc, straggler=None)
    truth = step_saving_ns(sc, fast, step)
    rec = records(fast)
    still = 0
    for i in np.flatnonzero(rec.inst_step == step):
        m = rec.inst == i
        starts = dict(zip(rec.dev[m].tolist(), rec.start[m].tolist()))
        order = sorted(starts.values())
        if len(order) > 1 and max(starts, key=starts.__getitem__) == 5:
            still += order[-1] - order[-2]
    assert still > 0  # the case this test is about
    assert got.saved_ns == pytest.approx(truth + still, rel=TOLERANCE), (got.saved_ns, truth,
                                                                         still)


@pytest.mark.parametrize("name", ["mi300x_8gpu_llama_step", "mi355x_8gpu_llama_fsdp",
                                  "mi355x_2x8gpu_straggler"])
def test_the_bundled_sample_is_what_the_generator_makes(name: str) -> None:
    """The counterfactuals regenerate the job: the bundled file must be its original (every
    device activity at the construction's start and end)."""
    ev = tracelens.load([SAMPLES / BY_NAME[name].trace_path]).events
    rec = records(BY_NAME[name].scenario)
    seen = ev.select("start_ns", "end_ns").sort("start_ns", "end_ns")
    made = pl.DataFrame({"start_ns": rec.start, "end_ns": rec.end}).sort("start_ns", "end_ns")
    assert seen.equals(made)


def _small(**kw: object) -> Scenario:
    return Scenario(name="cf", device="mi300x", gpus=4, steps=2, layers=2, hidden=1024,
                    ffn=2816, heads=8, kv_heads=4, seq=1024, seed=2, **kw)  # type: ignore


def test_the_variants_draw_the_same_numbers() -> None:
    """Removing the straggler or hiding a collective type changes nothing else: the same
    random draws in the same order (a straggler's kernels are its slowdown times longer,
    rounded; every other kernel lasts as long; hidden collectives take no time)."""
    sc = _small()
    base = records(sc)
    slow = records(dataclasses.replace(sc, straggler=Straggler(0, 2, 1.25)))
    dur_b, dur_s = base.end - base.start, slow.end - slow.start
    # the same activities, emitted in the same order
    assert np.array_equal(base.spec, slow.spec) and np.array_equal(base.dev, slow.dev)
    kern = base.inst < 0  # (a collective's kernel lasts until its last member arrives)
    compute = np.array([s.role == COMPUTE for s in build_program(
        sc, device_model(sc.device)).specs])[base.spec]
    mine = kern & compute & (base.dev == 2)  # slowed; copies are not
    assert mine.any()
    assert np.array_equal(dur_b[kern & ~mine], dur_s[kern & ~mine])
    assert np.all(np.abs(dur_s[mine] - 1.25 * dur_b[mine]) <= 1.25)  # each rounded
    hidden = records(dataclasses.replace(sc, hidden_collectives=("all-gather",)))
    assert np.array_equal(base.spec, hidden.spec)
    dur_h = hidden.end - hidden.start
    assert np.array_equal(dur_b[kern], dur_h[kern])
    ag = hidden.inst_transfer == 0
    assert ag.any() and not ag.all()
    assert np.all(dur_h[np.isin(hidden.inst, np.flatnonzero(ag))] == 0)


def test_hiding_an_unknown_collective_type_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown collective types"):
        _small(hidden_collectives=("all-gathr",)).check()


def test_on_time_of_a_planted_one_host_straggler(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A one-host 8-GPU job whose GPU 3 computes 1.5x slower; its collectives are issued at
    their block's end (``overlap=0``), as a host that waits for the block issues them. (With
    ``overlap`` > 0 the generator issues a collective a fixed time before its block ends, a
    time taken from the future: behind a block that ends in a synchronous all-reduce waiting
    for GPU 3, the peers' reduce-scatters start late with nothing in the trace saying why, so
    no analysis of the trace can move them: docs/critical-path.md.)"""
    from tracelens_dev.writers.xspace import write
    from tracelens_dev.synth import build

    late = Scenario(hosts=1, gpus=8, steps=2, layers=1, seed=3, overlap=0.0,
                    straggler=Straggler(0, 3, 1.5))
    write(build(late).trace, tmp_path / "late")
    opts = CriticalPathOptions(step=0)
    res = run_trace(CriticalPath(), tracelens.load(tmp_path / "late"), opts)
    w = next(w for w in res.what_if if (w.change, w.target) == ("on_time", "mi355x-node0/GPU3"))
    truth = step_saving_ns(late, dataclasses.replace(late, straggler=None), 0)
    assert abs(w.saved_ns - truth) <= TOLERANCE * truth, (w.saved_ns, truth)
