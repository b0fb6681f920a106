"""Noise-aware regression detection on a series of recorded runs.

A *series* is the runs sharing tags, hardware and device count (:func:`series_key`): runs on
other hardware or device counts are never compared. The newest run of a series is checked
against the runs before it, at most ``window`` of them:

1. Change point: the recent runs (the window and the newest) are split in two where the sum
   of absolute deviations from each part's median is least (the earlier part at least
   :data:`MIN_HISTORY` runs, the later one ending at the newest run; ties: the latest
   split). A slowdown that began two runs ago puts the split there, so its runs are not
   taken for the series' normal.
2. Spread: a robust standard deviation of the run-to-run noise of the earlier part, the
   larger of two estimates (each alone is often too small on a handful of runs): 1.4826 ×
   the median absolute deviation from its median, and 1.4826 × the median absolute
   difference of consecutive runs / √2.
3. Baseline: the median run of the earlier part (the lower median: a real run, whose
   components add up to its step time), or the run ``--baseline`` names.
4. The newest run regressed when its step time exceeds the baseline's by more than
   :data:`NOISE_K` spreads AND by more than ``fail_above`` percent.
5. Causes: the components (``compare``'s exact split) that grew from the baseline run to the
   newest by more than NOISE_K of their own spread (the same estimate on the component) and
   by at least :data:`~tracelens.analyze.runs.scaling.VERDICT_MIN_SHARE` of the step's growth.
   ``first_label``: the change point's run (the first of the later part); against a
   ``--baseline``, the earliest run of the unbroken stretch, ending at the newest, of runs
   slower than the baseline by more than the threshold.

On Gaussian noise and a window of 10 this flags about 1% of unchanged runs and catches a
shift of 10 standard deviations nearly always (tests/test_history.py simulates both). A
series with fewer than MIN_HISTORY + 1 runs is not checked (said so, not passed silently),
except against a ``--baseline``, where the limit alone decides while the spread is unknown.
"""

from __future__ import annotations

from statistics import median
from typing import Sequence

from tracelens.analyze.runs.scaling import VERDICT_MIN_SHARE
from tracelens.history.store import setup_text
from tracelens.results.history import (HistoryCheck, MovedComponent, Regression, RunPoint,
                                       RunRecord, SeriesCheck)

NOISE_K = 4.0  # a regression is beyond 4 robust standard deviations of the run-to-run noise
MAD_SIGMA = 1.4826  # median absolute deviation -> standard deviation, for normal noise
MIN_HISTORY = 4  # runs before the change point needed to estimate the spread
DEFAULT_WINDOW = 10
SQRT2 = 2 ** 0.5


def _cost(xs: Sequence[float]) -> float:
    m = median(xs)
    return sum(abs(x - m) for x in xs)


def change_point(values: Sequence[float]) -> int:
    """Where the later part starts (index into ``values``): the least total absolute
    deviation from each part's median; ties go to the latest split (the longest history)."""
    best = min(range(MIN_HISTORY, len(values)),
               key=lambda t: (_cost(values[:t]) + _cost(values[t:]), -t))
    return best


def spread(values: Sequence[float]) -> float:
    """The robust standard deviation of ``values`` (module doc, 2): the larger of the
    scaled median absolute deviation and the scaled median consecutive difference."""
    m = median(values)
    mad = MAD_SIGMA * median(abs(x - m) for x in values)
    diffs = [abs(b - a) for a, b in zip(values, values[1:])]
    return max(mad, MAD_SIGMA * median(diffs) / SQRT2 if diffs else 0.0)


def median_run(runs: Sequence[RunRecord]) -> RunRecord:
    """The lower-median run by step time (ties: the earlier recorded)."""
    order = sorted(range(len(runs)), key=lambda i: (runs[i].step_ns, i))
    return runs[order[(len(order) - 1) // 2]]


def check_series(runs: Sequence[RunRecord], window: int = DEFAULT_WINDOW,
                 fail_above: float = 0.0, baseline: str | None = None
                 ) -> tuple[SeriesCheck, Regression | None]:
    """The verdict on the newest run of one series (module doc); ``runs`` in order."""
    newest = runs[-1]
    recent = list(runs[-(window + 1):])
    values = [r.step_ns for r in recent]
    enough = len(recent) >= MIN_HISTORY + 1
    t = change_point(values) if enough else None

    def skip(reason: str) -> tuple[SeriesCheck, None]:
        return SeriesCheck(newest.series, len(runs), newest.label, "not checked", reason), None

    if baseline is not None:
        found = [i for i, r in enumerate(runs[:-1]) if r.label == baseline]
        if not found:
            why = "is the newest run" if newest.label == baseline else "is not in this series"
            return skip(f"baseline {baseline} {why}")
        base = runs[found[0]]
        after = list(runs[found[0] + 1:])
    elif t is None:
        return skip(f"{len(recent)} of the {MIN_HISTORY + 1} runs a spread needs")
    else:
        base = median_run(recent[:t])
    sigma = spread(values[:t]) if t is not None else None
    limit = fail_above / 100.0 * base.step_ns
    threshold = max(NOISE_K * sigma if sigma is not None else 0.0, limit)
    delta = newest.step_ns - base.step_ns
    pct = 100.0 * delta / base.step_ns if base.step_ns else 0.0
    appeared, vanished = findings_moved(base, newest)
    ok = SeriesCheck(newest.series, len(runs), newest.label, "ok", None, base.label, pct,
                     threshold, appeared, vanished)
    if not delta > threshold:
        return ok, None
    if t is not None and baseline is None:
        first = recent[t]  # the change point: where the later part begins
    else:  # against a named run: the unbroken stretch of slow runs ending at the newest
        first = newest
        for r in reversed(after):
            if r.step_ns - base.step_ns > threshold:
                first = r
            else:
                break
    causes = _causes(base, newest, recent, t, delta)
    return (SeriesCheck(newest.series, len(runs), newest.label, "regressed", None, base.label,
                        pct, threshold, appeared, vanished),
            Regression(label=newest.label, series=newest.series, step_ns=newest.step_ns,
                       baseline_step_ns=base.step_ns, change_pct=pct, first_label=first.label,
                       causes=causes, baseline_label=base.label, spread_ns=sigma,
                       threshold_ns=threshold))


def findings_moved(base: RunRecord, new: RunRecord
                   ) -> tuple[tuple[str, ...] | None, tuple[str, ...] | None]:
    """The titles of ``new``'s findings ``base`` lacks and of ``base``'s gone from ``new``
    (by kind and target); (None, None) when either run was recorded without findings."""
    if base.findings is None or new.findings is None:
        return None, None
    old = {f.key for f in base.findings}
    now = {f.key for f in new.findings}
    return (tuple(f.title for f in new.findings if f.key not in old),
            tuple(f.title for f in base.findings if f.key not in now))


def _causes(base: RunRecord, new: RunRecord, recent: Sequence[RunRecord], t: int | None,
            delta: float) -> tuple[MovedComponent, ...]:
    """The components that moved (module doc, 5), largest growth first."""
    out = []
    for c in sorted(set(base.components) | set(new.components)):
        d = new.components.get(c, 0.0) - base.components.get(c, 0.0)
        own = None if t is None else spread([r.components.get(c, 0.0) for r in recent[:t]])
        if d > 0 and d >= VERDICT_MIN_SHARE * delta and (own is None or d > NOISE_K * own):
            out.append(MovedComponent(c, d))
    return tuple(sorted(out, key=lambda m: (-m.delta_ns, m.component)))


def group_series(runs: Sequence[RunRecord]) -> dict[str, list[RunRecord]]:
    """Runs per series, series in the order of their first run, runs in order."""
    out: dict[str, list[RunRecord]] = {}
    for r in runs:
        out.setdefault(r.series, []).append(r)
    return out


def setup_notes(runs: Sequence[RunRecord]) -> tuple[str, ...]:
    """One line per tag set recorded on several hardware setups or device counts: those are
    separate series, checked apart, never against each other."""
    setups: dict[str, list[str]] = {}
    for rs in group_series(runs).values():
        tags = ",".join(f"{k}={v}" for k, v in sorted(rs[0].tags.items())) or "(no tags)"
        setups.setdefault(tags, []).append(setup_text(rs[0].hardware, rs[0].devices))
    return tuple(f"runs tagged {tags} are on {len(hw)} setups ({'; '.join(hw)}): each is its "
                 "own series, never compared with the others"
                 for tags, hw in setups.items() if len(hw) > 1)


def with_tags(runs: Sequence[RunRecord], tags: dict[str, str]) -> list[RunRecord]:
    return [r for r in runs if all(r.tags.get(k) == v for k, v in tags.items())]


def check(runs: Sequence[RunRecord], window: int = DEFAULT_WINDOW, fail_above: float = 0.0,
          baseline: str | None = None) -> HistoryCheck:
    """``history check``: the newest run of every series (module doc)."""
    verdicts, regressions = [], []
    for rs in group_series(runs).values():
        v, reg = check_series(rs, window, fail_above, baseline)
        verdicts.append(v)
        if reg is not None:
            regressions.append(reg)
    flagged = {r.label for r in regressions}
    return HistoryCheck(runs=tuple(RunPoint.of(r, r.label in flagged) for r in runs),
                        regressions=tuple(regressions), series=tuple(verdicts),
                        window=window, fail_above_pct=fail_above, baseline=baseline,
                        notes=setup_notes(runs))


def flag_history(runs: Sequence[RunRecord], window: int = DEFAULT_WINDOW,
                 fail_above: float = 0.0) -> list[Regression]:
    """Every run that was a regression when it was its series' newest (``show`` marks them):
    the check run on each series' prefix."""
    out = []
    for rs in group_series(runs).values():
        for i in range(len(rs)):
            _, reg = check_series(rs[:i + 1], window, fail_above)
            if reg is not None:
                out.append(reg)
    order = {r.label: i for i, r in enumerate(runs)}
    return sorted(out, key=lambda g: order[g.label])
