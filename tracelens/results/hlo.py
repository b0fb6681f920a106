"""The typed result of ``tracelens hlo``: per compiled program its collectives and the
findings, sorted by measured cost (JSON: :func:`tracelens.results.jsonify.lens_json`)."""

from __future__ import annotations

from dataclasses import dataclass

from tracelens.hlo.lens import Finding, ProgramLens


@dataclass(frozen=True)
class HloLensResult:
    """Per program its collectives and findings; all findings sorted by measured cost."""

    programs: tuple[ProgramLens, ...]
    findings: tuple[Finding, ...]
    timed: bool  # joined to a trace's timeline
    problems: tuple[str, ...] = ()
