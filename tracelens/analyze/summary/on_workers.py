"""The summary's partials left on their Dask workers: where the engine's
cluster outlives the finish (:attr:`tracelens.engine.hosts.MapOptions.keep`), each host's summary
partial stays on the worker that mapped it and a handle travels instead; the finish has one
worker merge and reduce them (Dask moves the partials between workers) and brings back only
the typed :class:`~tracelens.results.summary.Summary`. The client never holds the job's
collective rows (1,600 a host on the 64-host benchmark job) nor the reduce's work on them: the same
merge and reduce as in this process, so the same result, byte for byte."""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Sequence

from tracelens.engine.worker_store import Resident, keep, still_there, take
from tracelens.analyze.summary.packed import pack_summary
from tracelens.analyze.summary.types import SummaryOptions, SummaryPartial
from tracelens.engine.protocol import JobPlan

if TYPE_CHECKING:
    from tracelens.results.summary import Summary


def keep_summary(part: SummaryPartial) -> SummaryPartial | Resident:
    """``part`` packed and kept in this Dask worker's process (its handle returned); off a
    worker, ``part`` packed (it travels as before)."""
    packed = pack_summary(part)
    return keep(packed) or packed


Merge = Callable[[Sequence[SummaryPartial], JobPlan], SummaryPartial]


def _reduce(plan: JobPlan, options: SummaryOptions, merge: Merge, *parts: SummaryPartial
            ) -> "Summary":
    from tracelens.analyze.summary.reduce import reduce_summary

    merged = merge(parts, plan)
    del parts
    return reduce_summary([merged], options)


def resident_summary(parts: Sequence[SummaryPartial | Resident], plan: JobPlan,
                     options: SummaryOptions, merge: Merge) -> "Summary":
    """The job's summary reduced on a worker from its hosts' partials (kept ones taken
    where they stayed, any other sent along), in input order: ``merge`` (the summary's
    merge of partials, a module-level function), then the reduce."""
    from tracelens.engine.cluster import connect

    where = [p for p in parts if isinstance(p, Resident)]
    client = connect(where[0].scheduler)
    futures: list[object] = []
    try:
        still_there(client, where)
        args = []
        for p in parts:
            if isinstance(p, Resident):
                futures.append(client.submit(take, p.key, workers=[p.worker],
                                             allow_other_workers=False, pure=False))
                args.append(futures[-1])
            else:
                args.append(p)
        futures.append(client.submit(_reduce, plan, options, merge, *args, pure=False))
        return futures[-1].result()  # type: ignore[attr-defined, no-any-return]
    finally:
        client.cancel(futures)
        client.close()
