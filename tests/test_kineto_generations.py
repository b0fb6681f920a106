"""Collectives from every PyTorch generation's Kineto JSON (issue 46).

Each generation writes a collective's type, size and group in other places
(``tracelens_dev.writers.kineto_generations``, docs/kineto.md). The same planted 8-rank job
(per step an all-reduce and an all-to-all over all ranks) written as each generation writes
it must give the planted types, message sizes, busbw (bytes / transfer × the nccl-tests
factor) and one axis of size 8 (the group recorded, or inferred from the ranks that matched
each instance where the trace records none, and said so), with the source of each fact."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

import tracelens
from tracelens.analyze.communication.axes import NO_GROUP, AxesAnalysis, AxesOptions
from tracelens.analyze.communication.collective_parts import CollectivesAnalysis, CollectivesOptions
from tracelens.engine.hosts import EngineOptions, run
from tracelens_dev.writers.kineto_generations import GENERATIONS, truth, write_job

WORLD = 8
# where each generation's type and size come from (the planted op of each type)
SOURCES = {
    "pt2023": {"all-reduce": ("nccl:all_reduce", "nccl:all_reduce Input Dims"),
               "all-to-all": ("nccl:all_to_all", "nccl:all_to_all Input Dims")},
    **{g: {t: ("record_param_comms", "record_param_comms") for t in ("all-reduce", "all-to-all")}
       for g in ("pt2.1", "pt2.4", "rocm")},
}
# the generations that record no process group: their groups are inferred
INFERRED = {"pt2023", "pt2.1"}


def _job(tmp_path: Path, gen: str, world: int = WORLD) -> Path:
    out = tmp_path / gen
    write_job(gen, out, world)
    return out


@pytest.mark.parametrize("gen", GENERATIONS)
def test_each_generation_gives_types_sizes_busbw_and_one_axis(tmp_path: Path, gen: str) -> None:
    job = _job(tmp_path, gen)
    planted = truth(WORLD)
    res = run(CollectivesAnalysis(), [job], CollectivesOptions(top=100),
              engine=EngineOptions(workers=1))
    # every planted instance, typed as planted (the all-to-all runs on send/recv kernels in
    # pt2023 and pt2.4, on RCCL's Generic kernel in rocm)
    assert res.instances == sum(p["instances"] for p in planted.values())
    by_type = {t.type: t for t in res.by_type}
    assert set(by_type) == set(planted)
    for kind, p in planted.items():
        assert by_type[kind].count == p["instances"] * WORLD
        ops = [o for o in res.ops if o.type == kind]
        assert len(ops) == 1
        assert ops[0].msg_bytes == p["msg_bytes"]
        assert (ops[0].type_source, ops[0].size_source) == SOURCES[gen][kind]
        worst = [w for w in res.worst if w.type == kind]
        assert len(worst) == p["instances"]
        for w in worst:
            assert w.participants == WORLD
            assert w.transfer_ns == p["transfer_ns"]
            assert w.busbw_gb_per_s == pytest.approx(p["busbw"], rel=1e-12)
            assert w.axis == "axis0"
    # one axis of size 8 holding both types, every activity on it, every one sized
    assert [(a.axis, a.size, a.types, a.count, a.unsized) for a in res.axes] == [
        ("axis0", WORLD, ("all-reduce", "all-to-all"), res.instances * WORLD, 0)]
    assert res.unmapped == ()
    assert res.axes[0].bytes == sum(p["msg_bytes"] * p["instances"] * WORLD
                                    for p in planted.values())
    if gen in INFERRED:
        assert res.groups_inferred == res.instances * WORLD
        assert res.axes[0].groups_inferred == res.instances * WORLD
        assert "inferred" in (res.groups_inferred_how or "")
    else:
        assert res.groups_inferred is None and res.axes[0].groups_inferred is None


def test_2023_job_axes_say_the_groups_are_inferred(tmp_path: Path) -> None:
    """The Done-when job: no process group anywhere, all-to-alls on send/recv kernels,
    sizes on the nccl:* annotations only: ``axes`` and ``collectives`` (JSON and text)
    give one axis of size 8 with both types, and say that its groups are inferred."""
    from click.testing import CliRunner

    from tracelens.cli.commands import main

    job = _job(tmp_path, "pt2023")
    ax = run(AxesAnalysis(), [job], AxesOptions(), engine=EngineOptions(workers=1))
    assert [(a.axis, a.size, a.types) for a in ax.axes] == [
        ("axis0", WORLD, ("all-reduce", "all-to-all"))]
    assert ax.groups_inferred == ax.activities == 32
    assert all(i.axis == "axis0" and i.participants == WORLD for i in ax.instances)
    assert {i.type for i in ax.instances} == {"all-reduce", "all-to-all"}
    out = CliRunner().invoke(main, ["axes", str(job), "--format", "json"])
    assert out.exit_code == 0, out.output
    doc = json.loads(out.output)
    assert doc["groups_inferred"] == 32 and "inferred" in doc["groups_inferred_how"]
    assert doc["axes"][0]["groups_inferred"] == 32
    text = CliRunner().invoke(main, ["collectives", str(job)])
    assert text.exit_code == 0, text.output
    assert "INFERRED" in text.output and "nccl:all_to_all Input Dims" in text.output
    # the kernels are SendRecv; the issuing op makes them all-to-alls
    trace = tracelens.load(job)
    coll = trace.events.filter(pl.col("category") == "collective")
    sr = coll.filter(pl.col("name").cast(pl.String).str.contains("SendRecv"))
    assert sr.height == 16 and set(sr["subcategory"].cast(pl.String)) == {"all-to-all"}
    assert set(sr["type_source"].cast(pl.String)) == {"nccl:all_to_all"}
    assert set(sr["dtype"].cast(pl.String)) == {"fp16"}


def test_a_job_missing_ranks_gets_no_inferred_group(tmp_path: Path) -> None:
    """Files of 6 of the 8 ranks: the ranks that matched an instance need not be its group,
    so none is inferred, and the reason says how many ranks the trace holds."""
    job = _job(tmp_path, "pt2023")
    for r in (6, 7):
        (job / f"rank-{r}.json").unlink()
    res = run(CollectivesAnalysis(), [job], CollectivesOptions(),
              engine=EngineOptions(workers=1))
    assert res.axes == () and res.groups_inferred is None
    assert [(u.reason, u.count) for u in res.unmapped] == [
        ("the trace gives no process group for it, and holds 6 of the job's 8 ranks: the "
         "ranks that matched it need not be its group", 24)]
    assert {o.type: o.msg_bytes for o in res.ops} == {
        k: v["msg_bytes"] for k, v in truth(WORLD).items()}


def test_without_a_world_size_nothing_is_inferred(tmp_path: Path) -> None:
    """No distributedInfo: the job's size is unknown, so no group is inferred."""
    job = _job(tmp_path, "pt2023")
    for p in job.iterdir():
        doc = json.loads(p.read_bytes())
        doc["distributedInfo"].pop("world_size")
        p.write_text(json.dumps(doc))
    res = run(CollectivesAnalysis(), [job], CollectivesOptions(),
              engine=EngineOptions(workers=1))
    assert res.axes == () and [u.reason for u in res.unmapped] == [NO_GROUP]


@pytest.mark.parametrize("name,kind", [
    ("c10d::allreduce_", "all-reduce"), ("c10d::alltoall_base_", "all-to-all"),
    ("c10d::_allgather_base_", "all-gather"), ("c10d::_reduce_scatter_base_", "reduce-scatter"),
    ("c10d::allgather_into_tensor_coalesced_", "all-gather"), ("c10d::broadcast_",
                                                                "collective-broadcast"),
    ("c10d::send", "send"), ("c10d::recv_", "recv"), ("c10d::barrier", "barrier"),
    ("nccl:all_reduce", "all-reduce"), ("nccl:all_to_all", "all-to-all"),
    ("nccl:_all_gather_base", "all-gather"), ("nccl:send 0->1", "send"),
    ("nccl:recv 0<-1", "recv"), ("rccl:all_reduce", "all-reduce"),
    ("_c10d_functional::all_to_all_single", "all-to-all"),
    ("_c10d_functional::reduce_scatter_tensor", "reduce-scatter"),
    ("_c10d_functional::all_gather_into_tensor", "all-gather"),
    ("_c10d_functional::wait_tensor", None), ("FSDP::all_gather_copy_in", None),
    ("FSDP::all_gather", "all-gather"), ("allreduce", "all-reduce"), ("all_to_allv", "all-to-all"),
    ("_reduce_scatter_base", "reduce-scatter"), ("wait", None),
])
def test_op_names_of_every_generation_give_their_type(name: str, kind: str | None) -> None:
    from parsers.kineto.link import _collective_type

    got = pl.DataFrame({"n": [name]}).select(_collective_type(pl.col("n")))["n"][0]
    assert got == kind


def test_point_to_point_gets_no_inferred_group(tmp_path: Path) -> None:
    """Sends matched k-th with k-th across ranks are no group: the all-reduces of the 2023
    job issued as ``c10d::send`` / ``nccl:send 0->1`` are sends, sized from their annotation,
    and stay without an axis; the all-to-alls still get theirs."""
    job = _job(tmp_path, "pt2023")
    for p in job.iterdir():
        text = p.read_text().replace("c10d::allreduce_", "c10d::send").replace(
            "nccl:all_reduce", "nccl:send 0->1")
        p.write_text(text)
    res = run(CollectivesAnalysis(), [job], CollectivesOptions(),
              engine=EngineOptions(workers=1))
    planted = truth(WORLD)
    assert {o.type: (o.op, o.msg_bytes, o.type_source) for o in res.ops} == {
        "send": ("c10d::send", planted["all-reduce"]["msg_bytes"], "nccl:send 0->1"),
        "all-to-all": ("c10d::alltoall_base_", planted["all-to-all"]["msg_bytes"],
                       "nccl:all_to_all")}
    assert [(a.axis, a.size, a.types) for a in res.axes] == [("axis0", WORLD, ("all-to-all",))]
    assert [(u.reason, u.count) for u in res.unmapped] == [(NO_GROUP, 2 * WORLD)]
