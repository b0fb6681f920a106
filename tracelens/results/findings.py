"""What to fix first: the ``findings`` that head ``summarize`` and the report.

Each finding is one change a person can make, with the step time the what-if solver projects
it saves (:class:`~tracelens.results.critical_path.WhatIf`) and the measured numbers that
show why. A finding the solver could not project (its target is not on the step's critical
path, or there is no path) keeps ``saved_ns`` null, says why in ``unprojected``, and ranks
after every projected one.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tracelens.results.encode import optional, rounded


@dataclass(frozen=True, slots=True)
class RankedFinding:
    """One finding. ``kind``/``target`` name it across runs (``history``, ``compare``):
    ``hide``/``on_time``/``roofline``/``graph_launch`` (a what-if's change and target) or
    the same words for a finding measured but not projected. ``saved_ns``: the projected
    saving per step (the what-if's); ``saved_pct``: of that step."""

    kind: str
    target: str
    title: str
    saved_ns: int | None
    saved_pct: float | None = field(metadata=rounded(3))
    evidence: str
    command: str
    # why there is no projection (null when there is one)
    unprojected: str | None = field(default=None, metadata=optional())
    # a measured fact of the same window that contradicts it (tracelens.analyze.consistency):
    # the finding is shown marked, not as a plain one
    inconsistent: str | None = field(default=None, metadata=optional())

    @property
    def key(self) -> str:
        """``kind target``: what names the finding from run to run."""
        return f"{self.kind} {self.target}"


@dataclass(frozen=True, slots=True)
class Findings:
    """The ranked findings, and the what-ifs left out as too small to act on (each saves
    under ``floor_pct`` of the step: counted, never dropped silently)."""

    items: tuple[RankedFinding, ...]
    step: int | None
    step_ns: int | None
    floor_pct: float
    below_floor: tuple[str, ...] = field(default=(), metadata=optional())

    def __bool__(self) -> bool:
        return bool(self.items or self.below_floor)


@dataclass(frozen=True, slots=True)
class FindingsChange:
    """Findings that appeared in ``new`` or vanished from ``base`` (``compare``, ``history
    check``), by :attr:`RankedFinding.key`, each with its title in the run that has it."""

    appeared: tuple[RankedFinding, ...]
    vanished: tuple[RankedFinding, ...]

    def __bool__(self) -> bool:
        return bool(self.appeared or self.vanished)


def findings_change(base: Findings | None, new: Findings | None) -> FindingsChange:
    """The findings of ``new`` whose key ``base`` lacks, and those of ``base`` gone from
    ``new`` (empty when either run has no findings recorded)."""
    if base is None or new is None:
        return FindingsChange((), ())
    old = {f.key for f in base.items}
    now = {f.key for f in new.items}
    return FindingsChange(tuple(f for f in new.items if f.key not in old),
                          tuple(f for f in base.items if f.key not in now))
