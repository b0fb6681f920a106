"""``--format json`` is exactly the generic encoder's output of the typed result (issue 26):
``tracelens.to_json(result)`` of the facade's summary and collectives is what the commands
print, and each command's JSON keys are the result's fields."""

from __future__ import annotations

import dataclasses
import json

from click.testing import CliRunner

import tracelens
from tests.conftest import SAMPLES
from tracelens.api.analysis import TraceAnalysis
from tracelens.cli.commands import main

STRAGGLER = SAMPLES / "mi355x_2x8gpu_straggler"


def _cli(*args: str) -> str:
    res = CliRunner().invoke(main, [*args, "--format", "json", "--quiet"])
    assert res.exit_code == 0, res.output
    return res.stdout


def test_summary_and_collectives_json_are_the_encoded_results() -> None:
    a = TraceAnalysis(tracelens.load(STRAGGLER))
    assert _cli("summarize", str(STRAGGLER)) == tracelens.to_json(a.summary) + "\n"
    assert _cli("collectives", str(STRAGGLER)) == tracelens.to_json(a.collectives) + "\n"


def test_the_json_keys_are_the_declared_fields() -> None:
    a = TraceAnalysis(tracelens.load(STRAGGLER))
    s = json.loads(tracelens.to_json(a.summary))
    # every declared field, in order; an optional one only when set (the encoder's rule:
    # ``memory`` is there with --all and allocator events, which this sample has none of)
    written = [f.metadata.get("json_name", f.name) for f in dataclasses.fields(a.summary)
               if f.metadata.get("json", True) and not (
                   f.metadata.get("json_optional") and getattr(a.summary, f.name) is None)]
    assert "memory" not in written and list(s) == written
    c = json.loads(tracelens.to_json(a.collectives))
    # no filters (mesh axes before, the readers' warnings last)
    assert list(c)[-3:] == ["unmapped", "steps_source", "warnings"]
    # a filter that keeps every activity: the same result, with the filter said
    filtered = json.loads(_cli("collectives", str(STRAGGLER), "--kernel", "."))
    assert list(filtered)[-2:] == ["filters", "warnings"]
    assert filtered["filters"] == {"kernel": "."}
    assert {k: v for k, v in filtered.items() if k != "filters"} == c
