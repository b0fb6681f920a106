"""What the rocprofv3 and RPD readers say about how they read a file, beyond the frames: the
schema of the output (each process's lifetime on the host clock is the model's:
``TraceMeta.processes``, ``TraceMeta.clock``)."""

from __future__ import annotations

from dataclasses import dataclass

from tracelens.model import FormatFacts, TraceMeta


@dataclass(frozen=True)
class RocprofFacts(FormatFacts):
    """The database's schema version (rocpd ``rocpd_metadata``, RPD ``rocpd_metadata``) or the
    CSV layout (``6.2``, ``6.3-6.4``, ``7.x``, ``rocpd convert``); None where the format has
    none or the file does not say."""

    schema_version: str | None = None
    layout: str | None = None


def rocprof_facts(meta: TraceMeta) -> list[RocprofFacts]:
    """The rocprofv3/RPD facts of every file behind ``meta``, in reading order."""
    return [f for f in meta.format_facts if isinstance(f, RocprofFacts)]
