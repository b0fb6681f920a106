"""The typed summarize result: computed once (the report renders what summarize computed),
its JSON form is the contract, and the renderers do not aggregate."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

import tracelens
from tests.conftest import SAMPLES
from tracelens.analyze.summary.build import summarize
from tracelens.cli.commands import main
from tracelens.results.encode import encode

SAMPLE = SAMPLES / "mi300x_8gpu_llama_step.xplane.pb"


def test_report_runs_the_collectives_analysis_once(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    import tracelens.analyze.communication.collectives as C

    calls = []
    real = C.analyze_collectives
    monkeypatch.setattr(C, "analyze_collectives",
                        lambda *a, **k: calls.append(1) or real(*a, **k))
    out = tmp_path / "r.html"
    res = CliRunner().invoke(main, ["report", "--quiet", "-o", str(out), str(SAMPLE)])
    assert res.exit_code == 0, res.output
    assert len(calls) == 1
    s = summarize(tracelens.load(SAMPLE), top=100)
    # the collectives section is the summary's full report (worst instances included)
    assert s.collectives.worst and s.collectives.instances > 0
    assert encode(s)["collectives"] == {"by_type": encode(s.collectives.by_type),
                                        "stragglers": encode(s.summary_collectives.stragglers)}


def test_typed_values_are_unrounded_and_json_rounds() -> None:
    s = summarize(tracelens.load(SAMPLE))
    j = encode(s)
    h = s.headline
    assert h.busy_pct == 100.0 * h.totals.busy_ns / h.totals.span_ns  # as computed
    assert j["headline"]["busy_pct"] == round(h.busy_pct, 3)
    assert orjson.dumps(j) == orjson.dumps(tracelens.summarize(tracelens.load(SAMPLE)))


def test_category_totals_are_the_device_sums() -> None:
    s = summarize(tracelens.load(SAMPLE))
    for c in s.category_totals:
        assert c.exclusive_ns == sum(x.exclusive_ns for d in s.devices for x in d.categories
                                     if x.category == c.category)
    assert [c.exclusive_ns for c in s.category_totals] == sorted(
        (c.exclusive_ns for c in s.category_totals), reverse=True)
