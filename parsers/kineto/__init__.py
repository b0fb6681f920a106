"""PyTorch profiler (Kineto) Chrome-trace JSON: ``*.pt.trace.json[.gz]``, one file per rank.

:func:`read`: one rank's file into a :class:`tracelens.core.model.Trace` (docs/kineto.md).
The writer (a Trace as Kineto JSON, for the tests) is ``tracelens_dev.writers.kineto``.
"""

from __future__ import annotations

from pathlib import Path

from tracelens.core.model import Trace

FORMAT = "kineto"


def read(path: Path) -> Trace:
    from parsers.kineto import reader as _read
    return _read.read(Path(path))


__all__ = ["FORMAT", "read"]
