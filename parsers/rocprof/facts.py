"""What the rocprofv3 and RPD readers say about how they read a file, beyond the frames: its
processes on the host clock (what the core reads of it: the model's
:class:`~tracelens.core.model.HostClockFacts`) and the schema of the output."""

from __future__ import annotations

from dataclasses import dataclass

from tracelens.core.model import HostClockFacts, TraceMeta


@dataclass(frozen=True)
class RocprofFacts(HostClockFacts):
    """Each process of the file (a rank) with its lifetime on the host clock, the database's
    schema version (rocpd ``rocpd_metadata``, RPD ``rocpd_metadata``) or the CSV layout
    (``6.2``, ``6.3-6.4``, ``7.x``, ``rocpd convert``); None where the format has none or the
    file does not say."""

    schema_version: str | None = None
    layout: str | None = None


def rocprof_facts(meta: TraceMeta) -> list[RocprofFacts]:
    """The rocprofv3/RPD facts of every file behind ``meta``, in reading order."""
    return meta.facts(RocprofFacts)
