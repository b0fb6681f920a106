"""Shared helpers of the synthetic-trace tests: write a scenario, load it, compare with truth."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

import tracelens
from parsers.xprof_write import write
from tracelens.model import Trace
from tracelens.synth import Synthetic, build
from tracelens.synth.scenario import Scenario


def write_and_load(syn: Synthetic, tmp: Path) -> tuple[Trace, list[Path]]:
    """Write the synthetic trace as XSpace (a file for one host, a log dir for several) and
    read it back through ``tracelens.load``."""
    if syn.scenario.hosts == 1:
        files = write(syn.trace, tmp / "synthetic.xplane.pb")
        return tracelens.load(files[0]), files
    files = write(syn.trace, tmp / "logs")
    return tracelens.load(tmp / "logs"), files


def by_category(rows: list[dict[str, Any]]) -> dict[str, dict[str, int]]:
    return {r["category"]: {k: r[k] for k in ("count", "sum_ns", "exclusive_ns")} for r in rows}


def assert_summary_matches_truth(summary: dict[str, Any], truth: dict[str, Any]) -> None:
    """Whole-trace timeline and categories and per-step timelines of every device, exactly."""
    got = {(d["host"], d["device"]): d for d in summary["devices"]}
    assert len(got) == len(truth["devices"])
    for want in truth["devices"]:
        key = (want["host"], want["device"])
        d = got[key]
        assert d["rank"] == want["rank"], key
        assert d["timeline"] == want["timeline"], key
        assert by_category(d["categories"]) == by_category(want["categories"]), key
        assert [(s["step"], s["start_ns"], s["end_ns"]) for s in d["steps"]] == [
            (s["step"], s["start_ns"], s["end_ns"]) for s in want["steps"]], key
        for gs, ws in zip(d["steps"], want["steps"]):
            assert gs["timeline"] == ws["timeline"], (key, ws["step"])


def assert_step_categories_match(trace: Trace, truth: dict[str, Any]) -> None:
    """Per-step category numbers: ``summarize(step=s)`` restricts every number to the step."""
    steps = sorted({s["step"] for d in truth["devices"] for s in d["steps"]})
    for step in steps:
        got = {(d["host"], d["device"]): d
               for d in tracelens.summarize(trace, step=step)["devices"]}
        for want in truth["devices"]:
            ws = next(s for s in want["steps"] if s["step"] == step)
            key = (want["host"], want["device"])
            if not ws["categories"]:
                assert key not in got
                continue
            assert by_category(got[key]["categories"]) == by_category(ws["categories"]), (
                key, step)


def collective_rows(trace: Trace) -> pl.DataFrame:
    """Collective kernels with their per-device occurrence index of the same op."""
    return (trace.events.filter(pl.col("category") == "collective")
            .sort("rank", "device", "start_ns")
            .with_columns(k=pl.int_range(pl.len()).over("rank", "device", "op"),
                          dur=pl.col("end_ns") - pl.col("start_ns")))


def synthetic(**kw: Any) -> Synthetic:
    return build(Scenario(**kw))
