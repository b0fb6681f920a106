"""The facade's docstring examples run as doctests (from the checkout root, where the bundled
samples are), so the examples in the docs cannot drift from the code."""

from __future__ import annotations

import doctest
from functools import cached_property
from pathlib import Path

import pytest

import tracelens.api.analysis as facade
import tracelens.api.runs as runs

ROOT = Path(__file__).resolve().parent.parent


def _examples() -> list[doctest.DocTest]:
    """Every docstring example of the module, including those of the cached properties
    (which ``doctest.testmod`` does not look into)."""
    finder = doctest.DocTestFinder()
    tests = finder.find(facade, globs=vars(facade))
    tests += finder.find(runs, globs={**vars(facade), **vars(runs)})  # compare, scaling
    for cls in facade.TraceAnalysis.__mro__[:-1]:  # with the frame answers' mixin
        for name, attr in vars(cls).items():
            if isinstance(attr, cached_property) or (callable(attr)
                                                     and not name.startswith("_")):
                tests += finder.find(getattr(attr, "func", attr), f"TraceAnalysis.{name}",
                                     module=facade, globs=vars(facade))
    return [t for t in tests if t.examples]


def test_facade_examples_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    tests = _examples()
    names = {t.name.rsplit(".", 1)[-1] for t in tests}
    assert {"timeline", "categories", "roofline", "mfu", "summary", "collectives", "profile",
            "compare", "scaling", "kernels", "idle", "hlo", "window"} <= names  # each answer
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    for t in tests:
        runner.run(t)
    assert runner.summarize(verbose=False).failed == 0


def test_facade_results_are_computed_once() -> None:
    a = facade.load_analysis(ROOT / "sample_traces/mi300x_8gpu_llama_step.xplane.pb")
    assert a.summary is a.summary and a.roofline is a.roofline
    assert a.collectives is a.collectives and a.profile is a.profile


def test_answers_from_paths_equal_answers_from_the_loaded_trace() -> None:
    """From paths the job-level answers run per host on the engine; they equal the same
    analyses on the whole job loaded here (the 2-host sample: placement and merge)."""
    from tracelens.loading.loader import load
    from tracelens.results.encode import encode

    path = ROOT / "sample_traces/mi355x_2x8gpu_straggler"
    by_paths, loaded = facade.TraceAnalysis(path, workers=1), facade.TraceAnalysis(load([path]))
    assert "trace" not in by_paths.__dict__
    assert encode(by_paths.collectives) == encode(loaded.collectives)
    assert by_paths.summary.headline == loaded.summary.headline
    assert by_paths.summary.devices == loaded.summary.devices
    assert encode(by_paths.hlo) == encode(loaded.hlo)
    w1, w2 = by_paths.window(), loaded.window()
    assert (w1.step, w1.start_ns, w1.end_ns) == (w2.step, w2.start_ns, w2.end_ns)
    assert w1.events.equals(w2.events)
    assert "trace" not in by_paths.__dict__  # none of them loaded the whole job here
    assert runs.compare(by_paths, loaded).delta_ns == 0.0


def test_top_level_exports() -> None:
    import tracelens

    assert tracelens.compare is runs.compare and tracelens.scaling is runs.scaling
    assert tracelens.TraceAnalysis is facade.TraceAnalysis
