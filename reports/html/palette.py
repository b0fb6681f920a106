"""One colour per category (and per timeline component), shared by every chart of the HTML
report, so that "gemm" or "exposed communication" has the same colour everywhere.

Exposed communication is drawn in the ``collective`` colour and exposed memory in the
``memory`` colour: in the per-device timeline they are exactly those categories' exclusive
times (docs/definitions.md#timeline).
"""

from __future__ import annotations

from tracelens.core.model import CATEGORIES

CATEGORY_COLORS: dict[str, str] = {
    "gemm": "#1f77b4",         # blue
    "attention": "#9467bd",    # purple
    "convolution": "#17becf",  # cyan
    "elementwise": "#2ca02c",  # green
    "reduction": "#bcbd22",    # olive
    "other": "#8c564b",        # brown
    "collective": "#d62728",   # red
    "memory": "#ff7f0e",       # orange
}

COLORS: dict[str, str] = {
    **CATEGORY_COLORS,
    "compute": "#34495e",          # all compute categories together (per-step view)
    "exposed_comm": CATEGORY_COLORS["collective"],
    "hidden_comm": "#f2a7a7",      # communication overlapped by compute (light red)
    "exposed_memory": CATEGORY_COLORS["memory"],
    "idle": "#d9d9d9",             # light grey
    "ceiling": "#444444",          # roofline ceilings
    "link_peak": "#444444",
    "critical_path": "#111111",    # the critical path over the step timeline's bars
}

LABELS: dict[str, str] = {
    "exposed_comm": "exposed communication",
    "hidden_comm": "hidden communication",
    "exposed_memory": "exposed memory",
    "idle": "idle",
    "compute": "compute",
}

assert set(CATEGORY_COLORS) == set(CATEGORIES), "every category needs a colour"


def color(key: str | None) -> str:
    """The colour of a category or timeline component (grey for anything unknown)."""
    return COLORS.get(key or "", "#7f7f7f")


def label(key: str) -> str:
    return LABELS.get(key, key)
