"""The category and kind names, without polars: the CLI's option choices (``--category``)
need them before any command runs, and ``tracelens --help`` should not pay for importing
polars. :mod:`tracelens.core.model` re-exports them with their polars dtypes."""

from __future__ import annotations

CATEGORIES: tuple[str, ...] = (
    "gemm", "attention", "convolution", "elementwise", "reduction", "other",
    "collective", "memory",
)
"""Categories in exclusive-time priority order (highest first), docs/definitions.md#categories and
#timeline."""

COMPUTE_CATEGORIES: tuple[str, ...] = CATEGORIES[:6]
KINDS: tuple[str, ...] = ("kernel", "memcpy", "memset")
