"""``tracelens export``: tables out (Parquet, CSV, JSON Lines) and a Perfetto timeline."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner

import tracelens
from tracelens.analyze.timeline.tables import kernel_stats
from tracelens.cli.commands import main

from .conftest import CPU_TRACE, GPU_TRACES, REAL_ROCPROF, SAMPLES, real_trace

SAMPLE = SAMPLES / "mi300x_8gpu_llama_step.xplane.pb"


def run(*args: str) -> tuple[int, str, str]:
    r = CliRunner().invoke(main, list(args))
    return r.exit_code, r.stdout, r.stderr


def test_parquet_events_round_trip_with_schema_metadata(tmp_path: Path) -> None:
    out = tmp_path / "events.parquet"
    code, _, err = run("export", str(SAMPLE), "-o", str(out))
    assert code == 0, err
    back = pl.read_parquet(out)
    # the frames' dictionary-encoded text is written as the documented String columns
    want = tracelens.load(SAMPLE).events.with_columns(pl.col(pl.Categorical).cast(pl.String))
    assert back.schema == want.schema
    assert back.equals(want)
    meta = pl.read_parquet_metadata(out)
    assert meta["tracelens_table"] == "events"
    assert meta["tracelens_version"] == tracelens.__version__
    assert json.loads(meta["tracelens_schema"]) == {k: str(v) for k, v in want.schema.items()}


@pytest.mark.parametrize("ext", [".csv", ".jsonl"])
def test_text_tables_hold_every_row(tmp_path: Path, ext: str) -> None:
    out = tmp_path / f"kernels{ext}"
    code, _, err = run("export", str(SAMPLE), "-o", str(out), "--table", "kernels")
    assert code == 0, err
    back = pl.read_csv(out) if ext == ".csv" else pl.read_ndjson(out)
    want = kernel_stats(tracelens.load(SAMPLE).events)
    assert back.height == want.height
    assert back["name"].to_list() == want["name"].to_list()
    assert back["total_ns"].to_list() == want["total_ns"].to_list()


def test_kernel_stats_by_hand() -> None:
    ev = pl.DataFrame({"name": ["a", "a", "a", "b"], "kind": ["kernel"] * 4,
                       "category": ["gemm"] * 4, "subcategory": [None] * 4,
                       "rule": ["r"] * 4, "host": ["h"] * 4, "rank": [0] * 4,
                       "device": [0, 0, 1, 0], "start_ns": [0, 100, 0, 5],
                       "end_ns": [10, 130, 20, 6],
                       "launch": ["grid=2,1,1", "grid=1,1,1", "grid=2,1,1", None]})
    from tracelens.core.model import EVENT_SCHEMA, conform

    got = kernel_stats(conform(ev, EVENT_SCHEMA)).to_dicts()  # an event frame of the model
    assert [r["name"] for r in got] == ["a", "b"]
    a, b = got
    assert (a["count"], a["total_ns"], a["min_ns"], a["p50_ns"], a["p90_ns"], a["max_ns"],
            a["devices"]) == (3, 60, 10, 20, 30, 30, 2)
    assert a["mean_ns"] == 20.0
    assert (a["launch"], a["launches"]) == ("grid=2,1,1", 2)  # the most common of two
    assert (b["launch"], b["launches"]) == (None, 0)


def test_launch_shape_from_every_kernel_details_format() -> None:
    from parsers.xspace.columns import launch_shape

    kd = pl.Series(["regs:64 static_shared:1024 dynamic_shared:512 grid:128,1,1 "
                    "block:256,1,1 occ_pct:50",  # CUDA
                    " grid:32,37,1 block:256,1,1 private_mem:0 group_mem:29568 occ_pct:0",
                    "regs:0 static_shared:0 dynamic_shared:0 grid:4,1,1 block:64,1,1 "
                    "private_mem:0", None, "garbage"])
    assert launch_shape(kd).to_list() == [
        "grid=128,1,1 block=256,1,1 regs=64 shared=1536",
        "grid=32,37,1 block=256,1,1 shared=29568",
        "grid=4,1,1 block=64,1,1 shared=0", None, None]


def test_both_xspace_decoders_give_the_same_launch_shapes() -> None:
    from parsers import xspace as xspace_reader

    path = real_trace(GPU_TRACES["gemm08"])
    c, py = (xspace_reader.read(path, decoder=d).events for d in ("c", "python"))
    assert c["launch"].null_count() == 0
    assert c.sort("start_ns", "stream")["launch"].equals(py.sort("start_ns", "stream")["launch"])


@pytest.mark.parametrize("table", ["steps", "devices", "collectives"])
def test_other_tables_agree_with_summarize(tmp_path: Path, table: str) -> None:
    out = tmp_path / f"{table}.parquet"
    assert run("export", str(SAMPLE), "-o", str(out), "--table", table)[0] == 0
    df = pl.read_parquet(out)
    s = tracelens.summarize(tracelens.load(SAMPLE))
    if table == "devices":
        assert df["idle_ns"].to_list() == [d["timeline"]["idle_ns"] for d in s["devices"]]
        assert df["host_launch_ns"].to_list() == [
            d["timeline"]["idle_breakdown"]["host_launch_ns"] for d in s["devices"]]
    elif table == "steps":
        want = sorted((d["device"], st["step"], st["timeline"]["busy_ns"])
                      for d in s["devices"] for st in d["steps"])
        assert sorted(df.select("device", "step", "busy_ns").rows()) == want
    else:
        n = sum(c["count"] for c in s["collectives"]["by_type"])
        assert df.height == n


def test_host_events_table(tmp_path: Path) -> None:
    """Issue 47: ``--table host_events`` writes the model's host event frame whole (API calls
    and step annotations of the sample, with thread and correlation id), in every format;
    --host narrows it, a filter of device activities is refused. Before: not a choice."""
    out = tmp_path / "host.parquet"
    code, _, err = run("export", str(SAMPLE), "-o", str(out), "--table", "host_events")
    assert code == 0, err
    t = tracelens.load(SAMPLE)
    want = t.host_events.with_columns(pl.col(pl.Categorical).cast(pl.String))
    back = pl.read_parquet(out)
    assert back.columns == ["host", "rank", "pid", "tid", "name", "start_ns", "end_ns",
                            "correlation_id", "kind"]
    assert back.equals(want) and back.height == 2667
    assert pl.read_parquet_metadata(out)["tracelens_table"] == "host_events"
    # the API calls' correlation ids are the launched kernels' own
    api = set(back.filter(pl.col("kind") == "api")["correlation_id"].drop_nulls().to_list())
    launched = set(t.events["correlation_id"].drop_nulls().to_list())
    assert api and launched <= api
    for ext in (".csv", ".jsonl"):
        text = tmp_path / f"host{ext}"
        assert run("export", str(SAMPLE), "-o", str(text), "--table", "host_events")[0] == 0
        got = pl.read_csv(text) if ext == ".csv" else pl.read_ndjson(text)
        assert got.height == want.height and got["tid"].to_list() == want["tid"].to_list()
    job = SAMPLES / "mi355x_2x8gpu_straggler"
    hosts = sorted(tracelens.load(job).host_events["host"].cast(pl.String).unique())
    one = tmp_path / "one.csv"
    assert run("export", str(job), "-o", str(one), "--table", "host_events", "--host",
               hosts[0])[0] == 0
    assert set(pl.read_csv(one)["host"]) == {hosts[0]}
    code, _, err = run("export", str(SAMPLE), "-o", str(tmp_path / "w.csv"), "--table",
                       "host_events", "--time", "0:1ms")
    assert code == 2 and "--host only" in err


def validate_trace_events(doc: dict) -> dict[str, int]:
    """Check a document against the Chrome trace-event format (JSON object form): what every
    phase we write requires. Returns the count per phase."""
    assert isinstance(doc["traceEvents"], list)
    counts: dict[str, int] = {}
    for e in doc["traceEvents"]:
        ph = e["ph"]
        counts[ph] = counts.get(ph, 0) + 1
        assert isinstance(e["pid"], int)
        if ph == "X":
            assert isinstance(e["name"], str) and isinstance(e["tid"], int)
            assert isinstance(e["ts"], (int, float)) and isinstance(e["dur"], (int, float))
            assert e["dur"] >= 0 and e["ts"] >= 0
            assert isinstance(e.get("args", {}), dict)
        elif ph == "C":
            assert isinstance(e["name"], str) and isinstance(e["ts"], (int, float))
            assert all(isinstance(v, (int, float)) for v in e["args"].values())
        elif ph == "M":
            assert e["name"] in {"process_name", "process_sort_index", "thread_name"}
            assert isinstance(e["args"], dict)
        else:
            raise AssertionError(f"unexpected phase {ph}")
    return counts


def _perfetto(path: Path, tmp_path: Path, gz: bool = False) -> tuple[dict, tracelens.Trace]:
    out = tmp_path / ("t.json.gz" if gz else "t.json")
    code, _, err = run("export", str(path), "--perfetto", str(out))
    assert code == 0, err
    raw = gzip.decompress(out.read_bytes()) if gz else out.read_bytes()
    return json.loads(raw), tracelens.load(path)


@pytest.mark.parametrize("sample", ["mi300x_8gpu_llama_step.xplane.pb",
                                    "h100_8gpu_moe_ddp.xplane.pb", "mi355x_2x8gpu_straggler",
                                    "mi355x_8gpu_llama_fsdp.xplane.pb",
                                    "hlo/planted.xplane.pb"])
def test_perfetto_export_of_samples_is_valid(sample: str, tmp_path: Path) -> None:
    doc, trace = _perfetto(SAMPLES / sample, tmp_path, gz=sample.startswith("h100"))
    counts = validate_trace_events(doc)
    steps = trace.steps.join(trace.devices.select("rank"), on="rank").height
    assert counts["X"] == trace.events.height + steps
    t0 = doc["otherData"]["t0_ns"]
    xs = [e for e in doc["traceEvents"] if e["ph"] == "X" and e["cat"] != "step"]
    # every activity keeps its exact ns start and duration
    ev = trace.events.sort("start_ns")
    got = sorted(round(e["ts"] * 1000) + t0 for e in xs)
    assert got == ev["start_ns"].to_list()
    assert sum(round(e["dur"] * 1000) for e in xs) == int(
        (ev["end_ns"] - ev["start_ns"]).sum())
    # the exposed-communication track rises exactly as often as there are exposed stretches
    assert counts["C"] > 0


def _activities(doc: dict) -> int:
    return sum(1 for e in doc["traceEvents"] if e["ph"] == "X" and e["cat"] != "step")


@pytest.mark.parametrize("name", sorted(GPU_TRACES.values()) + [CPU_TRACE])
def test_perfetto_export_of_real_traces_is_valid(name: str, tmp_path: Path) -> None:
    doc, trace = _perfetto(real_trace(name), tmp_path)
    validate_trace_events(doc)
    assert _activities(doc) == trace.events.height


KINETO = ["a100_nccl_2rank_rank0.json.gz", "mi250_rocm62_minitoy_train.json.gz",
          "sampled_128rank_job", "mi300x_inference/normalization_layers_2gpu.json.gz",
          "mi300x_inference/sglang_qwen3_8b_decode.json.gz",
          "mi300x_inference/sglang_qwen3_8b_prefilldecode.json.gz",
          "mi300x_inference/vllm_decode_full_graph.json.gz",
          "mi300x_inference/vllm_prefilldecode_piecewise_graph.json.gz",
          "mi300x_inference/xdit_flux1_aiter_sage_rank0.json.gz"]


@pytest.mark.parametrize("name", KINETO)
def test_perfetto_export_of_real_kineto_is_valid(name: str, tmp_path: Path) -> None:
    path = REAL_ROCPROF.parent / "kineto" / name
    if not path.exists():
        pytest.skip(f"real trace {path} not present")
    doc, trace = _perfetto(path, tmp_path)
    validate_trace_events(doc)
    assert _activities(doc) == trace.events.height


def test_perfetto_export_of_real_rocprof_is_valid(tmp_path: Path) -> None:
    path = REAL_ROCPROF / "mi350x_908_results.json.gz"
    if not path.exists():
        pytest.skip(f"real trace {path} not present")
    doc, trace = _perfetto(path, tmp_path, gz=True)
    validate_trace_events(doc)
    assert _activities(doc) == trace.events.height


def test_perfetto_loads_in_trace_processor_when_installed(tmp_path: Path) -> None:
    tp = pytest.importorskip("perfetto.trace_processor",
                             reason="Perfetto's Python trace processor is not installed")
    doc_path = tmp_path / "t.json"
    assert run("export", str(SAMPLE), "--perfetto", str(doc_path))[0] == 0
    proc = tp.TraceProcessor(trace=str(doc_path))
    n = next(iter(proc.query("select count(*) as n from slice"))).n
    assert n >= tracelens.load(SAMPLE).events.height


def test_hostile_names_stay_json_strings(tmp_path: Path) -> None:
    from tracelens_dev.writers.xspace import Activity, build_xspace

    name = '"},{"ph":"X"}\n</script><script>alert(1)</script>'
    path = tmp_path / "hostile.xplane.pb"
    path.write_bytes(build_xspace([Activity(0, 1, name, 100, 50, {})]))
    doc, _ = _perfetto(path, tmp_path)
    assert [e["name"] for e in doc["traceEvents"] if e["ph"] == "X"] == [name]


def test_bad_requests_exit_2_or_usage(tmp_path: Path) -> None:
    code, _, err = run("export", str(SAMPLE))
    assert code == 2 and "give -o FILE" in err
    code, _, err = run("export", str(SAMPLE), "-o", str(tmp_path / "x.xlsx"))
    assert code == 2 and "unknown table format" in err
    code, _, err = run("export", str(SAMPLE), "-o", str(SAMPLE))
    assert code == 2 and "one of the inputs" in err
    code, _, err = run("export", str(SAMPLE), "-o", str(tmp_path / "no" / "x.csv"))
    assert code == 2 and err.startswith("error: ") and "does not exist" in err
    assert not list(tmp_path.glob("*.part"))
