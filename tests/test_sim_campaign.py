"""The campaign's fast subset (issue 45, item 3): 12 seeded scenarios (every regime) x the
XSpace trace with and without host events, three checks each against the simulator's truth
(tracelens_dev/sim/campaign.py; docs/simulator.md; the whole campaign is
benchmarks/bench_counterfactual.py).

Today's analyzer fails many of them: each failing case is marked
``xfail(strict=True)`` with the check and the symptom, so a fix turns it into an XPASS that
fails until its mark is removed. A check with nothing to compare (no what-if the simulator
models) is skipped, saying so.
"""

from __future__ import annotations

from functools import lru_cache

import pytest

from tracelens_dev.sim.campaign import Result, check
from tracelens_dev.sim.scenarios import generate

SEEDS = (18, 1, 47, 3, 4, 5, 6, 7, 8, 9, 10, 11)  # every regime (seed % 9); 2-8 ranks
FORMATS = ("xspace", "xspace-device")
CHECKS = ("path", "what_if", "best")

_HOST_IDLE = ("issue 45: analyzer calls untraced host time before the first traced call "
              "(the named host op at the step's start) idle, not host")
_DEVICE_ONLY = ("issue 45: analyzer without host events stays on one stream: compute before "
                "a collective is idle on the path")
_HOST_BOUND_WHATIF = ("issue 45: analyzer's graph_launch/hide projections on a host-bound "
                      "step are far from the re-simulated step")
_STRAGGLER = ("issue 45: analyzer's on_time for the straggler saves less than removing its "
              "delay does (and hide is ranked above it)")
_PIPELINE = ("issue 45: analyzer's pipeline path: waits for the other stage instead of its "
             "compute; on_time of a stage that has no delay projects a saving")
_DEVICE_ONLY_WHATIF = ("issue 45: analyzer without host events projects hide/on_time far "
                       "from the re-simulated step")
_GRAPH = ("issue 45: analyzer's path on a graph-launched step: host time before the graph "
          "launch read as idle")

FAILING: dict[tuple[int, str, str], str] = {
    (18, "xspace-device", "path"): _DEVICE_ONLY,
    (1, "xspace", "path"): _HOST_IDLE,
    (1, "xspace", "what_if"): _HOST_BOUND_WHATIF,
    (1, "xspace-device", "path"): _DEVICE_ONLY,
    (1, "xspace-device", "what_if"): _DEVICE_ONLY_WHATIF,
    (47, "xspace", "path"): _HOST_IDLE,
    (47, "xspace-device", "path"): _DEVICE_ONLY,
    (47, "xspace-device", "what_if"): _DEVICE_ONLY_WHATIF,
    (3, "xspace", "what_if"): _STRAGGLER,
    (3, "xspace", "best"): _STRAGGLER,
    (3, "xspace-device", "path"): _DEVICE_ONLY,
    (3, "xspace-device", "what_if"): _STRAGGLER,
    (3, "xspace-device", "best"): _STRAGGLER,
    (4, "xspace", "path"): _PIPELINE,
    (4, "xspace", "what_if"): _PIPELINE,
    (4, "xspace-device", "path"): _PIPELINE,
    (4, "xspace-device", "what_if"): _PIPELINE,
    (5, "xspace-device", "path"): _DEVICE_ONLY,
    (6, "xspace", "path"): _GRAPH,
    (6, "xspace-device", "path"): _DEVICE_ONLY,
    (7, "xspace-device", "path"): _DEVICE_ONLY,
    (8, "xspace-device", "path"): _DEVICE_ONLY,
    (8, "xspace-device", "what_if"): _DEVICE_ONLY_WHATIF,
    (9, "xspace-device", "path"): _DEVICE_ONLY,
    (10, "xspace", "path"): _HOST_IDLE,
    (10, "xspace", "what_if"): _HOST_BOUND_WHATIF,
    (10, "xspace-device", "path"): _DEVICE_ONLY,
    (10, "xspace-device", "what_if"): _DEVICE_ONLY_WHATIF,
    (11, "xspace", "path"): _HOST_IDLE,
    (11, "xspace-device", "path"): _DEVICE_ONLY,
    (11, "xspace-device", "what_if"): _DEVICE_ONLY_WHATIF,
}


@lru_cache(maxsize=None)
def _result(seed: int, fmt: str) -> Result:
    return check(generate(seed), fmt)


def _cases() -> list:
    out = []
    for seed in SEEDS:
        for fmt in FORMATS:
            for name in CHECKS:
                why = FAILING.get((seed, fmt, name))
                marks = [pytest.mark.xfail(strict=True, reason=why)] if why else []
                out.append(pytest.param(seed, fmt, name, marks=marks,
                                        id=f"{seed}-{fmt}-{name}"))
    return out


@pytest.mark.parametrize(("seed", "fmt", "name"), _cases())
def test_campaign(seed: int, fmt: str, name: str) -> None:
    r = _result(seed, fmt)
    c = r.checks[name]
    if c.ok is None:
        pytest.skip(f"seed {seed} {fmt}: {c.why}")
    assert c.ok, (f"seed {seed} ({r.regime}) {fmt}: {name} off by {c.error_ns} ns "
                  f"(tolerance {c.tolerance_ns} ns): {c.detail}")


def test_failing_marks_name_real_cases() -> None:
    """Every mark names a case of the subset (a stale mark is an error, not a silent pass)."""
    assert set(FAILING) <= {(s, f, n) for s in SEEDS for f in FORMATS for n in CHECKS}
