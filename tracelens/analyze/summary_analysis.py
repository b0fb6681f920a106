"""``summarize`` on the Analysis protocol (:mod:`tracelens.protocol`): each host's summary
partial (packed to travel small), merged as the one-process loader would combine the hosts,
reduced to the typed :class:`~tracelens.results.summary.Summary`."""

from __future__ import annotations

from dataclasses import replace
from typing import Sequence

from tracelens.analyze.packed import is_packed, pack_summary, unpack_summary
from tracelens.analyze.summary_types import SummaryOptions, SummaryPartial
from tracelens.model import Trace
from tracelens.notices import steps_disagree
from tracelens.protocol import JobPlan
from tracelens.results.summary import Summary


class SummaryAnalysis:
    """partial: :func:`~tracelens.analyze.summary.summary_partial`; merge:
    :func:`~tracelens.analyze.summary_merge.merge_partials` on the job's alignment; finish:
    :func:`~tracelens.analyze.summary_reduce.reduce_summary`."""

    def partial(self, trace: Trace, options: SummaryOptions) -> SummaryPartial:
        from tracelens.analyze.summary import summary_partial

        return summary_partial(trace, options)

    def pack(self, part: SummaryPartial) -> SummaryPartial:
        """The partial to travel and wait small (:mod:`tracelens.analyze.packed`)."""
        return pack_summary(part)

    def merge(self, parts: Sequence[SummaryPartial], plan: JobPlan) -> SummaryPartial:
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

    def finish(self, part: SummaryPartial, options: SummaryOptions) -> Summary:
        from tracelens.analyze.summary_reduce import reduce_summary

        return reduce_summary([part], options)
