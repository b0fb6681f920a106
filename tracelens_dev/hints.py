"""What the trace writers need beyond a trace's frames to write a synthetic trace faithfully
(docs/synthetic.md). The generator's output carries them (its ``trace.meta`` is a
:class:`SynthMeta`); readers never produce them, so they are no part of
:mod:`tracelens.core.model` (issue 26)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tracelens.core.model import Trace, TraceMeta


@dataclass
class WriterHints:
    """Launch geometry by kernel name, the device model's plane stats, line-name and
    ``kernel_details`` styles, the scenario the trace was built from, and each host's thread
    of the step annotations."""

    kernels: dict[str, dict[str, Any]] = field(default_factory=dict)  # launch geometry by name
    plane_stats: list[list[Any]] = field(default_factory=list)
    line_names: str | None = None
    kernel_details: str | None = None
    scenario: dict[str, Any] = field(default_factory=dict)
    device_model: str | None = None
    python_tids: dict[str, int] = field(default_factory=dict)  # per host: the step thread


@dataclass
class SynthMeta(TraceMeta):
    """A synthetic trace's meta: the model's, and the writers' hints."""

    writer: WriterHints = field(default_factory=WriterHints)


def writer_hints(trace: Trace) -> WriterHints:
    """The hints a trace carries: a synthetic trace's own, else none (a trace read from a
    file: the writers derive what they need from its frames)."""
    return trace.meta.writer if isinstance(trace.meta, SynthMeta) else WriterHints()
