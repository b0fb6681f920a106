"""Filters: host, category, kernel regex and time window narrow what every analysis sees."""

from __future__ import annotations

import polars as pl
import pytest

import tracelens
from tracelens.loading.filters import Filters, apply, parse_time, parse_window, trace_zero

from .conftest import SAMPLES
from .synth_helpers import timeline_numbers

SAMPLE = SAMPLES / "mi300x_8gpu_llama_step.xplane.pb"


def test_parse_time_units() -> None:
    assert parse_time("1500") == 1500
    assert parse_time("2.5ms") == 2_500_000
    assert parse_time("40us") == parse_time("40µs") == 40_000
    assert parse_time("1s") == 10**9
    assert parse_window("10ms:") == (10_000_000, None)
    assert parse_window(":5us") == (None, 5_000)
    for bad in ("ten", "5ms:1ms", "1h", "3"):
        with pytest.raises(ValueError):
            parse_window(bad) if bad != "ten" else parse_time(bad)


def test_category_and_kernel_filters_keep_only_matching_events() -> None:
    t = tracelens.load(SAMPLE)
    g = apply(t, Filters(categories=("gemm",)))
    assert set(g.events["category"].cast(pl.String)) == {"gemm"}
    assert g.events.height == t.events.filter(pl.col("category") == "gemm").height
    k = apply(t, Filters(kernel="^nccl"))
    assert k.events.height == t.events.filter(pl.col("name").cat.starts_with("nccl")).height
    with pytest.raises(ValueError):
        apply(t, Filters(categories=("matmul",)))


def test_host_filter_on_two_hosts() -> None:
    t = tracelens.load(SAMPLES / "mi355x_2x8gpu_straggler")
    hosts = sorted(set(t.devices["host"]))
    one = apply(t, Filters(hosts=(hosts[1],)))
    assert set(one.events["host"]) == set(one.devices["host"]) == {hosts[1]}
    assert one.events.height == t.events.filter(pl.col("host") == hosts[1]).height
    with pytest.raises(ValueError):
        apply(t, Filters(hosts=("nohost",)))


def test_time_window_clips_like_a_step() -> None:
    """A window equal to a step gives that step's numbers."""
    t = tracelens.load(SAMPLE)
    st = t.steps.filter(pl.col("step") == 1).row(0, named=True)
    zero = trace_zero(t)
    w = apply(t, Filters(time=(st["start_ns"] - zero, st["end_ns"] - zero)))
    assert w.events["start_ns"].min() >= st["start_ns"]
    assert w.events["end_ns"].max() <= st["end_ns"]
    by_step = tracelens.summarize(t, step=1)
    by_time = tracelens.summarize(w, step=1)
    for a, b in zip(by_step["devices"], by_time["devices"]):
        # the idle parts differ only where a gap's ending activity lies outside the window
        assert timeline_numbers(a["timeline"]) == timeline_numbers(b["timeline"])
    # FLOPs of an activity cut by the window shrink in proportion
    assert w.events["flops"].sum() <= t.events["flops"].sum()


def _cli(*args: str) -> tuple[int, str, str]:
    from click.testing import CliRunner

    from tracelens.cli.commands import main

    r = CliRunner().invoke(main, list(args))
    return r.exit_code, r.stdout, r.stderr


def test_filters_on_the_command_line() -> None:
    import json

    path = str(SAMPLES / "mi355x_2x8gpu_straggler")
    code, out, err = _cli("summarize", path, "--format", "json", "--category", "gemm",
                          "--host", "mi355x-node1")
    assert code == 0, err
    s = json.loads(out)
    assert s["filters"]["category"] == ["gemm"] and s["filters"]["host"] == ["mi355x-node1"]
    assert {d["host"] for d in s["devices"]} == {"mi355x-node1"}
    assert {c["category"] for d in s["devices"] for c in d["categories"]} == {"gemm"}
    code, _, err = _cli("summarize", path, "--host", "nohost")
    assert code == 2 and err.startswith("error: ") and "nohost" in err
    code, out, err = _cli("collectives", path, "--format", "json", "--time", "0:5ms")
    assert code == 0, err
    assert json.loads(out)["filters"] == {"time_ns": [0, 5_000_000]}


def test_all_rows_past_16_devices(tmp_path) -> None:
    from tracelens_dev.writers.xspace import write
    from tracelens_dev.synth import Scenario, build

    syn = build(Scenario(hosts=3, gpus=8, steps=1, layers=1, seed=3))
    write(syn.trace, tmp_path / "run")
    code, short, err = _cli("summarize", str(tmp_path / "run"))
    assert code == 0, err
    assert "Devices (3 of 24; slowest: last in most collectives" in short
    code, full, _ = _cli("summarize", str(tmp_path / "run"), "--all")
    assert "median:" not in full
    assert all(f"mi355x-node{h}/{g}" in full for h in range(3) for g in range(8))
    rows = [line.split(":")[0] for line in short.splitlines()
            if line.startswith(("median:", "slowest:", "fastest:"))]
    assert rows == ["median", "slowest", "fastest"]  # the one device table (steps: a row each)
