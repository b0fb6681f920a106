"""Runs against runs through the facade: compare (where a change made training slower) and
scaling (why a job scaled as it did), from TraceAnalysis objects or paths."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence
from tracelens.core.errors import TraceUsageError
if TYPE_CHECKING:
    from tracelens.analyze.runs.scaling import RunProfile
    from tracelens.results.memory import MemoryChange
    from tracelens.results.runs import Comparison, Scaling
    from tracelens.results.summary import Summary
from tracelens.api.analysis import TraceAnalysis


def _analyses(runs: Sequence["TraceAnalysis | str | Path"], inputs: dict[str, Any]
              ) -> list[TraceAnalysis]:
    return [r if isinstance(r, TraceAnalysis) else TraceAnalysis(r, **inputs) for r in runs]


def _profiles(runs: list[TraceAnalysis], summaries: bool = False
              ) -> "list[tuple[RunProfile, str]]":
    """Each run's (profile, steps source); runs of one path each, read with the same
    options, share one engine cluster (``tracelens compare``/``scaling``). ``summaries``:
    each run's :attr:`TraceAnalysis.summary` too, from the same read of its files (compare's
    findings; a run's file is read once)."""
    first = runs[0]._in
    together = all(len(r._paths) == 1 and not r._here and "_profile_and_source" not in
                   r.__dict__ and r._in == replace(first, paths=r._in.paths) for r in runs)
    if together:
        from tracelens.analyze.runs.profile_parts import run_profiles
        from tracelens.engine.protocol import Task
        extra = [Task(*r._summary_task()) for r in runs[:1]] if summaries and not any(
            "summary" in r.__dict__ for r in runs) else []
        found = run_profiles([r._in.paths[0] for r in runs], first.rows(), first.load(),
                             first.engine(), extra)
        for r, f in zip(runs, found):
            r.__dict__["_profile_and_source"] = f[:2]
            # a summary whose hosts each picked their own median step has no path: it is left
            # to the facade, which solves the path again on the job's step
            if extra and not _steps_differ(f[2]):
                r.__dict__["summary"] = f[2].with_filters(r._in.active())
    return [r._profile_and_source for r in runs]


def _steps_differ(summary: "Summary") -> bool:
    """Whether ``summary`` has no critical path because its hosts picked different steps."""
    from tracelens.loading.step_choice import STEPS_DIFFER

    return summary.critical_path is None and any(
        STEPS_DIFFER in (f.unprojected or "") for f in summary.findings.items)


def compare(base: "TraceAnalysis | str | Path", new: "TraceAnalysis | str | Path",
            top: int = 15, fail_above: float | None = None, **inputs: Any) -> Comparison:
    """Where ``new`` spends more or less time per step than ``base`` (``tracelens
    compare``); either may be a path (read with ``inputs``: :class:`TraceAnalysis`'s
    keywords). ``fail_above``: the gate (``gate.regression``: the step time grew by more
    than that percent). Runs whose filters leave nothing to compare are an input error.

    >>> import tracelens
    >>> a = load_analysis("sample_traces/mi300x_8gpu_llama_step.xplane.pb")
    >>> c = compare(a, a)
    >>> c.delta_ns, len(c.only_base), len(c.only_new)
    (0.0, 0, 0)
    """
    from tracelens.analyze.runs.compare import check_comparable, comparison
    from tracelens.results.runs import Gate

    a, b = _analyses([base, new], inputs)
    fail_above = None if fail_above is None else float(fail_above)  # as --fail-above reads it
    ((pa, sa), (pb, sb)), active = _profiles([a, b], summaries=True), a._in.active()
    for p in (pa, pb):
        check_comparable(p, active)
    res = comparison(pa, pb, top=top)
    regressed = (fail_above is not None and res.delta_pct is not None
                 and res.delta_pct > fail_above)
    from tracelens.results.findings import findings_change
    return replace(res, base=replace(res.base, steps_source=sa),
                   new=replace(res.new, steps_source=sb), filters=active or None,
                   gate=Gate(fail_above, regressed),
                   findings=findings_change(a.summary.findings, b.summary.findings),
                   memory=_memory_change(a, b))


def _memory_change(a: TraceAnalysis, b: TraceAnalysis) -> "tuple[MemoryChange, ...]":
    """Each allocator's peak in both runs, where both record allocator events (read apart
    from the profiles: no step or device is needed for a peak)."""
    from tracelens.analyze.memory import analyze, memory_changes, read_memory

    mems = [read_memory(t._memory_paths())[0] for t in (a, b)]
    if any(m.is_empty() for m in mems):
        return ()
    return memory_changes(analyze(mems[0], top=1), analyze(mems[1], top=1))


def scaling(runs: Sequence["TraceAnalysis | str | Path"], strong: bool = False,
            **inputs: Any) -> Scaling:
    """Why step time changes from each run to the next (``tracelens scaling``); runs may be
    paths (read with ``inputs``). ``strong``: the same global work in every run.

    >>> a = load_analysis("sample_traces/mi300x_8gpu_llama_step.xplane.pb")
    >>> s = scaling([a, a])
    >>> len(s.transitions), s.transitions[0].delta_ns
    (1, 0.0)
    """
    from tracelens.analyze.runs.scaling import scaling as build

    if len(runs) < 2:
        raise TraceUsageError("scaling needs at least two runs")
    analyses = _analyses(runs, inputs)
    found = _profiles(analyses)
    return build([p for p, _ in found], [s for _, s in found], strong=strong,
                 filters=analyses[0]._in.active())
