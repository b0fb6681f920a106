"""The typed result of ``tracelens hlo``: per compiled program its collectives and the
findings, sorted by measured cost. Its JSON (the README contract) is
:func:`tracelens.results.encode.encode` of it."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from tracelens.results import display
from tracelens.hlo.lens import Finding, ProgramLens


@dataclass(frozen=True)
class HloLensResult:
    """Per program its collectives and findings; all findings sorted by measured cost.
    ``findings_total`` counts them all when ``findings`` holds only the top ones
    (:meth:`top`)."""

    programs: tuple[ProgramLens, ...]
    findings: tuple[Finding, ...]
    findings_total: int = field(default=-1, kw_only=True)  # -1: len(findings)
    timed: bool  # joined to a trace's timeline
    problems: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.findings_total < 0:
            object.__setattr__(self, "findings_total", len(self.findings))

    def top(self, n: int | None) -> HloLensResult:
        """This result showing only its ``n`` costliest findings (None: all)."""
        return self if n is None else replace(self, findings=self.findings[:n],
                                              findings_total=self.findings_total)

    # in a notebook: a screen or less (tracelens.results.display); the whole: to_dict()
    __repr__ = display.short_repr
    _repr_html_ = display.html_repr
    __rich__ = display.rich_table
    to_dict = display.to_dict
