"""``summarize`` on the Analysis protocol (:mod:`tracelens.protocol`): each host's summary
partial (packed to travel small) and its critical-path graph pieces, merged as the
one-process loader would combine the hosts, reduced to the typed
:class:`~tracelens.results.summary.Summary` with the critical path's top projections."""

from __future__ import annotations

from dataclasses import replace
from typing import Sequence

from tracelens.analyze.critical_path import CriticalPart, CriticalPath, CriticalPathOptions
from tracelens.analyze.packed import is_packed, pack_summary, unpack_summary
from tracelens.analyze.summary_types import SummaryOptions, SummaryPartial
from tracelens.model import Trace
from tracelens.notices import steps_disagree
from tracelens.protocol import JobPlan
from tracelens.results.summary import CriticalPathLines, Summary

CRITICAL_TOP = 3  # projections summarize shows (``tracelens critical-path`` shows them all)

Part = tuple[SummaryPartial, CriticalPart | None]


def _critical(options: SummaryOptions) -> CriticalPathOptions | None:
    """The critical path summarize adds: of ``--step`` (default: the middle step), not under
    per-row filters (a path through some categories' kernels only would be no path)."""
    if options.filters is not None and options.filters.active():
        return None
    return CriticalPathOptions(step=options.step, top=CRITICAL_TOP)


def _critical_part(trace: Trace, options: CriticalPathOptions) -> CriticalPart | None:
    """The host's critical-path part; None when ``--step`` is not one of its steps (the
    job's check says so when no host has it; a job whose hosts differ in their steps gets no
    critical-path lines)."""
    if options.step is not None and options.step not in set(trace.steps["step"].to_list()):
        return None
    return CriticalPath().partial(trace, options)


class SummaryAnalysis:
    """partial: :func:`~tracelens.analyze.summary.summary_partial` and the critical path's;
    merge: :func:`~tracelens.analyze.summary_merge.merge_partials` on the job's alignment;
    finish: :func:`~tracelens.analyze.summary_reduce.reduce_summary` and
    :class:`~tracelens.analyze.critical_path.CriticalPath`'s top projections."""

    def partial(self, trace: Trace, options: SummaryOptions) -> Part:
        from tracelens.analyze.summary import summary_partial

        crit = _critical(options)
        return summary_partial(trace, options), \
            None if crit is None else _critical_part(trace, crit)

    def pack(self, part: Part) -> Part:
        """The partial to travel and wait small (:mod:`tracelens.analyze.packed`)."""
        return pack_summary(part[0]), part[1]

    def merge(self, parts: Sequence[Part], plan: JobPlan) -> Part:
        crits = [c for _, c in parts]
        crit = None if any(c is None for c in crits) else \
            CriticalPath().merge(crits, plan)  # type: ignore[arg-type]
        return self._merge_summary([s for s, _ in parts], plan), crit

    @staticmethod
    def _merge_summary(parts: Sequence[SummaryPartial], plan: JobPlan) -> SummaryPartial:
        from tracelens.analyze.summary_merge import merge_partials

        if len(parts) == 1 and parts[0].host_facts is None:  # a trace the loader combined
            return unpack_summary(parts[0]) if is_packed(parts[0]) else parts[0]
        shifts = plan.shift_of
        merged = merge_partials(list(parts), shifts, plan.alignment if shifts is not None
                                else None)
        mixed = steps_disagree(list(plan.steps_sources))
        if mixed:
            merged = replace(merged, steps_source=plan.steps_source,
                             warnings=(*merged.warnings, mixed))
        return merged

    def finish(self, part: Part, options: SummaryOptions) -> Summary:
        from tracelens.analyze.summary_reduce import reduce_summary

        summary = reduce_summary([part[0]], options)
        crit = _critical(options)
        if part[1] is None or crit is None:
            return summary
        res = CriticalPath().finish(part[1], crit)
        if not res.paths:
            return summary
        longest = max(res.paths, key=lambda p: (p.length_ns, -p.rank, -p.device))
        return replace(summary, critical_path=CriticalPathLines(
            longest.step, longest.length_ns, longest.host, longest.device,
            longest.composition, res.what_if[:CRITICAL_TOP]))
