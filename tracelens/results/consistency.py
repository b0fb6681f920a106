"""The consistency gate's result: which checks ran on an explanation and what contradicts it.

Every explanation ``summarize`` and ``critical-path`` give (a path's shares, a what-if's
saving, a finding, "nothing found to fix") is checked against the measured facts of the same
window (the timeline breakdown, the idle breakdown, the collectives' arrivals:
:mod:`tracelens.analyze.consistency`). A :class:`Violation` names the explanation, what it
claims and the most the facts allow, with the fact in words. Times are integer ns.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Violation:
    """One explanation a measured fact contradicts. ``check``: which rule (docs/critical-path.md,
    "The consistency gate"); ``subject``: the explanation (``path host/GPU3``, ``hide
    all-gather``, ``on_time host/GPU3``, ``findings``); ``claimed_ns``: what it says (idle on
    the path, a saving, ...); ``bound_ns``: the most the facts allow; ``fact``: the fact
    that contradicts it, with its figures."""

    check: str
    subject: str
    claimed_ns: int
    bound_ns: int
    fact: str


@dataclass(frozen=True, slots=True)
class Consistency:
    """The checks run (names, in the order they ran) and every violation found; no
    violation: every explanation shown agrees with the measured facts the checks read."""

    checks: tuple[str, ...] = ()
    violations: tuple[Violation, ...] = ()

    def subjects(self) -> dict[str, str]:
        """Per contradicted explanation, the first fact against it (for marking it)."""
        out: dict[str, str] = {}
        for v in self.violations:
            out.setdefault(v.subject, v.fact)
        return out

    def lines(self, most: int = 5) -> list[str]:
        """What stderr says (each after ``warning: ``), in every format: one line a
        violation, at most ``most``, then how many more the JSON's ``consistency`` holds."""
        out = [f"inconsistent: {v.subject} ({v.check}): {v.fact}"
               for v in self.violations[:most]]
        if len(self.violations) > most:
            out.append(f"inconsistent: {len(self.violations) - most} more contradicted "
                       "explanations (--format json: consistency)")
        return out
