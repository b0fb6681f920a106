"""What the Kineto reader says about how it read a file, beyond the frames (the file's rank and
world size are the model's: ``TraceMeta.member``)."""

from __future__ import annotations

from dataclasses import dataclass

from tracelens.core.model import FormatFacts, TraceMeta


@dataclass(frozen=True)
class KinetoFacts(FormatFacts):
    """The job's backend, the timestamp precision, the step sources the file offers and the
    link counts of :mod:`parsers.kineto.link`."""

    backend: str | None = None
    timestamps: str = ""  # exact or rounded to the nearest ns, and why
    # the step sources the file offers, in order of preference, joined with " > " ("none":
    # none); tracelens.loading.steps chooses one (meta.steps_source)
    steps_source: str = "none"
    unlinked_activities: int = 0
    collective_kernels: int = 0
    collective_kernels_typed: int = 0
    collective_kernels_sized: int = 0


def kineto_facts(meta: TraceMeta) -> KinetoFacts | None:
    """The Kineto facts of a trace read from one Kineto file (None for anything else)."""
    found = [f for f in meta.format_facts if isinstance(f, KinetoFacts)]
    return found[0] if len(found) == 1 else None
