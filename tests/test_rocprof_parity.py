"""The bundled XSpace scenario written by each rocprofv3 writer reads back to the same summary.

The sample (8 × MI300X, 3 steps, RCCL all-gather/reduce-scatter typed by their HLO ops) goes
through ``write_rocpd``, ``write_json`` and ``write_csv`` (ROCm 6.2, 6.3, 7.x and
``rocpd convert`` layouts); RCCL types travel as RCCL API rows, steps as ROCTx ranges.
``inputs``/``warnings``/``alignment`` differ by nature, host names where the format has none,
and the roofline needs the HLO, which rocprofv3 output cannot carry.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import polars as pl
import pytest

import tracelens
from parsers.rocprof.facts import rocprof_facts
from tracelens.core.model import HostInfo
from tracelens_dev.writers.rocprof import write_csv, write_json, write_rocpd
from tests.conftest import SAMPLES
from tests.synth_helpers import timeline_numbers

SAMPLE = SAMPLES / "mi300x_8gpu_llama_step.xplane.pb"
STEP = r"^step (\d+)$"
COMPARED = ("filters", "headline", "devices", "idle_devices", "top_kernels")
WRITERS = {
    "rocpd": (lambda t, d: write_rocpd(t, d / "run_results.db"), "rocpd", True),
    "json": (lambda t, d: write_json(t, d / "run_results.json"), "rocprof-json", True),
    "csv-6.2": (lambda t, d: write_csv(t, d, layout="6.2"), "rocprof-csv", True),
    "csv-6.3": (lambda t, d: write_csv(t, d, layout="6.3"), "rocprof-csv", True),
    "csv-7": (lambda t, d: write_csv(t, d, layout="7"), "rocprof-csv", True),
    "csv-rocpd": (lambda t, d: write_csv(t, d, layout="rocpd"), "rocprof-csv", False),
}


@pytest.fixture(scope="module")
def sample() -> tuple[tracelens.Trace, dict]:
    trace = tracelens.load(SAMPLE)
    return trace, tracelens.summarize(trace, top=20)


COST_MODEL_KEYS = ("mfu", "mfu_dtype", "model_flops", "model_kernels_without_cost",
                   "mfu_lower_bound", "flops_coverage", "flops_covered_ns")


def _comparable(summary: dict) -> dict:
    """The compared keys without MFU, which needs the HLO rocprofv3 output cannot carry."""
    out = json.loads(json.dumps({k: summary[k] for k in COMPARED}))
    for holder in [out["headline"], *out["devices"]]:
        for key in COST_MODEL_KEYS:
            holder.pop(key, None)
    for d in out["devices"]:
        # our rocprofv3 writers keep only the RCCL API rows, not every launch call, so the
        # idle breakdown (which follows launch calls) is compared in tests/test_idle.py
        d["timeline"].pop("idle_breakdown")
        for s in d["steps"]:
            s.pop("mfu", None)
            s["timeline"].pop("idle_breakdown")
    return out


def _without_host(summary: dict) -> dict:
    """A summary less what a format that records no host changes: host names, and whether
    the hosts are named at all (a Kineto file's ranks are ranks, ``hosts_named`` false)."""
    out = _comparable(summary)
    for d in out["devices"] + out["idle_devices"]:
        d.pop("host")
    out["headline"].pop("hosts_named", None)
    return out


@pytest.mark.parametrize("fmt", list(WRITERS))
def test_writer_round_trip_gives_the_same_summary(fmt: str, sample, tmp_path: Path) -> None:
    trace, expected = sample
    write, name, has_host = WRITERS[fmt]
    write(trace, tmp_path)
    back = tracelens.load(tmp_path, step_marker=STEP)
    got = tracelens.summarize(back, top=20)
    assert [s["format"] for s in got["inputs"]] == [name]
    if has_host:
        assert _comparable(got) == _comparable(expected)
    else:
        assert _without_host(got) == _without_host(expected)
    assert _collectives(back).equals(_collectives(trace))  # every RCCL kernel keeps its type
    assert back.steps["source"].unique().to_list() == ["marker"]
    markers = back.host_events.filter(pl.col("kind") == "marker")
    assert markers["name"].to_list() == [f"step {s}" for s in trace.steps["step"].to_list()]


def _collectives(trace: tracelens.Trace) -> pl.DataFrame:
    return (trace.events.filter(pl.col("category") == "collective")
            .group_by("name", "subcategory").len().sort("name", "subcategory"))


def test_without_step_marker_there_are_no_steps(sample, tmp_path: Path) -> None:
    write_rocpd(sample[0], tmp_path / "x_results.db")
    trace = tracelens.load(tmp_path / "x_results.db")
    assert trace.steps.is_empty() and trace.events["step"].null_count() == trace.events.height
    unnumbered = tracelens.load(tmp_path / "x_results.db", step_marker="^step")
    assert unnumbered.steps["step"].to_list() == [0, 1, 2]  # numbered by order
    none = tracelens.load(tmp_path / "x_results.db", step_marker="^train")
    assert none.steps.is_empty() and any("no ROCTx range matches" in w
                                         for w in none.meta.warnings)


def test_kind_ids_are_resolved_through_strings(sample, tmp_path: Path) -> None:
    """Another SDK version numbers kinds differently: shuffle them and remap the records."""
    path = tmp_path / "1000_results.json"
    write_json(sample[0], path)
    doc = json.loads(path.read_text())
    proc = doc["rocprofiler-sdk-tool"][0]
    table = proc["strings"]["buffer_records"]
    order = list(reversed(range(len(table))))
    new_id = {old: new for new, old in enumerate(order)}
    proc["strings"]["buffer_records"] = [table[old] for old in order]
    for recs in proc["buffer_records"].values():
        for r in recs:
            r["kind"] = new_id[r["kind"]]
    path.write_text(json.dumps(doc))
    got = tracelens.summarize(tracelens.load(path, step_marker=STEP), top=20)
    assert _comparable(got) == _comparable(sample[1])


def _two_ranks(trace: tracelens.Trace, second_host: str) -> tracelens.Trace:
    """The sample as two processes: devices 0-3 are rank 0, devices 4-7 rank 1."""
    def split(df: pl.DataFrame) -> pl.DataFrame:
        hi = pl.col("device") >= 4
        return df.with_columns(rank=pl.when(hi).then(1).otherwise(0).cast(pl.Int32),
                               host=pl.when(hi).then(pl.lit(second_host))
                               .otherwise(pl.col("host")),
                               device=pl.when(hi).then(pl.col("device") - 4)
                               .otherwise(pl.col("device")).cast(pl.Int32))
    steps = pl.concat([trace.steps, trace.steps.with_columns(rank=pl.lit(1, pl.Int32))])
    return tracelens.Trace(events=split(trace.events), host_events=trace.host_events.head(0),
                           steps=steps, devices=split(trace.devices), meta=trace.meta)


@pytest.mark.parametrize("writer", ["rocpd", "json", "csv"])
def test_processes_of_one_host_are_ranks_on_one_clock(sample, tmp_path: Path,
                                                      writer: str) -> None:
    two = _two_ranks(sample[0], "mi300x-node0")
    out = tmp_path / "run"
    {"rocpd": write_rocpd, "json": write_json,
     "csv": write_csv}[writer](two, out)
    back = tracelens.load(out, step_marker=STEP)
    assert back.devices.select("host", "rank").unique().sort("rank").rows() == [
        ("mi300x-node0", 0), ("mi300x-node0", 1)]
    assert back.meta.alignment == "single host: its 2 processes share CLOCK_BOOTTIME (no shift)"
    assert back.steps.height == 6
    whole = tracelens.summarize(sample[0], top=20)
    got = tracelens.summarize(back, top=20)
    assert [timeline_numbers(d["timeline"]) for d in got["devices"]] == [
        timeline_numbers(d["timeline"]) for d in whole["devices"]]
    assert got["top_kernels"] == whole["top_kernels"]


def test_processes_on_two_hosts_are_aligned_on_collective_ends(sample, tmp_path: Path) -> None:
    """rocprofv3 has no wall-clock: two hosts are put on one clock by their collective ends."""
    write_rocpd(_two_ranks(sample[0], "mi300x-node1"), tmp_path / "run")
    back = tracelens.load(tmp_path / "run")
    assert back.meta.alignment.startswith("collective ends")
    assert not any("could not be aligned" in w for w in back.meta.warnings)
    assert sorted(back.meta.hosts) == ["mi300x-node0", "mi300x-node1"]


def test_one_file_per_process_is_read_from_an_output_directory(sample, tmp_path: Path) -> None:
    """rocprofv3 -f rocpd json csv: each process once, the database preferred."""
    csv_files = write_csv(sample[0], tmp_path / "out", layout="7")
    prefix = csv_files[0].name.split("_")[0]  # the pid
    write_rocpd(sample[0], csv_files[0].parent / f"{prefix}_results.db")
    write_json(sample[0], csv_files[0].parent / f"{prefix}_results.json")
    back = tracelens.load(tmp_path / "out")
    assert [s["format"] for s in back.meta.sources] == ["rocpd"]
    shutil.rmtree(tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_two_host_sample_round_trips(tmp_path: Path) -> None:
    """Two hosts: collective-end alignment puts the times back exactly where the XSpace
    wall-clock alignment had them; only the alignment's name differs."""
    run = SAMPLES / "mi355x_2x8gpu_straggler"
    if not list(run.rglob("*.xplane.pb")):
        pytest.skip(f"{run} holds no XSpace files")
    trace = tracelens.load(run)
    write_rocpd(trace, tmp_path / "run")
    back = tracelens.load(tmp_path / "run", step_marker=STEP)
    assert back.meta.alignment.startswith("collective ends")
    got, expected = tracelens.summarize(back, top=20), tracelens.summarize(trace, top=20)
    assert _comparable(got) == _comparable(expected)


def _with_copies(trace: tracelens.Trace) -> tracelens.Trace:
    rows = [dict(host="mi300x-node0", rank=0, device=d, stream=9, kind="memcpy", name=n,
                 start_ns=s, end_ns=s + 5_000, category="memory", subcategory=sub, bytes=b)
            for d, n, s, sub, b in ((0, "MemcpyH2D", 1_000, "h2d", 4096.0),
                                    (1, "MemcpyD2H", 2_000, "d2h", 8192.0),
                                    (2, "MemcpyD2D", 3_000, "d2d", 1024.0))]
    extra = pl.DataFrame(rows).pipe(lambda df: df.select(
        [pl.col(c).cast(t) if c in df.columns else pl.lit(None, t).alias(c)
         for c, t in trace.events.schema.items()]))
    return tracelens.Trace(events=pl.concat([trace.events, extra]),
                           host_events=trace.host_events, steps=trace.steps,
                           devices=trace.devices, meta=trace.meta)


@pytest.mark.parametrize("fmt", ["rocpd", "json", "csv-6.2", "csv-7"])
def test_memory_copies_keep_direction_device_and_size(fmt: str, sample, tmp_path: Path) -> None:
    WRITERS[fmt][0](_with_copies(sample[0]), tmp_path)
    back = tracelens.load(tmp_path)
    copies = back.events.filter(pl.col("kind") == "memcpy").sort("start_ns")
    assert copies.select("device", "subcategory", "category").rows() == [
        (0, "h2d", "memory"), (1, "d2h", "memory"), (2, "d2d", "memory")]
    assert copies["name"].to_list() == ["MEMORY_COPY_HOST_TO_DEVICE",
                                        "MEMORY_COPY_DEVICE_TO_HOST",
                                        "MEMORY_COPY_DEVICE_TO_DEVICE"]
    sizes = copies["bytes"].to_list()
    assert sizes == ([None] * 3 if fmt.startswith("csv") else [4096.0, 8192.0, 1024.0])
    assert (copies["stream"] < 0).all()  # copy engines, apart from the kernel queues


def test_rocpd_convert_csv_holds_processes_apart_by_guid(sample, tmp_path: Path) -> None:
    write_csv(_two_ranks(sample[0], "mi300x-node0"), tmp_path, layout="rocpd")
    back = tracelens.load(tmp_path / "out_kernel_trace.csv", step_marker=STEP)
    assert back.devices.select("rank").unique().height == 2
    assert back.steps.height == 6
    assert back.meta.hosts == {"unknown": HostInfo(path=str(tmp_path / "out_kernel_trace.csv"),
                                                   profile_start_ns=None)}


def test_gzipped_database(sample, tmp_path: Path) -> None:
    import gzip
    db = tmp_path / "1000_results.db"
    write_rocpd(sample[0], db)
    gz = tmp_path / "1000_results.db.gz"
    gz.write_bytes(gzip.compress(db.read_bytes()))
    db.unlink()
    back = tracelens.load(gz, step_marker=STEP)
    got = tracelens.summarize(back, top=20)
    assert _comparable(got) == _comparable(sample[1])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["1000_results.db.gz"]


@pytest.mark.parametrize("layout", ["6.2", "7"])
def test_csv_without_agent_info(sample, tmp_path: Path, layout: str) -> None:
    files = write_csv(sample[0], tmp_path, layout=layout)
    next(f for f in files if f.name.endswith("agent_info.csv")).unlink()
    back = tracelens.load(tmp_path, step_marker=STEP)
    assert back.events.height == sample[0].events.height
    assert sorted(back.devices["device"].to_list()) == list(range(8))
    assert back.devices["product"].null_count() == 8
    assert any("agent_info.csv: GPU ordinals follow the agent ids" in w
               for w in back.meta.warnings)
    assert not any("not a known product" in w for w in back.meta.warnings)
    # the reader's own facts name the CSV layout it read (parsers.rocprof.facts)
    assert [(f.layout, f.schema_version) for f in rocprof_facts(back.meta)] == [
        ({"6.2": "6.2", "7": "7.x"}[layout], None)]


@pytest.mark.parametrize("fmt", list(WRITERS))
def test_launch_shapes_round_trip(fmt: str, tmp_path: Path) -> None:
    """Every writer carries each dispatch's grid and workgroup sizes, VGPRs and LDS bytes
    (from ``launch``) into its format, and the reader gives the same ``launch`` text back;
    the 6.x CSV layouts have no VGPR column, so ``regs`` is unknown there."""
    trace = tracelens.load(SAMPLES / "mi355x_8gpu_llama_fsdp.xplane.pb")  # has regs=
    WRITERS[fmt][0](trace, tmp_path)
    back = tracelens.load(tmp_path)
    keys = ["rank", "device", "start_ns", "kind"]
    want = trace.events.sort(keys).select(*keys, "launch")
    assert want["launch"].cast(pl.String).str.contains("regs=").any()
    if fmt in ("csv-6.2", "csv-6.3"):
        want = want.with_columns(pl.col("launch").cast(pl.String).str.replace(r" regs=\d+", "")
                                 .cast(want.schema["launch"]))
    assert back.events.sort(keys).select(*keys, "launch").equals(want)
