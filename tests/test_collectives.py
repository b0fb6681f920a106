"""Collectives: exposure per activity, matching across devices, skew, wait and stragglers."""

from __future__ import annotations

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from tracelens.analyze.communication.collectives import (
    analyze_collectives,
    collective_activities,
    type_summary,
)
from tracelens.core.model import CATEGORIES, CategoryDtype


def _events(rows: list[dict]) -> pl.DataFrame:
    base = {"host": "h0", "rank": 0, "device": 0, "op": None, "module": None,
            "subcategory": None, "msg_bytes": None, "group_size": None}
    return pl.DataFrame([{**base, **r} for r in rows], schema_overrides={
        "rank": pl.Int32, "device": pl.Int32, "category": CategoryDtype, "start_ns": pl.Int64,
        "end_ns": pl.Int64, "op": pl.String, "module": pl.String, "subcategory": pl.String,
        "msg_bytes": pl.Int64, "group_size": pl.Int32})


def _job(delay: int = 300) -> pl.DataFrame:
    """2 hosts × 2 GPUs, two steps. Each step: GEMM [t, t+1000) then all-reduce of 1 MB over 4
    ranks starting at t+800; host1/GPU1 computes `delay` ns longer, so it arrives `delay` late
    and the other three wait `delay` inside the all-reduce, which ends together at t+1800."""
    rows = []
    for t in (0, 10_000):
        for host in range(2):
            for dev in range(2):
                slow = delay if (host, dev) == (1, 1) else 0
                arrive = t + 800 + slow
                rows.append(dict(host=f"h{host}", rank=host, device=dev, category="gemm",
                                 start_ns=t, end_ns=t + 1000 + slow))
                rows.append(dict(host=f"h{host}", rank=host, device=dev,
                                 category="collective", subcategory="all-reduce",
                                 op="all-reduce-start.1", module="jit_step", msg_bytes=1 << 20,
                                 group_size=4, start_ns=arrive, end_ns=t + 1800 + delay))
    return _events(rows)


def test_planted_straggler_is_named_first_with_its_wait() -> None:
    res = analyze_collectives(_job(delay=300))
    top = res.stragglers.row(0, named=True)
    assert (top["host"], top["rank"], top["device"]) == ("h1", 1, 1)
    assert top["times_last"] == 2 and top["caused_wait_ns"] == 2 * 300
    assert res.stragglers["times_last"].to_list()[1:] == [0, 0, 0]
    inst = res.instances
    assert inst.height == 2 and inst["participants"].to_list() == [4, 4]
    assert inst["arrival_skew_ns"].to_list() == [300, 300]
    assert inst["last_device"].to_list() == [1, 1] and inst["last_host"].to_list() == ["h1"] * 2
    # transfer = shortest participant duration = the straggler's 1000 ns (no waiting inside)
    assert inst["transfer_ns"].to_list() == [1000, 1000]
    # busbw = 2(n-1)/n * bytes / transfer = 1.5 * 1048576 B / 1000 ns
    assert inst["busbw_gb_per_s"].to_list() == [1.5 * (1 << 20) / 1000] * 2
    waits = res.activities.filter(pl.col("host") == "h0")["wait_ns"].to_list()
    assert waits == [300] * 4


def test_exposure_per_activity() -> None:
    acts = collective_activities(_job(delay=300))
    # others: collective [800, 2100) minus GEMM [0, 1000) -> exposed 1100 of 1300
    # straggler: collective [1100, 2100), GEMM ends 1300 -> exposed 800 of 1000
    got = acts.filter(pl.col("start_ns") < 5000).sort("rank", "device").select(
        "dur_ns", "exposed_ns").rows()
    assert got == [(1300, 1100), (1300, 1100), (1300, 1100), (1000, 800)]
    summary = type_summary(acts).row(0, named=True)
    assert (summary["type"], summary["count"], summary["exposed_ns"]) == (
        "all-reduce", 8, 2 * (3 * 1100 + 800))


def test_no_straggler_when_everyone_arrives_together() -> None:
    res = analyze_collectives(_job(delay=0))
    assert res.stragglers["times_last"].sum() == 0


def test_rccl_without_op_matches_by_position_and_type_stays_unknown() -> None:
    rows = [dict(device=d, category="collective", start_ns=100 * k + d, end_ns=100 * k + 50)
            for d in range(2) for k in range(3)]
    res = analyze_collectives(_events(rows))
    assert set(res.activities["type"]) == {"unknown"}
    assert res.instances.height == 3 and set(res.instances["participants"]) == {2}
    assert res.instances["busbw_gb_per_s"].null_count() == 3  # no message size: no bandwidth
    assert res.stragglers.row(0, named=True)["device"] == 1


def test_collectives_that_start_together_count_in_row_order() -> None:
    """Two kinds of collective starting at the same ns on one device (two streams): the k-th
    of each key follows the rows' order, whatever order the device's rows come in, and so
    is the same on every run and engine (the sort by device and start is stable)."""
    from tracelens.core.instances import with_instance_keys

    rows = [dict(device=d, category="collective", op=op, module="m", stream=s,
                 start_ns=100 * k, end_ns=100 * k + 50)
            for k in range(40) for d in (1, 0) for s, op in ((2, "b"), (1, "a"))]
    got = with_instance_keys(_events(rows).reverse())
    assert got.select("device", "start_ns").equals(
        got.select("device", "start_ns").sort("device", "start_ns"))
    for d in (0, 1):
        mine = got.filter(pl.col("device") == d)
        assert mine["op"].to_list() == ["a", "b"] * 40  # reversed rows: a before b
        assert mine["occurrence"].to_list() == [k for k in range(40) for _ in "ab"]


iv = st.tuples(st.integers(0, 60), st.integers(1, 25), st.sampled_from(CATEGORIES))


@settings(max_examples=150, deadline=None)
@given(st.lists(iv, min_size=1, max_size=20))
def test_exposed_equals_brute_force(rows: list) -> None:
    ev = _events([dict(start_ns=s, end_ns=s + d, category=c) for s, d, c in rows])
    comp = {t for s, d, c in rows if c not in ("collective", "memory") for t in range(s, s + d)}
    want = sorted(sum(1 for t in range(s, s + d) if t not in comp)
                  for s, d, c in rows if c == "collective")
    assert sorted(collective_activities(ev)["exposed_ns"].to_list()) == want


def test_collectives_command_on_sample() -> None:
    import json

    from click.testing import CliRunner

    from tests.conftest import SAMPLES
    from tracelens.cli.commands import main

    sample = str(SAMPLES / "mi300x_8gpu_llama_step.xplane.pb")
    res = CliRunner().invoke(main, ["collectives", "--format", "json", sample])
    assert res.exit_code == 0, res.output
    rep = json.loads(res.stdout)
    assert {"collectives", "stragglers", "alignment"} <= set(rep)
    assert {"type", "op", "count", "msg_bytes", "sum_ns", "exposed_ns",
            "busbw_gb_per_s"} <= set(rep["collectives"][0])
    assert {"host", "device", "rank", "times_last", "wait_ns"} <= set(rep["stragglers"][0])
    # The sample's GPU 5 computes 8% slower: it is the one that arrives last.
    assert rep["stragglers"][0]["device"] == 5 and rep["stragglers"][0]["times_last"] > 0
    assert {r["type"] for r in rep["by_type"]} == {"all-gather", "reduce-scatter"}
    for fmt in ("table", "markdown", "csv"):
        assert CliRunner().invoke(main, ["collectives", "--format", fmt, sample]).exit_code == 0


def test_planted_straggler_in_the_two_host_sample() -> None:
    """sample_traces/mi355x_2x8gpu_straggler: host 1 GPU 3 computes 30% slower. It is named
    first; every device's waiting inside collectives equals the construction, per type."""
    import json

    import tracelens
    from tests.conftest import SAMPLES
    from tracelens.analyze.communication.collectives import analyze
    from tracelens.results.encode import encode

    truth = json.loads((SAMPLES / "mi355x_2x8gpu_straggler.truth.json").read_text())
    trace = tracelens.load(SAMPLES / "mi355x_2x8gpu_straggler")
    assert trace.meta.alignment.startswith("wall-clock")
    res = analyze_collectives(trace.events)
    top = res.stragglers.row(0, named=True)
    assert (top["host"], top["device"]) == ("mi355x-node1", 3)
    want = {(d["host"], d["device"], c["type"]): c["wait_ns"]
            for d in truth["devices"] for c in d["collectives"]}
    got = {(r["host"], r["device"], r["type"]): r["wait_ns"] for r in res.activities.group_by(
        "host", "device", "type").agg(pl.col("wait_ns").sum()).iter_rows(named=True)}
    assert got == want
    # the last arrival of every instance is the one the construction planted
    last = {(r["op"], r["step"]): {tuple(x) for x in r["last_arrivals"]}
            for r in truth["collective_instances"]}
    got_last = res.instances.filter(pl.col("last_device").is_not_null())
    assert got_last.height == sum(1 for v in last.values() if len(v) == 1)
    rep = encode(analyze(trace.events, trace.meta.alignment))
    assert rep["stragglers"][0]["device"] == 3 and rep["stragglers"][0]["times_last"] == \
        sum(1 for v in last.values() if v == {(1, 3)})


def test_cpu_trace_all_reduce_per_step_with_message_size() -> None:
    """JAX CPU trace: one all-reduce per step over 4 devices carrying both weight gradients
    (256×512 + 512×128 f32 = 786,432 B) and the f32 loss (4 B)."""
    import tracelens
    from tests.conftest import CPU_TRACE, real_trace

    trace = tracelens.load(real_trace(CPU_TRACE))
    res = analyze_collectives(trace.events)
    inst = res.instances.sort("first_start_ns")
    assert inst.height == 3 and inst["type"].to_list() == ["all-reduce"] * 3
    assert inst["participants"].to_list() == [4, 4, 4]
    assert inst["msg_bytes"].to_list() == [786_436] * 3 and inst["group_size"].to_list() == [4] * 3
    steps = trace.steps.sort("step")
    for (s, e), t0 in zip(steps.select("start_ns", "end_ns").rows(), inst["first_start_ns"]):
        assert s <= t0 < e
    assert inst["busbw_gb_per_s"].null_count() == 0


def test_exposure_and_wait_per_type_equal_the_construction_on_every_sample() -> None:
    import json

    import tracelens
    from tests.conftest import SAMPLES

    for truth_file in sorted(SAMPLES.glob("*.truth.json")):
        truth = json.loads(truth_file.read_text())
        trace = tracelens.load(SAMPLES / truth["trace"] if (SAMPLES / truth["trace"]).exists()
                               else SAMPLES / truth_file.name.replace(".truth.json", ""))
        acts = analyze_collectives(trace.events).activities
        got = {(r["host"], r["device"], r["type"]): (r["n"], r["exposed"], r["wait"])
               for r in acts.group_by("host", "device", "type").agg(
                   n=pl.len(), exposed=pl.col("exposed_ns").sum(),
                   wait=pl.col("wait_ns").sum()).iter_rows(named=True)}
        want = {(d["host"], d["device"], c["type"]): (c["count"], c["exposed_ns"], c["wait_ns"])
                for d in truth["devices"] for c in d["collectives"]}
        assert got == want, truth_file.name


def test_busbw_share_of_the_link() -> None:
    """busbw (one direction per GPU) against half the table's bidirectional link bandwidth:
    per activity busbw = 2(n-1)/n × 1 MiB / duration; the median activity of the hand-built
    all-reduce lasts 1300 ns (the three that wait) -> 1209.884 GB/s; an MI300X link table
    value of 896 GB/s gives 448 GB/s per direction -> 270.1%."""
    from tracelens.analyze.communication.collectives import analyze, link_of
    from tracelens.core.model import DEVICE_SCHEMA, conform
    from tracelens.results.encode import encode

    rep = encode(analyze(_job(delay=300), "single host", link_gb_per_s=896.0))
    row = rep["by_type"][0]
    busbw = 1.5 * (1 << 20) / 1300
    assert row["busbw_gb_per_s"] == round(busbw, 3)
    assert row["busbw_link_pct"] == round(100 * busbw / 448, 1) == 270.1
    assert rep["link_unidirectional_gb_per_s"] == 448.0
    devices = conform(pl.DataFrame([dict(host="h0", rank=0, device=0, vendor="amd",
                                         arch="gfx942", compute_units=304, clock_mhz=2100.0,
                                         memory_bytes=206_141_652_992, spec_id="mi300x")]),
                      DEVICE_SCHEMA)
    assert link_of(devices) == 896.0
    assert encode(analyze(_job(), "x"))["by_type"][0]["busbw_link_pct"] is None


def test_worst_instances_tied_in_skew_exposure_and_start_come_in_key_order() -> None:
    """Instances equal in arrival skew, exposure and start are shown in (key, occurrence)
    order, whatever order the group-by returned them in (it guarantees none)."""
    from tracelens.analyze.communication.collectives import collectives_from_activities

    rows = [dict(host="h", rank=r, device=0, instance_key=k, occurrence=0,
                 start_ns=100 + 5 * r, end_ns=200, dur_ns=100 - 5 * r, exposed_ns=10,
                 type="all-reduce", op=f"ar.{k}", module="m", msg_bytes=64, group_size=2,
                 busbw_gb_per_s=1.0)
            for k in ("k3", "k1", "k2") for r in (0, 1)]
    for order in (rows, rows[::-1], rows[2:] + rows[:2]):
        res = collectives_from_activities(pl.DataFrame(order), "wall clock", top=3)
        assert [w.key for w in res.worst] == ["k1", "k2", "k3"]


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 6))
def test_streamed_group_bys_give_the_in_memory_engines_values(seed: int, chunks: int) -> None:
    """The collectives' group-bys run on polars' streaming engine (memory): the values,
    order-dependent ones (a group's first module, type and last arrival) included, are the
    in-memory engine's, on rows in several chunks whose instances disagree in module."""
    import numpy as np
    import pytest

    import tracelens.analyze.communication.collectives as C

    rng = np.random.default_rng(seed)
    n = 400
    start = rng.integers(0, 50, n)
    rows = pl.DataFrame({
        "host": rng.choice(["a", "b"], n), "rank": rng.integers(0, 2, n).astype(np.int32),
        "device": rng.integers(0, 4, n).astype(np.int32),
        "instance_key": rng.choice(["type:all-reduce", "m/ar.1", "m/ag.2"], n),
        "occurrence": rng.integers(0, 3, n), "start_ns": start,
        "dur_ns": rng.integers(1, 20, n), "exposed_ns": rng.integers(0, 5, n),
        "type": rng.choice(["all-reduce", "all-gather"], n), "op": rng.choice(["x", "y"], n),
        "module": pl.Series(rng.choice(["m1", "m2", ""], n)).replace("", None),
        "msg_bytes": rng.integers(1, 9, n),
        "group_size": rng.integers(1, 4, n), "busbw_gb_per_s": rng.random(n)})
    step = max(1, n // chunks)
    rows = pl.concat([rows.slice(i, step) for i in range(0, n, step)], rechunk=False)
    keys = ["instance_key", "occurrence"]
    got = C.analyze_collectives(rows, rows)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(C, "_streamed", lambda query: query.collect())
        want = C.analyze_collectives(rows, rows)
    assert got.instances.sort(keys).equals(want.instances.sort(keys), null_equal=True)
    assert got.stragglers.sort("host", "rank", "device").equals(
        want.stragglers.sort("host", "rank", "device"))
    assert C.type_summary(got.activities).equals(C.type_summary(want.activities))


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_instances_and_stragglers_are_the_per_activity_definitions(seed: int) -> None:
    """The instance table and the stragglers come from group-bys and joins against the
    instance table (no per-activity columns); they equal what :func:`match_instances`'
    per-activity skew, wait and unique last arrival give, on rows with ties at the last
    start, one-participant instances and a null instance key."""
    import numpy as np

    import tracelens.analyze.communication.collectives as C

    rng = np.random.default_rng(seed)
    n = 300
    rows = pl.DataFrame({
        "host": rng.choice(["a", "b"], n), "rank": rng.integers(0, 3, n).astype(np.int32),
        "device": rng.integers(0, 3, n).astype(np.int32),
        "instance_key": pl.Series(rng.choice(["k1", "k2", "k3", ""], n)).replace("", None),
        "occurrence": rng.integers(0, 40, n), "start_ns": rng.integers(0, 6, n),
        "dur_ns": rng.integers(1, 20, n), "exposed_ns": rng.integers(0, 5, n),
        "type": "all-reduce", "op": "ar", "module": "m", "msg_bytes": rng.integers(1, 9, n),
        "group_size": rng.integers(1, 4, n), "busbw_gb_per_s": rng.random(n)})
    keys = ["instance_key", "occurrence"]
    m = C.match_instances(rows)
    want = m.group_by(keys).agg(
        participants=pl.len(), first_start_ns=pl.col("first_start_ns").first(),
        arrival_skew_ns=pl.col("skew_ns").max(), max_wait_ns=pl.col("wait_ns").max(),
        transfer_ns=pl.col("transfer_ns").first(), exposed_ns=pl.col("exposed_ns").sum(),
        last_host=pl.col("host").filter(pl.col("is_last")).first(),
        last_rank=pl.col("rank").filter(pl.col("is_last")).first(),
        last_device=pl.col("device").filter(pl.col("is_last")).first()).sort(keys)
    got = C.analyze_collectives(rows, rows, per_activity=False)
    assert got.activities is rows
    assert got.instances.select(want.columns).sort(keys).equals(want, null_equal=True)
    caused = m.filter("is_last").group_by(C.DEVICE_KEYS).agg(
        times_last=pl.len().cast(pl.Int64), caused_wait_ns=pl.col("skew_ns").sum())
    own = m.group_by(C.DEVICE_KEYS).agg(instances=pl.len(), own_wait_ns=pl.col("wait_ns").sum())
    want_s = own.join(caused, on=C.DEVICE_KEYS, how="left").with_columns(
        pl.col("times_last").fill_null(0), pl.col("caused_wait_ns").fill_null(0))
    order = ["host", "rank", "device"]
    assert got.stragglers.sort(order).equals(want_s.select(got.stragglers.columns).sort(order))
    assert (got.instances["last_rank"].is_not_null().sum()
            == int(got.stragglers["times_last"].sum()))  # some ties, some unique lasts
