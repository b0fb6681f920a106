"""The real counterfactual runs as truth (``sample_traces/real_runs``, made on a TPU v5e host by
``make_runs.py``): each family is one program run with a planted cause and without it, with the
measured step times beside each trace. For every cause run: (a) the first finding names the
planted cause, (b) the what-if that removes it projects the counterpart's measured step within
10% or 1 ms (``tests/real_runs_cases.py`` says how each is read).

Where the analyzer is wrong today the check is a strict xfail whose reason says what the tool
says against the truth: it turns red once fixed, and the mark is then removed. The error table
is in ``benchmarks/RESULTS.md`` ("Real counterfactual runs").
"""

from __future__ import annotations

import gzip
import statistics

import pytest

from tests.real_runs_cases import CASES, ROOT, Case, outcome

# what the tool says vs the truth, per failing check (the table in benchmarks/RESULTS.md)
FIRST_XFAIL = {
    "host_pause-tpu_pause": "first finding is 'idle 96% of the path, no projection'; the "
    "device waits 5 ms per step for the host's sleep",
    "host_pause-cpu1_pause": "first finding is 'idle 88% of the path, no projection'; the "
    "device waits 5 ms per step for the host's sleep",
    "host_sync-tpu_sync": "first finding is 'speed up the GEMMs' (0.24 ms); the device waits "
    "~3.8 ms per step for the host's float(loss) and its work after it",
    "host_sync-cpu1_sync": "first finding is 'idle 99% of the path'; the sync exposes the "
    "host's 4 ms of work",
    "h2d-tpu_transfer": "first finding is 'speed up the GEMMs' (0.29 ms); the 64 MB "
    "device_put per step costs 8 ms (the path calls it 8.9 ms of idle)",
    "eager-tpu_eager": "first finding is 'idle 100% of the path'; op-by-op dispatch makes a "
    "0.63 ms jitted step 107 ms",
    "eager-cpu1_eager": "first finding is 'idle 100% of the path'; op-by-op dispatch costs "
    "34 ms a step over jit",
    "scan-cpu1_scan": "XLA:CPU scan's path is 91% idle (the while body's ops not read as "
    "the loop's busy time); the unrolled run's first finding is also idle, 90%",
    "straggler_extra-cpu8_extra": "first finding is 'overlap the all-reduces' (0.71 ms); "
    "CPU3's extra work costs 7 ms a step",
    "straggler_slow-cpu8_slow": "first finding is 'overlap the all-reduces', unprojected: "
    "the path is 100% idle (the while loop's time on CPU3 not read as its work); CPU3 costs "
    "6.7 ms a step",
    "collective-cpu8_overlapped": "first finding is 'overlap the all-reduces' (saves 1.97 ms "
    "projected); already overlapped: the run without the psum is no faster (13.28 vs 13.01 "
    "ms measured)",
    "pipeline-cpu8_slowstage": "first finding is 'overlap the collective-permutes' "
    "(unprojected); stage 5's doubled loop costs 42 ms a step (the path: 94% idle)",
    "alltoall-cpu8_imbalanced": "first finding is 'overlap the all-to-alls' (unprojected); "
    "expert CPU0's 4x loop costs 10 ms a step",
}
PROJECTION_XFAIL = {
    "host_pause-tpu_pause": "no what-if removes the host pause (5.13 ms measured without)",
    "host_pause-cpu1_pause": "no what-if removes the host pause (8.64 ms measured without)",
    "host_sync-tpu_sync": "no what-if removes the sync (4.39 ms measured without)",
    "host_sync-cpu1_sync": "no what-if removes the sync (6.40 ms measured without)",
    "h2d-tpu_transfer": "no what-if removes the host-to-device copy (5.20 ms measured "
    "without); the copy is not in the trace as device time",
    "eager-tpu_eager": "no what-if removes eager dispatch (0.63 ms measured with jit)",
    "eager-cpu1_eager": "no what-if removes eager dispatch (40.2 ms measured with jit)",
    "straggler_extra-cpu8_extra": "on_time CPU3 projects 18.48 ms (saves 0.21 ms: its extra "
    "work is kept); 11.12 ms measured without it (+66%)",
    "straggler_slow-cpu8_slow": "on_time CPU3 saves 0 (17.40 ms): the path is 100% idle; "
    "10.83 ms measured without the slow loop (+61%)",
    "collective-cpu8_exposed": "hide all-reduce projects 18.07 ms (saves 9.4 of 27.5 ms); "
    "13.28 ms measured without the psum (+36%)",
    "collective-cpu8_overlapped": "hide all-reduce projects 11.85 ms; 13.28 ms measured "
    "without the psum (-10.8%)",
    "pipeline-cpu8_slowstage": "no on_time what-if for CPU5 ('no path of step 5 waits for its "
    "arrival'); 89.27 ms measured with even stages",
    "alltoall-cpu8_imbalanced": "on_time CPU0 saves 0 (22.65 ms); 11.21 ms measured balanced "
    "(+102%)",
}


def _param(case: Case, xfails: dict[str, str]) -> object:
    marks = ([pytest.mark.xfail(strict=True, reason=xfails[case.id])]
             if case.id in xfails else [])
    return pytest.param(case, id=case.id, marks=marks)


@pytest.mark.parametrize("case", [_param(c, FIRST_XFAIL) for c in CASES])
def test_first_finding_names_the_cause(case: Case) -> None:
    o = outcome(case)
    assert o.first_ok, f"first finding {o.first!r}; expected {case.expect}"


@pytest.mark.parametrize("case", [_param(c, PROJECTION_XFAIL) for c in CASES
                                  if c.projectable])
def test_what_if_projects_the_run_without_the_cause(case: Case) -> None:
    o = outcome(case)
    assert o.projected_ns is not None, f"{o.projected_by}; measured without: {o.measured_ns}"
    assert o.projection_ok, (f"projected {o.projected_ns} ns ({o.projected_by}) vs measured "
                             f"{o.measured_ns} ns ({o.error:+.1%})")


def test_xfail_reasons_name_cases() -> None:
    """A reason for a case that does not exist would mark nothing."""
    ids = {c.id for c in CASES}
    assert set(FIRST_XFAIL) <= ids and set(PROJECTION_XFAIL) <= ids


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_runs_and_facts(case: Case) -> None:
    """Each run and its counterpart: a readable gzipped trace, >= 10 timed steps whose median
    is the recorded one, the counterpart named as the facts say; and the planted cause is real:
    the cause run's fastest step is slower than the counterpart's median (the overlapped
    collective and the loop, which should cost nothing: medians within 15%)."""
    a, b = case.facts(), case.facts(case.counterpart)
    assert a["counterpart"] == f"{case.backend}_{case.counterpart}"
    for f, path in ((a, case.trace()), (b, case.trace(case.counterpart))):
        steps = f["traced"]["step_ms"]
        assert len(steps) >= 10 and len(f["untraced"]["step_ms"]) >= 10
        assert f["traced"]["median_ms"] == pytest.approx(statistics.median(steps), abs=1e-3)
        with gzip.open(path, "rb") as fh:
            assert fh.read(64)
    median = b["traced"]["median_ms"]
    if case.family == "scan" or case.variant == "overlapped":
        assert abs(a["traced"]["median_ms"] - median) < 0.15 * median
    else:  # the cause run's fastest step is slower than the counterpart's median
        assert a["traced"]["min_ms"] > median


def test_traces_stay_small() -> None:
    total = sum(p.stat().st_size for p in ROOT.rglob("*.xplane.pb.gz"))
    assert total <= 40e6
