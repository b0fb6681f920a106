"""Communication per mesh axis (issue 28): groups to axes, per-axis totals equal to the
construction (tracelens_dev/synth/mesh_job.py) in each writer's format, and every collective
of the real multi-rank traces with an axis or a counted reason."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import tracelens
from tracelens.analyze.communication.axes import (
    NO_GROUP,
    NOT_GRID,
    NOT_INFERRED,
    AxesAnalysis,
    AxesOptions,
)
from tracelens.analyze.communication.mesh import chains, given_mesh, inferred_mesh, parse_mesh
from tracelens.engine.hosts import EngineOptions, run
from tracelens.engine.protocol import run_trace
from tracelens.results.axes import Axes
from tracelens_dev.synth.mesh_job import (ep_truth, mesh_trace, mesh_truth, pp_truth,
                                          scaling_truth)
from tracelens_dev.writers import kineto, xspace

TRACES = Path(__file__).resolve().parents[1] / ".." / "shared" / "traces"
MESH = (("fsdp", 4), ("tp", 4))


def _check(result: Axes, names: dict[str, str]) -> None:
    """Every axis of the construction, exactly (``names``: the truth's name -> the result's)."""
    truth = mesh_truth()
    got = {a.axis: a for a in result.axes}
    assert sorted(got) == sorted(names.values())
    assert result.unmapped == () and result.world == 16
    for name, want in truth.items():
        a = got[names[name]]
        assert (a.size, a.crosses_hosts, a.types, a.count, a.bytes, a.time_ns,
                a.exposed_ns) == (want["size"], want["crosses_hosts"], want["types"],
                                  want["count"], want["bytes"], want["time_ns"],
                                  want["exposed_ns"]), name
        assert a.exposed_share == pytest.approx(want["exposed_share"], rel=1e-12)
        assert a.busbw.median == pytest.approx(want["busbw"], rel=1e-12)
        assert a.unsized == 0
    assert all(i.axis is not None for i in result.instances)


def test_xspace_mesh_job_per_axis_equals_construction(tmp_path: Path) -> None:
    xspace.write(mesh_trace(), tmp_path / "logs")
    trace = tracelens.load(tmp_path / "logs")
    inferred = run_trace(AxesAnalysis(), trace, AxesOptions())
    # no names in the HLO: outermost first, axis0 = the strided (fsdp) one
    assert [(m.name, m.size, m.stride, m.source) for m in inferred.mesh] == [
        ("axis0", 4, 4, "inferred"), ("axis1", 4, 1, "inferred")]
    _check(inferred, {"fsdp": "axis0", "tp": "axis1"})
    named = run_trace(AxesAnalysis(), trace, AxesOptions(mesh=MESH))
    _check(named, {"fsdp": "fsdp", "tp": "tp"})
    # tp runs within a host: compared with the table's xGMI peak; fsdp crosses: NIC unknown
    tp = next(a for a in named.axes if a.axis == "tp")
    fsdp = next(a for a in named.axes if a.axis == "fsdp")
    assert tp.link == "intra" and tp.link_gb_per_s == 448.0
    assert fsdp.link == "inter" and fsdp.link_gb_per_s is None and fsdp.busbw.link_pct is None
    nic = run_trace(AxesAnalysis(), trace, AxesOptions(mesh=MESH, nic_gb_per_s=50.0))
    f = next(a for a in nic.axes if a.axis == "fsdp")
    assert f.busbw.link_pct == pytest.approx(100 * mesh_truth()["fsdp"]["busbw"] / 50.0)
    engine = run(AxesAnalysis(), [tmp_path / "logs"], AxesOptions(mesh=MESH),
                 engine=EngineOptions(workers=1))
    assert engine == named


def test_kineto_mesh_job_names_axes_from_process_groups(tmp_path: Path) -> None:
    kineto.write(mesh_trace(per_rank=True), tmp_path / "ranks")
    trace = tracelens.load(tmp_path / "ranks")
    result = run_trace(AxesAnalysis(), trace, AxesOptions(ranks_per_host=8))
    assert [(m.name, m.source) for m in result.mesh] == [("fsdp", "trace"), ("tp", "trace")]
    _check(result, {"fsdp": "fsdp", "tp": "tp"})
    # Kineto names no host: without ranks_per_host whether a group crosses one is unknown
    blind = run_trace(AxesAnalysis(), trace, AxesOptions())
    assert {a.axis: a.crosses_hosts for a in blind.axes} == {"fsdp": None, "tp": None}


def test_two_workers_give_the_same_axes(tmp_path: Path) -> None:
    xspace.write(mesh_trace(), tmp_path / "logs")
    one = run(AxesAnalysis(), [tmp_path / "logs"], AxesOptions(mesh=MESH),
              engine=EngineOptions(workers=1))
    two = run(AxesAnalysis(), [tmp_path / "logs"], AxesOptions(mesh=MESH),
              engine=EngineOptions(workers=2))
    assert one == two


@pytest.mark.parametrize("fmt", ["json", "rocpd", "rpd", "csv"])
def test_rocprof_collectives_without_groups_are_counted(tmp_path: Path, fmt: str) -> None:
    """rocprofv3 (JSON, rocpd, CSV) and RPD record no process group: every collective of
    the mesh job (one file per host) is counted under the reason, none given an axis."""
    from tracelens_dev.writers import rocprof

    target = tmp_path / {"json": "r.json", "rocpd": "r.db", "rpd": "r.rpd", "csv": "csv"}[fmt]
    written = getattr(rocprof, f"write_{fmt}")(mesh_trace(), target)
    result = run_trace(AxesAnalysis(), tracelens.load(target if fmt == "csv" else written),
                       AxesOptions())
    assert result.axes == () and result.mesh == ()
    assert [(u.reason, u.count) for u in result.unmapped] == [(NO_GROUP, result.activities)]
    assert result.activities == 64


def test_a_group_across_axes_and_a_non_grid_group() -> None:
    mesh = given_mesh(MESH)
    assert mesh.axes_of(tuple(range(16))) == (0, 1)  # the world group: fsdp+tp
    assert mesh.axes_of((0, 4, 8, 12)) == (0,) and mesh.axes_of((4, 5, 6, 7)) == (1,)
    assert mesh.axes_of((0, 1, 4)) is None  # not every combination: no sub-grid
    assert mesh.axes_of((0, 16)) is None
    # pipeline pairs 0->4->8->12 are one chain (a stage group along the outer axis)
    assert sorted(chains([(0, 4), (4, 8), (8, 12), (1, 5)])) == [(0, 4, 8, 12), (1, 5)]
    # only strided groups seen: the inner axis they imply is filled in, not observed
    m = inferred_mesh([(0, 4, 8, 12), (1, 5, 9, 13)], 16)
    assert [(a.size, a.stride, a.observed) for a in m.axes] == [(4, 4, True), (4, 1, False)]
    assert parse_mesh("dp=8, tp=8") == (("dp", 8), ("tp", 8))
    with pytest.raises(ValueError):
        parse_mesh("dp8")
    assert NOT_GRID


@pytest.mark.skipif(not (TRACES / "kineto").exists(), reason="shared traces absent")
def test_real_kineto_traces_every_collective_has_an_axis_or_a_reason() -> None:
    a100 = run_trace(AxesAnalysis(), tracelens.load(
        TRACES / "kineto" / "a100_nccl_2rank_rank0.json.gz"), AxesOptions())
    assert a100.unmapped == () and a100.activities == 21
    assert [(a.axis, a.size, a.count, a.crosses_hosts) for a in a100.axes] == [
        ("axis0", 2, 21, None)]  # default_pg is no axis name; rank 1's host is not in it
    sampled = run_trace(AxesAnalysis(), tracelens.load(
        TRACES / "kineto" / "sampled_128rank_job"), AxesOptions())
    assert sampled.axes == () and sampled.activities == 20
    # no process group recorded, and 2 of the job's 128 ranks: none can be inferred (issue 46)
    why = NOT_INFERRED.format(held=2, world=128)
    assert why.startswith(NO_GROUP)
    assert [(u.reason, u.count) for u in sampled.unmapped] == [(why, 20)]
    assert all(i.axis is None and i.reason == why for i in sampled.instances)


def _check_balance(result: Axes, bytes_known: bool, slowest: set[str]) -> None:
    want = ep_truth(bytes_known)
    b = result.balance
    assert b is not None and len(b.instances) == want["instances"]
    for i in b.instances:
        assert i.participants == 8 and i.axis is not None
        assert i.time_imbalance == pytest.approx(want["time_imbalance"], rel=1e-12)
        assert i.bytes_imbalance == pytest.approx(want["bytes_imbalance"], rel=1e-12)
        assert i.slowest is not None and i.slowest.device == 3
    assert [s.step for s in b.steps] == list(range(want["steps"]))
    for s in b.steps:
        assert s.time_imbalance == pytest.approx(want["time_imbalance"], rel=1e-12)
        assert s.bytes_imbalance == pytest.approx(want["bytes_imbalance"], rel=1e-12)
    assert {f"{r.host}/{r.device}" for r in b.slowest} == slowest
    assert all(r.times == r.instances == 4 for r in b.slowest)


def test_ep_all_to_all_balance_equals_construction(tmp_path: Path) -> None:
    """dp=2 × ep=8, GPU 3 of each host with twice the tokens: the imbalance and the slowest
    ranks in XSpace (static sizes: bytes balanced) and Kineto (split sizes recorded)."""
    xspace.write(mesh_trace(job="ep"), tmp_path / "logs")
    x = run_trace(AxesAnalysis(), tracelens.load(tmp_path / "logs"), AxesOptions(
        mesh=(("dp", 2), ("ep", 8))))
    assert [(a.axis, a.count, a.crosses_hosts) for a in x.axes] == [("ep", 64, False)]
    _check_balance(x, False, {"node0/3", "node1/3"})
    assert x.balance is not None and x.balance.time_basis.startswith("from the last arrival")
    kineto.write(mesh_trace(per_rank=True, job="ep"), tmp_path / "ranks")
    k = run_trace(AxesAnalysis(), tracelens.load(tmp_path / "ranks"),
                  AxesOptions(ranks_per_host=8))
    assert [(a.axis, a.count, a.crosses_hosts) for a in k.axes] == [("ep", 64, False)]
    _check_balance(k, True, {"rank3/3", "rank11/3"})
    assert k.balance is not None and k.balance.time_basis.startswith("duration")


def test_no_all_to_all_no_balance_no_p2p_no_pipeline(tmp_path: Path) -> None:
    xspace.write(mesh_trace(), tmp_path / "logs")
    result = run_trace(AxesAnalysis(), tracelens.load(tmp_path / "logs"), AxesOptions())
    assert result.balance is None and result.pipeline is None


@pytest.mark.parametrize("fmt", ["kineto", "xspace"])
def test_scaling_names_the_axis_of_the_grown_exposure(tmp_path: Path, fmt: str) -> None:
    """8 -> 64 GPUs (fsdp=2 -> 16, tp=4): the FSDP all-gather's exposed time grows by the
    whole step-time delta; scaling's cause and verdict name its axis (from the process
    group names in Kineto; inferred, axis0, in XSpace, whose HLO names none)."""
    from click.testing import CliRunner

    from tracelens.cli.commands import main

    truth = scaling_truth()
    runs = []
    for name in ("small", "large"):
        trace = mesh_trace(per_rank=fmt == "kineto", hosts=truth[name]["hosts"],
                           ag_ns=truth[name]["ag_ns"])
        (kineto.write if fmt == "kineto" else xspace.write)(trace, tmp_path / name)
        runs.append(str(tmp_path / name))
    out = CliRunner().invoke(main, ["scaling", *runs, "--format", "json"])
    assert out.exit_code == 0, out.output
    tr = json.loads(out.output)["transitions"][0]
    axis = "fsdp" if fmt == "kineto" else "axis0"
    cause = truth["cause"].replace("fsdp", axis)
    assert tr["causes"][0] == {"component": cause, "delta_ns": truth["delta_ns"],
                               "share": truth["share"]}
    # busbw of that axis's all-gather: 8 MiB over 1 ms × 1/2 (fsdp=2), then over 2 ms × 15/16
    assert tr["verdict"][0] == (f"100% of the gross change is exposed {axis} all-gather "
                                "(+1.000 ms per step per device); busbw fell from 4.19 to "
                                "3.93 GB/s")
    assert tr["busbw"][f"{axis}:all-gather"] == [pytest.approx(8 * 2**20 / 1e6 / 2, abs=5e-4),
                                                 pytest.approx(8 * 2**20 / 2e6 * 15 / 16,
                                                               abs=5e-4)]


def _check_pipeline(result: Axes, axis: str) -> None:
    truth = pp_truth()
    p = result.pipeline
    assert p is not None and p.axis == axis
    assert [s.stage for s in p.stages] == sorted(truth)
    for s in p.stages:
        want = truth[s.stage]
        assert (s.devices, s.device_steps, s.step_ns, s.bubble_ns) == (
            want["devices"], want["devices"] * 2, want["step_ns"], want["bubble_ns"])
        for key in ("bubble_fraction", "warmup_share", "cooldown_share"):
            assert getattr(s, key) == pytest.approx(want[key], rel=1e-12, abs=1e-15), key


def test_pipeline_bubbles_per_stage_equal_the_gpipe_schedule(tmp_path: Path) -> None:
    """pp=4 × tp=4, GPipe with 4 microbatches: every stage idles (P−1)(F+B) of the step,
    stage s s·F before its first forward and s·B after its last backward; the pipeline axis
    is the one the collective-permutes (XSpace) or pp-group sends (Kineto) lie along."""
    xspace.write(mesh_trace(job="pp"), tmp_path / "logs")
    trace = tracelens.load(tmp_path / "logs")
    _check_pipeline(run_trace(AxesAnalysis(), trace, AxesOptions()), "axis0")
    _check_pipeline(run_trace(AxesAnalysis(), trace, AxesOptions(mesh=(("pp", 4), ("tp", 4)))),
                    "pp")
    kineto.write(mesh_trace(per_rank=True, job="pp"), tmp_path / "ranks")
    k = run_trace(AxesAnalysis(), tracelens.load(tmp_path / "ranks"), AxesOptions())
    _check_pipeline(k, "pp")
    assert run_trace(AxesAnalysis(), tracelens.load(tmp_path / "logs"),
                     AxesOptions()).balance is None


def test_summarize_and_report_show_one_line_per_axis(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from tracelens.cli.commands import main

    kineto.write(mesh_trace(per_rank=True), tmp_path / "ranks")
    out = CliRunner().invoke(main, ["summarize", str(tmp_path / "ranks"), "--format", "json"])
    assert out.exit_code == 0, out.output
    axes = {a["axis"]: a for a in json.loads(out.output)["axes"]}
    truth = mesh_truth()
    assert {k: (a["count"], a["exposed_ns"], a["bytes"]) for k, a in axes.items()} == {
        k: (t["count"], t["exposed_ns"], t["bytes"]) for k, t in truth.items()}
    report = tmp_path / "r.html"
    out = CliRunner().invoke(main, ["report", str(tmp_path / "ranks"), "-o", str(report)])
    assert out.exit_code == 0, out.output
    html = report.read_text()
    assert "Per mesh axis" in html and '<td class="l">fsdp</td>' in html


def test_summarize_of_an_all_to_all_job_shows_the_axes_command_totals(tmp_path: Path) -> None:
    """An EP job (all-to-all on every host, XSpace: a summary partial's activities carry
    durations, not ends) through ``summarize``: its per-axis lines are ``axes``'s, and the
    balance (which needs ends) is not computed there. CI once broke here on a random draw."""
    from click.testing import CliRunner

    from tracelens.cli.commands import main

    xspace.write(mesh_trace(job="ep"), tmp_path / "logs")
    full = run_trace(AxesAnalysis(), tracelens.load(tmp_path / "logs"), AxesOptions())
    assert full.balance is not None
    for workers in ("1", "2"):
        out = CliRunner().invoke(main, ["summarize", str(tmp_path / "logs"), "--format",
                                        "json", "--quiet", "--workers", workers])
        assert out.exit_code == 0, out.output
        shown = [(a["axis"], a["count"], a["bytes"], a["time_ns"], a["exposed_ns"])
                 for a in json.loads(out.output)["axes"]]
        assert shown == [(a.axis, a.count, a.bytes, a.time_ns, a.exposed_ns)
                         for a in full.axes] and shown, workers


def test_a_mesh_that_does_not_hold_the_job_is_a_usage_error(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from tracelens.cli.commands import main

    xspace.write(mesh_trace(), tmp_path / "logs")
    for cmd in ("axes", "collectives"):
        out = CliRunner().invoke(main, [cmd, str(tmp_path / "logs"), "--mesh", "dp=2,tp=4"])
        assert out.exit_code == 2 and "holds 8 devices, the job numbers 16" in out.output
    out = CliRunner().invoke(main, ["axes", str(tmp_path / "logs"), "--mesh", "dp8"])
    assert out.exit_code == 2 and "expected name=size" in out.output
    out = CliRunner().invoke(main, ["axes", str(tmp_path / "logs"), "--mesh", "fsdp=4,tp=4",
                                    "--format", "json"])
    assert out.exit_code == 0
    assert [a["axis"] for a in json.loads(out.output)["axes"]] == ["tp", "fsdp"]


@pytest.mark.skipif(not (TRACES / "xprof").exists(), reason="shared traces absent")
def test_real_xspace_and_rocprof_every_collective_has_an_axis_or_a_reason() -> None:
    """JAX on 4 CPU devices: the data-parallel all-reduce's iota group {0..3} is the one
    axis; rocprofv3 records no process group for its RCCL kernels: all counted."""
    cpu = run_trace(AxesAnalysis(), tracelens.load(
        TRACES / "xprof" / "cpu_4dev_dp_allreduce.xplane.pb"), AxesOptions())
    assert cpu.unmapped == () and [(a.axis, a.size, a.count, a.crosses_hosts)
                                   for a in cpu.axes] == [("axis0", 4, 12, False)]
    rocprof = run_trace(AxesAnalysis(), tracelens.load(
        TRACES / "rocprof" / "mi350x_908_results.json.gz"), AxesOptions())
    assert rocprof.axes == () and rocprof.activities == 1310
    assert [(u.reason, u.count) for u in rocprof.unmapped] == [(NO_GROUP, 1310)]


def _with_sdy_mesh(trace, text: str):  # type: ignore[no-untyped-def]
    """The trace's HLO modules with ``xla.sdy.meshes = text`` in their frontend attributes
    (HloProto.hlo_module (1) . frontend_attributes (19) . map entry (1): key 1, value 2; a
    message field given twice is merged, as protobuf parsers do)."""
    import polars as pl

    from tracelens_dev.wire import field_bytes

    entry = field_bytes(1, b"xla.sdy.meshes") + field_bytes(2, text.encode())
    extra = field_bytes(1, field_bytes(19, field_bytes(1, entry)))
    trace.modules = trace.modules.with_columns(pl.col("hlo_proto") + pl.lit(extra))
    return trace


def test_jax_shardy_mesh_names_the_axes(tmp_path: Path) -> None:
    """JAX records its named mesh in the HLO (``xla.sdy.meshes``): the axes take its names
    without --mesh; an empty mesh (as the real CPU trace has) or one that does not hold
    the job's devices leaves the axes inferred."""
    from tracelens.analyze.communication.mesh import sdy_meshes

    assert sdy_meshes(b"\x0exla.sdy.meshes\x12\x1c{empty_mesh = #sdy.mesh<[]>}") == []
    for text, names in (('{mesh = #sdy.mesh<["fsdp"=4, "tp"=4]>}', ("fsdp", "tp", "hlo")),
                        ('{mesh = #sdy.mesh<["x"=2, "y"=4]>}', ("axis0", "axis1",
                                                                 "inferred"))):
        xspace.write(_with_sdy_mesh(mesh_trace(), text), tmp_path / text[9:12] / "logs")
        result = run(AxesAnalysis(), [tmp_path / text[9:12] / "logs"], AxesOptions(),
                     engine=EngineOptions(workers=1))
        assert [(m.name, m.size) for m in result.mesh] == [(names[0], 4), (names[1], 4)]
        assert {m.source for m in result.mesh} == {names[2]}
        if names[2] == "hlo":
            _check(result, {"fsdp": "fsdp", "tp": "tp"})


@pytest.mark.parametrize("job", ["kineto-ranks", "xspace-ep", "xspace-fsdp_tp"])
def test_summary_axis_totals_on_distinct_combinations_are_the_full_mappings(
        tmp_path: Path, job: str) -> None:
    """``summarize``'s per-axis totals map the activities' distinct (host, rank, device,
    groups, group name, type) combinations and gather each row's axis: the same totals,
    busbw spread, types and host crossing as mapping every row (what ``axes`` does), on
    Kineto ranks without host names and on XSpace hosts."""
    import polars as pl

    from tracelens.analyze.communication import axes as A
    from tracelens.analyze.communication.collectives import partial_activities
    from tracelens.results.encode import encode

    if job == "kineto-ranks":
        kineto.write(mesh_trace(per_rank=True), tmp_path / "t")
    else:
        xspace.write(mesh_trace(job=job.split("-")[1]), tmp_path / "t")
    trace = tracelens.load(tmp_path / "t")
    acts = partial_activities(trace.events)
    named = all(h.named for h in trace.meta.hosts.values())
    hosts = acts.select("host").unique().with_columns(named=pl.lit(named))
    opts = AxesOptions()
    want = A._axis_totals(A.mapped(acts, trace.devices, hosts, opts)[0], trace.devices, opts)
    got = A.axis_totals(acts, trace.devices, hosts, opts)
    assert want and encode(got) == encode(want)
