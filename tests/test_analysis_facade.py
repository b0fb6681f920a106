"""The facade's docstring examples run as doctests (from the checkout root, where the bundled
samples are), so the examples in the docs cannot drift from the code."""

from __future__ import annotations

import doctest
from functools import cached_property
from pathlib import Path

import pytest

import tracelens.analysis as facade

ROOT = Path(__file__).resolve().parent.parent


def _examples() -> list[doctest.DocTest]:
    """Every docstring example of the module, including those of the cached properties
    (which ``doctest.testmod`` does not look into)."""
    finder = doctest.DocTestFinder()
    tests = finder.find(facade, globs=vars(facade))
    for name, attr in vars(facade.TraceAnalysis).items():
        if isinstance(attr, cached_property):
            tests += finder.find(attr.func, f"TraceAnalysis.{name}", module=facade,
                                 globs=vars(facade))
    return [t for t in tests if t.examples]


def test_facade_examples_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    tests = _examples()
    names = {t.name.rsplit(".", 1)[-1] for t in tests}
    assert {"timeline", "categories", "roofline", "mfu", "summary", "collectives", "profile",
            "compare", "scaling"} <= names  # every public answer has a running example
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    for t in tests:
        runner.run(t)
    assert runner.summarize(verbose=False).failed == 0


def test_facade_results_are_computed_once() -> None:
    a = facade.load_analysis(ROOT / "sample_traces/mi300x_8gpu_llama_step.xplane.pb")
    assert a.summary is a.summary and a.roofline is a.roofline
    assert a.collectives is a.collectives and a.profile is a.profile
