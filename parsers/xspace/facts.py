"""What the XSpace reader says about how it read a file, beyond the frames: which decoder ran
(the C extension or the per-event Python reader; both give the same Trace)."""

from __future__ import annotations

from dataclasses import dataclass

from tracelens.core.model import FormatFacts, TraceMeta


@dataclass(frozen=True)
class XSpaceFacts(FormatFacts):
    decoder: str = "python"  # "c" or "python"


def decoders(meta: TraceMeta) -> dict[str, str]:
    """XSpace path -> the decoder that read it, for every XSpace file behind ``meta``."""
    return {f.path: f.decoder for f in meta.format_facts if isinstance(f, XSpaceFacts)}
