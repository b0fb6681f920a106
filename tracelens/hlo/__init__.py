"""XLA programs, read for what they say about a trace: the index of a trace's modules by
(host, program id, instruction name) (``index``), loop trip counts (``tripcount``) and the
static half of the HLO lens (``lens``). The programs themselves are decoded by
:mod:`parsers.hlo` (reached through :mod:`tracelens.loading.formats`) into
:mod:`tracelens.core.hlo_model`;
their costs are :mod:`tracelens.cost`'s. See docs/cost-model.md."""
