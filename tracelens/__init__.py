"""tracelens: where each training step's GPU time goes, from XProf and rocprofv3 traces.

``tracelens.load(path)`` returns a :class:`~tracelens.core.model.Trace` of polars DataFrames;
``tracelens.summarize(trace)`` the documented summary dict (typed:
:func:`tracelens.analyze.summary.build.summarize`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tracelens.version import __version__

if TYPE_CHECKING:
    from tracelens.core.model import Trace


def load(*args, **kwargs) -> Trace:  # thin wrapper: keeps `import tracelens` cheap
    """Read traces into one classified Trace; see :func:`tracelens.loading.loader.load`."""
    from tracelens.loading.loader import load as _load
    return _load(*args, **kwargs)


def summarize(trace: Trace, **kwargs) -> dict:
    """The summary dict of ``tracelens summarize --format json``: ``encode`` of
    :func:`tracelens.analyze.summary.build.summarize`'s typed Summary."""
    from tracelens.analyze.summary.build import summarize as _summarize
    from tracelens.results.encode import encode
    return encode(_summarize(trace, **kwargs))  # type: ignore[return-value]


def __getattr__(name: str) -> object:
    """``tracelens.Trace`` (:mod:`tracelens.core.model`), ``tracelens.TraceAnalysis``,
    ``load_analysis`` (the facade of :mod:`tracelens.api.analysis`), ``compare`` and ``scaling``
    (:mod:`tracelens.api.runs`),
    the run history and ``explain`` (:mod:`tracelens.api.history`), imported on first
    use: ``import tracelens`` (and so ``tracelens --help``) does not import polars."""
    if name == "Trace":
        from tracelens.core.model import Trace
        return Trace
    if name == "to_json":
        from tracelens.results.encode import to_json
        return to_json
    if name in ("TraceAnalysis", "load_analysis"):
        from tracelens.api import analysis
        return getattr(analysis, name)
    if name in ("compare", "scaling"):
        from tracelens.api import runs
        return getattr(runs, name)
    if name in ("history_record", "history_runs", "history_show", "history_check",
                "history_export", "explain"):
        from tracelens.api import history as analysis_history
        return getattr(analysis_history, name)
    raise AttributeError(f"module 'tracelens' has no attribute {name!r}")


__all__ = ["Trace", "TraceAnalysis", "compare", "explain", "history_check", "history_export",
           "history_record",
           "history_runs", "history_show", "load", "load_analysis", "scaling", "summarize",
           "to_json", "__version__"]
