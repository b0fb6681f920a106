"""summarize as a per-host map and a reduce: ``reduce_summary([summary_partial(t)])`` is
``summarize(t)``, and the partials of hosts loaded one by one, merged, give byte for byte the
summary of the hosts loaded together."""

from __future__ import annotations

import dataclasses
import pickle
from pathlib import Path

import orjson
import polars as pl
import pytest

import tracelens
from tracelens_dev.writers.xspace import Activity, build_xspace
from tests.conftest import SAMPLES
from tests.synth_helpers import write_and_load
from tracelens.analyze.summary.build import (SummaryOptions, reduce_summary, summarize,
                                       summary_partial)
from tracelens.analyze.summary.merge import merge_partials
from tracelens.results.encode import encode
from tracelens.results.summary import Summary
from tracelens_dev.synth import build
from tracelens_dev.synth.scenario import Scenario, Straggler

STRAGGLER = sorted((SAMPLES / "mi355x_2x8gpu_straggler").rglob("*.xplane.pb"))


def _plain(trace: tracelens.Trace, **kw: object) -> Summary:
    """``summarize`` without the critical path, the findings made from its what-ifs and their
    consistency:
    another analysis's part (SummaryAnalysis merges it; its own tests compare it across
    engines); these tests compare the summary partials' merge."""
    from dataclasses import replace

    return replace(summarize(trace, **kw), critical_path=None,  # type: ignore[arg-type]
                   findings=Summary.__dataclass_fields__["findings"].default,
                   consistency=None)


def _whole_and_merged(files: list[Path], opts: SummaryOptions,
                      **merge_kw: object) -> tuple[bytes, bytes]:
    whole = encode(_plain(tracelens.load(files), device=opts.device, step=opts.step,
                          top=opts.top))
    parts = [summary_partial(tracelens.load([f]), opts) for f in files]
    merged = encode(reduce_summary([merge_partials(parts, **merge_kw)], opts))
    return orjson.dumps(whole), orjson.dumps(merged)


@pytest.mark.parametrize("opts", [SummaryOptions(), SummaryOptions(step=1),
                                  SummaryOptions(device=3, top=5)],
                         ids=["whole", "step1", "device3"])
def test_merged_hosts_of_the_straggler_sample_are_the_combined_summary(
        opts: SummaryOptions) -> None:
    assert len(STRAGGLER) == 2
    whole, merged = _whole_and_merged(STRAGGLER, opts)
    assert whole == merged


def test_merged_hosts_of_a_synthetic_job(tmp_path: Path) -> None:
    sc = Scenario(device="mi300x", hosts=3, gpus=2, steps=2, layers=1,
                  host_offsets_ns=(0, 9, 4_321), straggler=Straggler(2, 1, 1.5), seed=3)
    _, files = write_and_load(build(sc), tmp_path)
    files = sorted(files)  # the order tracelens.load takes a directory in
    whole, merged = _whole_and_merged(files, SummaryOptions(top=20))
    assert whole == merged
    assert orjson.loads(merged)["headline"]["hosts"] == 3


def _host_file(path: Path, host: str, start: int | None, shift: int = 0) -> Path:
    acts = [Activity(d, 1, "Cijk_Ailk_Bljk_BBS_BH_MT64x64x64.kd", 1_000 + 10 * d + shift, 500,
                     {"hlo_op": "custom-call.1"}) for d in range(2)]
    acts += [Activity(d, 2, "ncclDevKernel_Generic_4(x)", 1_400 + shift, 300,
                      {"hlo_op": "all-reduce-start.1"}) for d in range(2)]
    acts += [Activity(0, 1, "Cijk_overlap.kd", 1_200 + shift, 100, {})]  # clipped: overlaps
    path.write_bytes(build_xspace(acts, host=host, steps=[(0, 900 + shift, 2_000 + shift)],
                                  profile_start_ns=start))
    return path


def test_duplicate_host_names_and_clipped_overlaps_as_the_loader_says(tmp_path: Path) -> None:
    # two files naming the same host: host#0 and host#1; the clipped-overlap warning counts
    # both files' overlaps once, as the loader does on the combined trace
    files = [_host_file(tmp_path / f"{i}.xplane.pb", "node", 1_800_000_000_000_000_000 + 7 * i)
             for i in range(2)]
    whole, merged = _whole_and_merged(files, SummaryOptions())
    assert whole == merged
    out = orjson.loads(merged)
    assert {d["host"] for d in out["devices"]} == {"node#0", "node#1"}
    assert any(w.startswith("clipped 2 same-stream overlaps") for w in out["warnings"])


def test_unaligned_hosts_are_warned_and_shifts_align_them(tmp_path: Path) -> None:
    files = [_host_file(tmp_path / "a.xplane.pb", "nodeA", None),
             _host_file(tmp_path / "b.xplane.pb", "nodeB", 5, shift=250)]
    parts = [summary_partial(tracelens.load([f])) for f in files]
    out = encode(reduce_summary([merge_partials(parts)]))
    assert out["alignment"] == "none"
    assert any("could not be aligned" in w for w in out["warnings"])
    # the collective-end offsets the loader finds (nodeB 250 ns late) as shifts
    whole = encode(_plain(tracelens.load(files)))
    assert whole["alignment"].startswith("collective ends")
    shifted = encode(reduce_summary([merge_partials(
        parts, shifts={"nodeA": 0, "nodeB": -250}, alignment=whole["alignment"])]))
    assert orjson.dumps(shifted) == orjson.dumps(whole)


def test_partial_is_picklable_small_and_holds_no_event_frame() -> None:
    trace = tracelens.load(STRAGGLER)
    part = summary_partial(trace)
    back = pickle.loads(pickle.dumps(part))
    assert orjson.dumps(encode(reduce_summary([back]))) == \
        orjson.dumps(encode(_plain(trace)))
    # grouped frames: one row per group, not per event
    assert part.kernels.height == trace.events.select(
        "name", "category", "subcategory", "rule", "host", "rank", "device").unique().height
    assert part.roofline.height < 100 and part.gaps.height < 10
    assert part.acts.height == trace.events.filter(pl.col("category") == "collective").height
    # no per-event frame but the collectives': every other frame is grouped
    frames = {f.name: v for f in dataclasses.fields(part)
              if isinstance(v := getattr(part, f.name), pl.DataFrame)}
    assert all(df.height < trace.events.height // 3 for name, df in frames.items()
               if name != "acts"), {name: df.height for name, df in frames.items()}


def test_filters_apply_in_the_partial() -> None:
    from tracelens.loading.filters import Filters, apply

    trace = tracelens.load(STRAGGLER)
    f = Filters(categories=("gemm", "collective"))
    got = encode(reduce_summary([summary_partial(trace, SummaryOptions(filters=f))]))
    want = encode(_plain(apply(trace, f)).with_filters(f.active()))
    assert orjson.dumps(got) == orjson.dumps(want)


def test_merged_rocprof_processes_of_one_host(tmp_path: Path) -> None:
    """rocprofv3: one file per process, ranks of one host on its shared clock (no shift)."""
    from tracelens_dev.writers.rocprof import write_rocpd
    from tests.test_rocprof_parity import STEP, _two_ranks
    from tracelens.loading.loader import discover

    trace = tracelens.load(SAMPLES / "mi300x_8gpu_llama_step.xplane.pb")
    write_rocpd(_two_ranks(trace, "mi300x-node0"), tmp_path / "run")
    files, _ = discover(tmp_path / "run")
    assert len(files) == 2
    whole = encode(_plain(tracelens.load(tmp_path / "run", step_marker=STEP)))
    parts = [summary_partial(tracelens.load([f], step_marker=STEP)) for f in files]
    merged = encode(reduce_summary([merge_partials(parts)]))
    assert orjson.dumps(merged) == orjson.dumps(whole)
    assert merged["alignment"].startswith("single host: its 2 processes")


def test_critical_path_pieces_are_merged_after_the_summary_reduce(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """On many hosts the merged critical-path nodes are the reduce's largest frame after the
    collective rows: ``SummaryAnalysis.merge`` keeps the hosts' pieces as they came and
    ``finish`` merges them only once the summary's own reduce is done (and let go), with the
    same critical path as merging them at once."""
    import tracelens.analyze.summary.reduce as sr
    from tracelens.analyze.critical.path import CriticalPath
    from tracelens.analyze.summary.build import CriticalPieces, SummaryAnalysis
    from tracelens.engine.hosts import LoadOptions, EngineOptions, Task, run_tasks

    calls: list[str] = []
    real_reduce, real_merge = sr.reduce_summary, CriticalPath.merge

    def reduce(*a: object, **k: object) -> object:
        calls.append("reduce")
        return real_reduce(*a, **k)  # type: ignore[arg-type]

    def merge(self: CriticalPath, *a: object, **k: object) -> object:
        calls.append("critical merge")
        return real_merge(self, *a, **k)  # type: ignore[arg-type]

    merged_parts: list[object] = []
    real_summary_merge = SummaryAnalysis.merge

    def summary_merge(self: SummaryAnalysis, *a: object, **k: object) -> object:
        out = real_summary_merge(self, *a, **k)  # type: ignore[arg-type]
        merged_parts.append(out[1])
        return out

    monkeypatch.setattr(sr, "reduce_summary", reduce)
    monkeypatch.setattr(CriticalPath, "merge", merge)
    monkeypatch.setattr(SummaryAnalysis, "merge", summary_merge)
    # a step both hosts have: each host alone picks its own median step, and on this job
    # they differ (the bare analysis then refuses to join their paths; the facade solves again)
    opts = SummaryOptions(step=1)
    (summary,), _ = run_tasks([Task(SummaryAnalysis(), opts)], STRAGGLER, LoadOptions(),
                              EngineOptions(workers=1))
    assert calls == ["reduce", "critical merge"]
    assert isinstance(merged_parts[0], CriticalPieces) and len(merged_parts[0].parts) == 2
    assert summary.critical_path is not None  # type: ignore[attr-defined]
    # the same path as the pieces merged at once, before any reduce
    pieces = merged_parts[0]
    at_once = SummaryAnalysis().finish(  # type: ignore[call-arg]
        (summary_partial(tracelens.load(STRAGGLER), opts), real_merge(
            CriticalPath(), pieces.parts, pieces.plan)), opts)
    assert encode(summary.critical_path) == encode(at_once.critical_path)  # type: ignore


def test_merged_programs_are_each_programs_first_host_row_without_copying_the_bytes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The job's HLO programs after a merge are ``program_protos`` of every part's programs
    joined at once (each program's row of the first host in name order, with its bytes),
    packed parts or not; the bytes of a packed part are never put in a frame per host (every
    host sends the job's programs: 128 copies of a large program)."""
    from tracelens.analyze.summary import packed
    from tracelens.analyze.compute.hlo_findings import program_protos

    sc = Scenario(device="mi300x", hosts=3, gpus=1, steps=1, layers=1, seed=5)
    _, files = write_and_load(build(sc), tmp_path)
    parts = [summary_partial(tracelens.load([f])) for f in sorted(files)]
    hosts = [p.devices["host"][0] for p in parts]
    assert all(p.hlo is not None for p in parts) and len(set(hosts)) == 3
    # each part's own programs: program 17 everywhere with bytes naming the host, 18 on the
    # last host with no bytes (no row for it), 19 on the first host only
    table = [[(17, h.encode()), *([(18, None)] if i == 2 else []),
              *([(19, b"only")] if i == 0 else [])] for i, h in enumerate(hosts)]
    crafted = []
    for p, h, rows in zip(parts, hosts, table):
        progs = p.hlo.programs  # type: ignore[union-attr]
        frame = pl.DataFrame({"host": [h] * len(rows), "rank": [0] * len(rows),
                              "program_id": [r[0] for r in rows],
                              "module": [f"m{r[0]}" for r in rows],
                              "hlo_proto": [r[1] for r in rows]}).cast(progs.schema)
        crafted.append(dataclasses.replace(p, hlo=dataclasses.replace(p.hlo, programs=frame)))
    for order in ([0, 1, 2], [2, 0, 1], [1, 2, 0]):
        ps = [crafted[i] for i in order]
        want = program_protos(pl.concat([p.hlo.programs for p in ps]))  # type: ignore
        got = merge_partials(ps).hlo.programs  # type: ignore[union-attr]
        assert got.drop("rank").equals(want.drop("rank")), (order, got, want)
        assert set(got["program_id"]) == {17, 19} and got.columns == want.columns
        first = min(hosts)
        assert got.filter(pl.col("program_id") == 17)["hlo_proto"][0] == first.encode()
        with monkeypatch.context() as mp:
            mp.setattr(packed.PackedPrograms, "frame", lambda self: pytest.fail("copied"))
            merged = merge_partials([packed.pack_summary(p) for p in ps])
        assert merged.hlo.programs.drop("rank").equals(want.drop("rank"))  # type: ignore


def test_the_merge_holds_only_the_bytes_of_the_programs_it_keeps(tmp_path: Path) -> None:
    """Parts not packed (the API's own partials) carry their own copy of each program: the
    merge lets each go once the fold has dropped its row."""
    from tracelens.analyze.summary import merge as sm

    sc = Scenario(device="mi300x", hosts=2, gpus=1, steps=1, layers=1, seed=7)
    _, files = write_and_load(build(sc), tmp_path)
    parts = [summary_partial(tracelens.load([f])) for f in sorted(files)]
    held = sm._Held()
    rows = [sm._programs_apart(p, held).hlo.programs for p in parts]  # type: ignore[union-attr]
    assert len(held.protos) == held.count == sum(r.height for r in rows) >= 2
    kept = sm._fold_programs(sm._fold_programs(None, rows[0]), rows[1])
    held.keep(kept)
    assert sorted(held.protos) == sorted(kept["_proto"].drop_nulls().to_list())
    assert len(held.protos) < held.count
    back = sm._programs_back(kept, held)
    assert back.columns == parts[0].hlo.programs.columns  # type: ignore[union-attr]
    assert back["hlo_proto"].to_list() == [
        parts[0].hlo.programs["hlo_proto"][0]]  # type: ignore[union-attr]
