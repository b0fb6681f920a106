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

# what the tool says vs the truth, per failing check (the table in benchmarks/RESULTS.md).
# "idle" on XLA:CPU: a program's ops run on up to 14 worker threads, each a stream in the
# trace; the path keeps to one and calls the rest idle (cpu1_nopause: device 94% busy, path
# 84% idle). The host plane's dispatch, sync and transfer events are read (XSpace reader,
# parsers/xspace/xla_host.py): the TPU host-pause, sync and transfer runs pass. XLA:CPU's
# multi-device runs (cpu8) stay unlinked (their Execute returns after the run's ops began).
FIRST_XFAIL = {
    "scan_train-cpu1_scan": "first finding 'idle: 16% of the path' (XLA:CPU's ops on many "
    "threads); the unrolled run's differs",
    "straggler_extra-cpu8_extra": "first finding 'overlap the all-reduces'; CPU3's extra "
    "matmuls cost 7.2 ms a step (18.27 vs 11.06 ms)",
    "straggler_slow-cpu8_slow": "first finding 'overlap the all-reduces', unprojected, on a "
    "path 100% idle; CPU3's 3-trip loop costs 6.6 ms a step (17.43 vs 10.83 ms)",
}
PROJECTION_XFAIL = {
    "host_pause-cpu1_pause": "host projects 7.029 ms (saves 5.491), 8.321 ms measured without "
    "the pause (-15.5%; the counterpart's two runs: 8.64, 6.73 ms)",
    "eager-tpu_eager": "dispatch projects 3.770 ms (saves 102.9 of 106.7); 0.641 ms measured "
    "with jit (+488%): the one fused program does far less device work than the 336 eager "
    "programs a step, which no what-if of the trace removes",
    "eager-cpu1_eager": "dispatch projects 65.246 ms (saves 8.2 ms); 34.725 ms measured with "
    "jit (+87.9%)",
    "straggler_extra-cpu8_extra": "on_time CPU3 projects 17.467 ms (the extra work only it "
    "did is kept); 11.058 ms measured without it (+58.0%)",
    "straggler_slow-cpu8_slow": "on_time CPU3 saves 0 (17.40 ms) on a path 100% idle; "
    "10.83 ms measured without the slow loop (+61%)",
    "collective-cpu8_exposed": "hide all-reduce projects 18.07 ms (saves 9.4 of 27.5 ms; "
    "14.4 ms of the path's idle held); 12.92 ms measured without the psum (+40%)",
    "pipeline-cpu8_slowstage": "no on_time what-if for CPU5 (it is named first, unprojected); "
    "90.98 ms measured with even stages",
    "alltoall-cpu8_imbalanced": "on_time CPU0 projects 20.850 ms; 11.068 ms measured "
    "balanced (+88.4%)",
}


def _param(case: Case, xfails: dict[str, str]) -> object:
    marks = ([pytest.mark.xfail(strict=True, reason=xfails[case.id])]
             if case.id in xfails else [])
    return pytest.param(case, id=case.id, marks=marks)


@pytest.mark.parametrize("case", [_param(c, FIRST_XFAIL) for c in CASES if c.first_checked])
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
    is the recorded one, the counterpart named as the facts say, a second run's facts; and the
    planted cause is real: the cause run's fastest step is slower than the counterpart's
    median (the overlapped collective and the loop, which should cost nothing: medians within
    15%)."""
    a, b = case.facts(), case.facts(case.counterpart)
    assert a["counterpart"] == f"{case.backend}_{case.counterpart}"
    for variant in (case.variant, case.counterpart):  # the second run of each
        again = case.facts(variant, repeat=True)
        assert again["planted"] == case.facts(variant)["planted"]
        assert len(again["traced"]["step_ms"]) >= 10
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
