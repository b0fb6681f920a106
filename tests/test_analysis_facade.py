"""The facade's docstring examples run as doctests (from the checkout root, where the bundled
samples are), so the examples in the docs cannot drift from the code."""

from __future__ import annotations

import doctest
from pathlib import Path

import pytest

import tracelens.analysis

ROOT = Path(__file__).resolve().parent.parent


def test_facade_examples_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    result = doctest.testmod(tracelens.analysis, optionflags=doctest.ELLIPSIS)
    assert result.attempted >= 10  # the examples were found and run
    assert result.failed == 0


def test_facade_results_are_computed_once() -> None:
    a = tracelens.analysis.load_analysis(ROOT / "sample_traces/mi300x_8gpu_llama_step.xplane.pb")
    assert a.summary is a.summary and a.roofline is a.roofline
