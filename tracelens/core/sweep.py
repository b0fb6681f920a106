"""The optional C extension ``_tracelens_sweep`` (``tracelens/_sweep.c``) and the one switch to
its references.

Each of its functions has a numpy or Python reference beside its caller, which is also the
path when no compiler was there at install; the two give identical results.
``TRACELENS_SWEEP=numpy`` runs the references where the extension is built (tests, and a user
who doubts a number).
"""

from __future__ import annotations

import os
from types import ModuleType

try:
    import _tracelens_sweep as _EXT
except ImportError:
    _EXT = None

SWEEP_ENV = "TRACELENS_SWEEP"


VERSIONS = {"WALK_ABI": 2}
"""The version each part of the extension must speak where it is not 1 (``WALK_ABI`` 2: a host
thread's time before its first node is ``host``)."""


def extension(abi: str) -> ModuleType | None:
    """The extension, when it is built and speaks the expected version of ``abi`` (``ABI``:
    the timeline sweep; ``WALK_ABI``, ``SOLVE_ABI``: the critical path's; ``HIDDEN_ABI``: the
    covered time; :data:`VERSIONS`), else None (built from other sources: not used)."""
    want = VERSIONS.get(abi, 1)
    return _EXT if _EXT is not None and getattr(_EXT, abi, None) == want else None


def references_forced() -> bool:
    """Whether :data:`SWEEP_ENV` asks for the references instead of the extension."""
    return os.environ.get(SWEEP_ENV, "").strip().lower() == "numpy"
