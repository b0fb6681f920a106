"""The Python facade: :class:`tracelens.api.analysis.TraceAnalysis` and the
functions every command calls."""
