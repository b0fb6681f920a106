"""The one protocol every analysis follows, so that each runs the same in one
process or on a Dask cluster, and the engine is written once.

An analysis is three functions of typed, picklable values::

    partial(trace, options) -> Part      # one host's staged trace: small, never its events
    merge(parts, plan)      -> Part      # the hosts' parts, in input order, placed in the job
    finish(part, options)   -> Result    # the typed result (frozen dataclasses, polars frames)

``partial`` runs where the host's file is read (this process or a worker); ``merge`` and
``finish`` run in the caller. :class:`JobPlan` is everything ``merge`` needs of the job
besides the parts: where each host's rows go (ranks, host names, wall-clock shift) and, when
the hosts share no clock, the shifts that align them on collective ends. A multi-round
analysis takes another analysis's ``Result`` in its options.

:func:`run_trace` runs an analysis on a trace already loaded (the facade, tests);
:func:`tracelens.engine.hosts.run` runs it on files, deciding in-process or Dask in one place.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Generic, Protocol, Sequence, TypeVar, runtime_checkable

import polars as pl

from tracelens.loading.combine import Placement, place
from tracelens.core.model import Notice, Trace

Opt = TypeVar("Opt", contravariant=True)
P = TypeVar("P")
R = TypeVar("R", covariant=True)


@dataclass(frozen=True)
class JobPlan:
    """Where each host's part goes in the job (input order) and how the hosts align.

    ``placements[i]``: host i's rank offset, host name and wall-clock shift (what
    :func:`tracelens.loading.combine.place` applies to a frame); ``shifts``: ns to add per (placed)
    host name when the hosts share no wall clock and were aligned on collective ends, else
    None; ``alignment``: how the job is aligned, in words (``meta.alignment``);
    ``unaligned``: the warning when they could not be; ``steps_sources``: each host's step
    source."""

    placements: tuple[Placement, ...]
    alignment: str = ""
    unaligned: Notice | None = None
    shifts: tuple[tuple[str, int], ...] | None = None
    steps_sources: tuple[str, ...] = ()
    # the job's hosts as placed, and whether the trace names each (False: a reader made
    # the name up, as Kineto's rank<N>)
    hosts: tuple[tuple[str, bool], ...] = ()

    def place(self, df: pl.DataFrame, i: int) -> pl.DataFrame:
        """Host ``i``'s frame at its place in the job: ranks offset, host renamed, times
        shifted by the wall-clock placement and the collective-end alignment."""
        out = place(df, self.placements[i])
        if self.shifts and "start_ns" in out.columns and "host" in out.columns:
            by = pl.col("host").cast(pl.String).replace_strict(dict(self.shifts), default=0,
                                               return_dtype=pl.Int64)
            out = out.with_columns(start_ns=pl.col("start_ns") + by,
                                   end_ns=pl.col("end_ns") + by)
        return out

    def concat(self, frames: Sequence[pl.DataFrame]) -> pl.DataFrame:
        """The hosts' frames (input order) placed and stacked into one job frame."""
        return pl.concat([self.place(df, i) for i, df in enumerate(frames)], how="vertical")

    @staticmethod
    def of_trace(trace: Trace) -> "JobPlan":
        """The plan of a trace already combined by the loader: one part, already placed."""
        return JobPlan((Placement(0, None, 0),), trace.meta.alignment,
                       trace.meta.unaligned, None, (trace.meta.steps_source,),
                       tuple((h, i.named) for h, i in trace.meta.hosts.items()))

    @property
    def shift_of(self) -> dict[str, int] | None:
        """:attr:`shifts` as a mapping (None: the hosts were not aligned on collective
        ends)."""
        return None if self.shifts is None else dict(self.shifts)

    @property
    def steps_source(self) -> str:
        """The job's step source: one host keeps its own; several hosts their distinct
        sources joined with ``+``."""
        if len(self.steps_sources) == 1:
            return self.steps_sources[0]
        found = sorted(set(self.steps_sources))
        return found[0] if len(found) == 1 else "+".join(found)


class Analysis(Protocol[Opt, P, R]):
    """One analysis (module doc). Implementations are module-level classes (picklable by
    reference, so a Dask worker can run ``partial``) with no state but constants."""

    def partial(self, trace: Trace, options: Opt) -> P:
        """One host's part: small and typed, never the host's event frames."""
        ...

    def merge(self, parts: Sequence[P], plan: JobPlan) -> P:
        """The job's part from every host's, in input order."""
        ...

    def finish(self, part: P, options: Opt) -> R:
        """The typed result."""
        ...


# What an analysis may offer beyond the protocol, each declared here and asked for with
# ``isinstance`` (the engine finds no method by name).


@runtime_checkable
class NeedsWholeJob(Protocol):
    """An analysis some of whose options are in the job's clock (``critical-path --time``
    counts from the job's first activity, which no host alone knows)."""

    def whole_job(self, options: object) -> bool:
        """Whether, under ``options``, the job must be loaded whole in one process."""
        ...


@runtime_checkable
class Packs(Protocol):
    """An analysis whose parts travel and wait in a smaller form that its ``merge`` reads
    back (:mod:`tracelens.analyze.summary.packed`)."""

    def pack(self, part: object) -> object:
        """``part`` in its transport form."""
        ...


@runtime_checkable
class KeepsOnWorkers(Protocol):
    """An analysis that leaves its parts on the Dask workers that computed them (handles
    travel instead) when the engine's cluster outlives the finish."""

    def keep(self, part: object) -> object:
        """``part`` kept on this worker (its handle), or packed off a worker."""
        ...

    def drop(self, parts: Sequence[object]) -> None:
        """Let go of what :meth:`keep` left on the workers (a job that failed)."""
        ...


def needs_whole_job(analysis: object, options: object) -> bool:
    """Whether ``analysis`` under ``options`` must see the job loaded whole in one process
    (:class:`NeedsWholeJob`); any other analysis: never."""
    return isinstance(analysis, NeedsWholeJob) and bool(analysis.whole_job(options))


@dataclass(frozen=True)
class Task(Generic[Opt]):
    """An analysis and its options: what one map computes on each host."""

    analysis: "Analysis[Opt, object, object]"
    options: Opt = field(default=None)  # type: ignore[assignment]


def run_trace(analysis: "Analysis[Opt, P, R]", trace: Trace, options: Opt) -> R:
    """``analysis`` on a trace already loaded (every host in this process): the same
    partial, merge and finish the engine runs per host."""
    part = analysis.partial(trace, options)
    return analysis.finish(analysis.merge([part], JobPlan.of_trace(trace)), options)
