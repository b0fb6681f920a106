"""PyTorch profiler (Kineto) JSON: the real traces, the writer round trip, bad input."""

from __future__ import annotations

import decimal
import gzip
import json
from pathlib import Path

import polars as pl
import pytest

import tracelens
from tracelens_dev.writers.kineto import write as write_kineto
from parsers.kineto.facts import kineto_facts
from parsers.kineto.reader import to_ns
from tests.synth_helpers import writer_device, writer_events
from tests.conftest import SAMPLES, SHARED, cli
from tracelens.analyze.communication.collectives import collective_activities
from tracelens.core.errors import TraceInputError
from tracelens.loading.formats import sniff_format
from tracelens.core.model import CounterFacts, ShapeFacts
from tests.test_rocprof_parity import _without_host

KINETO = SHARED / "traces" / "kineto"
REAL = sorted(KINETO.rglob("*.json.gz")) if KINETO.exists() else []
# 8 × MI300X FSDP (RCCL all-gather/reduce-scatter), 8 × H100 MoE (NCCL all-to-all, copies),
# 8 × MI355X FSDP
PARITY_SAMPLES = ["mi300x_8gpu_llama_step.xplane.pb", "h100_8gpu_moe_ddp.xplane.pb",
                  "mi355x_8gpu_llama_fsdp.xplane.pb"]
# kernel names of these traces the classifier (tracelens/classify) still puts in `other`,
# above 2 % of busy time; the classify branch adds rules for them
def _real(name: str) -> Path:
    path = KINETO / name
    if not path.exists():
        pytest.skip(f"real trace {path} not present")
    return path


def _independent_busy(path: Path) -> dict[int, int]:
    """Per device: the union of kernel, memcpy and memset intervals, in ns, computed with the
    standard library (timestamps parsed as decimals, so exact) and a plain sweep."""
    doc = json.loads(gzip.decompress(path.read_bytes()), parse_float=decimal.Decimal)
    by_dev: dict[int, list[tuple[int, int]]] = {}
    for e in doc["traceEvents"]:
        if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"):
            s = int(decimal.Decimal(e["ts"]) * 1000)
            by_dev.setdefault(e["args"]["device"], []).append(
                (s, s + int(decimal.Decimal(e["dur"]) * 1000)))
    out = {}
    for dev, iv in by_dev.items():
        total, cur_s, cur_e = 0, None, None
        for s, e in sorted(iv):
            if cur_e is None or s > cur_e:
                total += (cur_e - cur_s) if cur_e is not None else 0
                cur_s, cur_e = s, e
            else:
                cur_e = max(cur_e, e)
        out[dev] = total + (cur_e - cur_s)
    return out


@pytest.mark.parametrize("path", REAL, ids=[p.name.split(".")[0] for p in REAL])
def test_real_trace_busy_is_the_union_of_device_activity(path: Path) -> None:
    trace = tracelens.load(path)
    summary = tracelens.summarize(trace)
    got = {d["device"]: d["timeline"]["busy_ns"] for d in summary["devices"]}
    assert got == _independent_busy(path)  # load() has validated the model contract


@pytest.mark.parametrize("path", REAL, ids=[p.name.split(".")[0] for p in REAL])
def test_real_trace_other_under_two_percent(path: Path) -> None:
    ev = tracelens.load(path).events.with_columns(d=pl.col("end_ns") - pl.col("start_ns"))
    other = ev.filter(pl.col("category") == "other")["d"].sum() / ev["d"].sum()
    assert other < 0.02


def test_timestamps_are_exact_nanoseconds() -> None:
    # 4458676983543.183 µs: round(ts * 1000) gives ...182 (the float product rounds down)
    us = pl.Series("ts", [4458676983543.183, 4026150081635.214, 0.001, 12.5])
    assert to_ns(us).to_list() == [4458676983543183, 4026150081635214, 1, 12500]
    assert to_ns(pl.Series("ts", [1682725898082228])).to_list() == [1682725898082228000]


def test_a100_collectives_get_type_size_group_and_busbw() -> None:
    trace = tracelens.load(_real("a100_nccl_2rank_rank0.json.gz"))
    coll = trace.events.filter(pl.col("category") == "collective")
    assert coll.height == 21
    assert sorted(coll["subcategory"].unique().to_list()) == ["all-reduce",
                                                              "collective-broadcast"]
    assert coll["msg_bytes"].null_count() == 0 and set(coll["group_size"].to_list()) == {2}
    # the first all-reduce: record_param_comms says 2049000 Float elements
    first = coll.filter(pl.col("subcategory") == "all-reduce").sort("start_ns").row(0, named=True)
    assert first["msg_bytes"] == 2049000 * 4 and first["dtype"] == "fp32"
    acts = collective_activities(trace.events)
    assert acts["busbw_gb_per_s"].null_count() == 0
    assert trace.meta.member.world_size == 2
    assert trace.steps["source"].unique().to_list() == ["annotation:cpu-launches"]
    assert trace.steps["step"].to_list() == [4, 5, 6]


def test_vllm_empty_device_name_is_identified_and_said() -> None:
    trace = tracelens.load(_real("mi300x_inference/vllm_decode_full_graph.json.gz"))
    assert trace.devices["spec_id"].to_list() == ["mi300x"]
    assert any("empty name" in w and "MI300X" in w for w in trace.meta.warnings)
    assert trace.steps["source"].to_list() == ["graph-replay"]


def test_step_sources() -> None:
    mi250 = tracelens.load(_real("mi250_rocm62_minitoy_train.json.gz"))
    src = dict(mi250.steps.select("step", "source").iter_rows())
    # its GPU-side step 1 holds 61.8% of device time: the CPU-side steps are used
    # (tests/test_kineto_steps.py); step 2 launched nothing and, 0.049 ms at the trace's
    # end, is a partial step, left out
    assert src == {1: "annotation:cpu-launches"}
    # the trace-wide steps_source every output shows says the same: the kept step's
    assert mi250.meta.steps_source == "annotation:cpu-launches"
    vllm = tracelens.load(_real("mi300x_inference/vllm_decode_full_graph.json.gz"))
    assert vllm.meta.steps_source == "graph-replay"
    norm = tracelens.load(_real("mi300x_inference/normalization_layers_2gpu.json.gz"))
    assert norm.steps.is_empty() and kineto_facts(norm.meta).steps_source == "none"
    assert norm.meta.steps_source == "none"


def test_record_shapes_give_gemm_flops_once_per_op() -> None:
    trace = tracelens.load(_real("sampled_128rank_job/rank-0.json.gz"))
    costed = trace.events.filter(pl.col("cost_source") == "shapes")
    assert costed.height and set(costed["op"].unique().to_list()) <= {
        "aten::addmm", "aten::mm", "aten::bmm", "aten::matmul", "aten::linear"}
    assert (costed["flops"] >= 0).all()


def _parity_trace(tmp: Path, sample: Path) -> tuple[dict, dict, tracelens.Trace,
                                                   tracelens.Trace]:
    trace = tracelens.load(sample)
    write_kineto(trace, tmp / "job")
    back = tracelens.load(tmp / "job")
    return (tracelens.summarize(trace, top=20), tracelens.summarize(back, top=20), trace, back)


def _no_clock(summary: dict) -> dict:
    out = _without_host(summary)
    for d in out["devices"]:  # Kineto records no clock: the table's peaks, said differently
        d.get("spec", {}).pop("source", None)
    return out


@pytest.mark.parametrize("sample", PARITY_SAMPLES)
def test_writer_round_trip_gives_the_same_summary(sample: str, tmp_path: Path) -> None:
    expected, got, trace, back = _parity_trace(tmp_path, SAMPLES / sample)
    assert [s["format"] for s in got["inputs"]] == ["kineto"]
    assert _no_clock(got) == _no_clock(expected)
    keys = ["rank", "device", "start_ns"]
    cols = ["subcategory", "msg_bytes", "group_size"]
    a = trace.events.filter(pl.col("category") == "collective").sort(keys).select(cols)
    b = back.events.filter(pl.col("category") == "collective").sort(keys).select(cols)
    assert a.equals(b)
    assert back.steps["source"].unique().to_list() == ["annotation:gpu"]
    launch = ["rank", "device", "start_ns", "kind", "launch"]
    assert trace.events["launch"].drop_nulls().n_unique() > 1  # the sample has shapes
    assert trace.events.sort(keys).select(launch).equals(back.events.sort(keys).select(launch))


def test_real_traces_give_kernel_launch_shapes() -> None:
    """``grid``/``block``/``registers per thread``/``shared memory`` of kernel events become
    ``launch`` text (CUDA A100: all four; ROCm MI300X: grid and block only, on the kernels
    that carry them); copies have none."""
    ev = tracelens.load(_real("a100_nccl_2rank_rank0.json.gz")).events
    first = ev.filter(pl.col("name").cat.starts_with("void cudnn::bn_bw_1C11_kernel_new<"),
                      pl.col("correlation_id") == 57541)
    assert first["launch"].to_list() == ["grid=512,1,1 block=512,1,1 regs=40 shared=400"]
    assert ev.filter(pl.col("kind") == "kernel")["launch"].null_count() == 0
    assert ev.filter(pl.col("kind") != "kernel")["launch"].null_count() == \
        ev.filter(pl.col("kind") != "kernel").height
    ev = tracelens.load(_real("mi300x_inference/sglang_qwen3_8b_decode.json.gz")).events
    k = ev.filter(pl.col("correlation_id") == 92160)
    assert k["name"].cat.starts_with("void at::native::(anonymous namespace)::multi_tensor"
                                     "_apply_k").to_list() == [True]
    assert k["launch"].to_list() == ["grid=4,1,1 block=512,1,1"]
    assert ev["launch"].is_not_null().sum() == 11  # only 11 of 555 kernels carry grid/block


def _two_vendors(tmp: Path) -> tuple[Path, Path]:
    """The same two ops (a GEMM and causal flash attention) on an H100 and an MI300X."""
    mm = {"Input Dims": [[4096, 8192], [8192, 1024]], "Input type": ["c10::BFloat16"] * 2}
    sdpa = {"Input Dims": [[2, 16, 2048, 128]] * 3 + [[], [], [], []],
            "Input type": ["c10::BFloat16"] * 3 + ["Scalar"] * 4,
            "Concrete Inputs": ["", "", "", "0.", "True", "False", ""]}
    names = {"nvidia": ("sm90_xmma_gemm_bf16bf16_bf16f32", "flash_fwd_kernel"),
             "amd": ("Cijk_Ailk_Bljk_BBS_BH_MT256x256x64", "aiter::fmha_fwd_hd128_bf16_causal")}
    out = []
    for vendor, product, arch, cus, mem in (
            ("nvidia", "NVIDIA H100 SXM", "sm_90", 132, 80 << 30),
            ("amd", "AMD Instinct MI300X", "gfx942", 304, 192 << 30)):
        rows = []
        for i in range(3):
            t = i * 1_000_000
            rows.append(("kernel", names[vendor][0], t, t + 400_000, "aten::mm"))
            rows.append(("kernel", names[vendor][1], t + 400_000, t + 700_000,
                         "aten::_scaled_dot_product_flash_attention"))
        ev = writer_events(rows)
        devices = pl.DataFrame([writer_device(vendor, arch, product, cus, mem)])
        steps = pl.DataFrame({"rank": [0, 0, 0], "step": [0, 1, 2],
                              "start_ns": [0, 1_000_000, 2_000_000],
                              "end_ns": [1_000_000, 2_000_000, 3_000_000],
                              "source": ["x"] * 3})
        trace = tracelens.Trace(events=ev, host_events=pl.DataFrame(), steps=steps,
                                devices=devices)
        out.append(write_kineto(trace, tmp / vendor, op_args={
            "aten::mm": mm, "aten::_scaled_dot_product_flash_attention": sdpa})[0])
    return out[0], out[1]


def test_same_model_on_h100_and_mi300x_compares_op_by_op(tmp_path: Path) -> None:
    h100, mi300x = _two_vendors(tmp_path)
    a, b = tracelens.load(h100), tracelens.load(mi300x)
    assert a.devices["spec_id"].to_list() == ["h100"]
    assert b.devices["spec_id"].to_list() == ["mi300x"]
    for t in (a, b):
        per_op = dict(t.events.group_by("op").agg(pl.col("flops").sum()).iter_rows())
        assert per_op == {"aten::mm": 3 * 2.0 * 4096 * 8192 * 1024,
                          # causal: half of 2·B·H·S·S·(D + D)
                          "aten::_scaled_dot_product_flash_attention":
                              3 * 0.5 * 2.0 * 2 * 16 * 2048 * 2048 * 256}
        cats = dict(t.events.group_by("op").agg(pl.col("category").first().cast(pl.String))
                    .iter_rows())
        assert cats == {"aten::mm": "gemm",
                        "aten::_scaled_dot_product_flash_attention": "attention"}
    res = cli("compare", "--format", "json", str(h100), str(mi300x))
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    # both ops pair across vendors by op (GEMM with GEMM, attention with attention), and
    # with equal time per step no kernel row changed
    assert out["matching"]["by_op"] == 2
    assert out["matching"]["only_base"] == out["matching"]["only_new"] == 0
    assert out["kernels"] == [] and out["delta_ns"] == 0


@pytest.mark.parametrize("command", ["summarize", "report", "collectives", "scaling"])
def test_cli_commands_accept_kineto(command: str, tmp_path: Path) -> None:
    path = _real("a100_nccl_2rank_rank0.json.gz")
    args = [command, str(path)]
    if command == "report":
        args += ["-o", str(tmp_path / "r.html")]
    if command == "scaling":
        args = [command, str(path), str(path)]
    res = cli(*args)
    assert res.returncode == 0, res.stderr


def test_rank_directory_is_one_job() -> None:
    d = KINETO / "sampled_128rank_job"
    if not d.exists():
        pytest.skip("sampled ranks not present")
    trace = tracelens.load(d)
    assert trace.events["rank"].unique().sort().to_list() == [0, 1]
    assert sorted(trace.meta.hosts) == ["rank0", "rank1"]
    # no shared clock in Kineto: the two ranks are put on one by their matched SendRecv ends
    assert trace.meta.alignment.startswith("collective ends")


def _bad(tmp: Path) -> list[tuple[Path, str]]:
    good = json.dumps({"schemaVersion": 1, "traceEvents": [
        {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1.0, "dur": 2.0,
         "args": {"device": 0, "stream": 7, "correlation": 1}}]}).encode()
    cases = []
    p = tmp / "trunc.json"
    p.write_bytes(good[: len(good) // 2])
    cases.append((p, "corrupt or truncated JSON"))
    p = tmp / "trunc.json.gz"
    p.write_bytes(gzip.compress(good)[:-12])
    cases.append((p, "gzip"))
    p = tmp / "noevents.json"
    p.write_bytes(json.dumps({"schemaVersion": 1, "deviceProperties": []}).encode())
    cases.append((p, "no 'traceEvents' list"))
    p = tmp / "jax.trace.json"
    p.write_bytes(json.dumps({"displayTimeUnit": "ns", "traceEvents": []}).encode())
    cases.append((p, "Chrome trace JSON"))
    return cases


def test_bad_kineto_input_exits_2_with_one_line(tmp_path: Path) -> None:
    for path, words in _bad(tmp_path):
        res = cli("summarize", str(path))
        assert res.returncode == 2, (path, res.stdout, res.stderr)
        lines = res.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"error: {path}") and words in lines[0], \
            lines


_MI300X_PROPS = [{"id": 0, "name": "AMD Instinct MI300X", "numSms": 304,
                  "totalGlobalMem": 192 << 30, "computeMajor": 9, "computeMinor": 4,
                  "warpSize": 64}]


def test_events_without_ts_are_counted_and_all_unusable_is_refused(tmp_path: Path) -> None:
    """Device activity that is all unusable is nothing to analyse (exit 2, with the reason);
    one usable activity is read, the others counted."""
    bad = [{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "dur": 2.0,
            "args": {"device": 0, "stream": 7}},
           {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1e300, "dur": 2.0,
            "args": {"device": 0, "stream": 7}},
           {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 5.0, "dur": -2.0,
            "args": {"device": 0, "stream": 7}}]
    p = tmp_path / "untimed.json"
    p.write_bytes(json.dumps({"schemaVersion": 1, "deviceProperties": _MI300X_PROPS,
                              "traceEvents": bad}).encode())
    res = cli("summarize", str(p))
    assert res.returncode == 2, res.stdout
    assert res.stderr.count("\n") == 1 and "none of its 3 device activities is usable" in \
        res.stderr and "3 events without a valid ts/dur" in res.stderr, res.stderr
    good = {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 9.0, "dur": 2.0,
            "args": {"device": 0, "stream": 7}}
    p.write_bytes(json.dumps({"schemaVersion": 1, "deviceProperties": _MI300X_PROPS,
                              "traceEvents": [*bad, good]}).encode())
    trace = tracelens.load(p)
    assert trace.events.height == 1
    assert any("3 events without a valid ts/dur" in w for w in trace.meta.warnings)
    assert trace.devices["spec_id"].to_list() == ["mi300x"]


def test_a_trace_without_device_activity_is_not_an_error(tmp_path: Path) -> None:
    p = tmp_path / "cpu_only.json"
    p.write_bytes(json.dumps({"schemaVersion": 1, "deviceProperties": _MI300X_PROPS,
                              "traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::add",
                                               "pid": 1, "tid": 1, "ts": 1.0, "dur": 2.0}]}
                             ).encode())
    res = cli("summarize", str(p))
    assert res.returncode == 0, res.stderr
    assert "No device activity" in res.stdout


def test_a_trace_whose_events_come_before_its_header_is_read(tmp_path: Path) -> None:
    """A Kineto trace re-saved by a script with ``traceEvents`` first (no schemaVersion or
    deviceProperties in its first bytes) was refused as "a Chrome trace JSON"; Kineto's event
    categories tell it apart, and it gives the same summary as the original."""
    path = _real("a100_nccl_2rank_rank0.json.gz")
    doc = json.load(gzip.open(path))
    moved = tmp_path / path.name
    with gzip.open(moved, "wt") as fh:
        json.dump({"traceEvents": doc.pop("traceEvents"), **doc}, fh)
    assert sniff_format(moved) == "kineto"
    res_a, res_b = cli("summarize", "--format", "json", str(path)), \
        cli("summarize", "--format", "json", str(moved))
    assert res_a.returncode == res_b.returncode == 0, res_b.stderr
    a, b = json.loads(res_a.stdout), json.loads(res_b.stdout)
    assert a.pop("inputs") != b.pop("inputs") and a == b
    # a Chrome trace of another tool (JAX's trace viewer JSON) is still refused
    other = tmp_path / "vm.trace.json"
    other.write_text(json.dumps({"traceEvents": [
        {"ph": "X", "pid": 1, "tid": 2, "name": "fusion.1", "ts": 1.0, "dur": 2.0}]}))
    assert sniff_format(other) == "chrome-json"


def test_nan_and_infinity_written_by_python_json_are_unknown_values(tmp_path: Path) -> None:
    """Python's ``json.dump`` writes float nan/inf as NaN/Infinity, which JSON (and orjson)
    does not allow: a re-saved trace holding one was refused as "corrupt or truncated JSON".
    Those values are now unknown and counted: in an argument nothing reads the summary is
    the original's; in a kernel's dur that kernel is skipped, as any event without a valid
    dur is."""
    from dataclasses import replace

    from tracelens.analyze.summary.build import summarize

    path = _real("a100_nccl_2rank_rank0.json.gz")
    doc = json.load(gzip.open(path))
    kernels = [e for e in doc["traceEvents"] if e.get("cat") == "kernel"]
    for e in kernels[:3]:
        e["args"]["est. achieved occupancy %"] = float("nan")
    kernels[3]["args"]["blocks per SM"] = float("-inf")
    saved = tmp_path / "nan.json"
    saved.write_text(json.dumps(doc))
    assert "NaN" in saved.read_text() and "-Infinity" in saved.read_text()
    a, b = tracelens.load(path), tracelens.load(saved)
    assert any("4 NaN/Infinity values" in w for w in b.meta.warnings)
    sa, sb = summarize(a), summarize(b)
    assert sa.warnings != sb.warnings
    assert replace(sa, inputs=(), warnings=()) == replace(sb, inputs=(), warnings=())

    kernels[0]["dur"] = float("nan")
    saved.write_text(json.dumps(doc))
    c = tracelens.load(saved)
    assert any("5 NaN/Infinity values" in w for w in c.meta.warnings)
    assert any("skipped 1 events without a valid ts/dur (1 of them device activity)" in w
               for w in c.meta.warnings)
    assert c.events.height == a.events.height - 1
    # a document broken otherwise keeps its error
    saved.write_text(json.dumps(doc)[:-100])
    with pytest.raises(TraceInputError, match="corrupt or truncated JSON"):
        tracelens.load(saved)


@pytest.mark.parametrize("name, host", [
    ("h100_Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz", "h100_Qwen_Qwen1.5-0.5B-Chat__1016005"),
    ("node1.cluster_4242.1700000000123.pt.trace.json.gz", "node1.cluster_4242"),
])
def test_host_name_keeps_the_dots_of_the_file_name(tmp_path: Path, name: str,
                                                   host: str) -> None:
    """Issue 25 A4: the host was the file name cut at its first dot (``h100_Qwen_Qwen1``)."""
    from tracelens.loading.loader import load

    src = _real("mi250_rocm62_minitoy_train.json.gz")
    copy = tmp_path / name
    copy.write_bytes(src.read_bytes())
    trace = load([copy])
    assert set(trace.events["host"].unique()) == {host}


@pytest.mark.parametrize("tolerant", [False, True])
def test_events_without_a_name_are_dropped_and_counted(tmp_path: Path, tolerant: bool) -> None:
    """Issue 25 D13: null kernel names ended in ``AssertionError: trace violates the model:
    events.name: 5 nulls``; now they are skipped, counted, and the rest is read. With
    ``tolerant`` a NaN elsewhere sends the document down the dict path."""
    from tracelens.loading.loader import load

    doc = json.loads(gzip.decompress(_real("a100_nccl_2rank_rank0.json.gz").read_bytes()))
    kernels = [e for e in doc["traceEvents"] if e.get("cat") == "kernel"]
    for e in kernels[:5]:
        e["name"] = None
    text = json.dumps(doc)
    if tolerant:
        text = text.replace('"traceEvents"', '"extra": NaN, "traceEvents"', 1)
    p = tmp_path / "t.json"
    p.write_text(text)
    trace = load([p])
    assert trace.events.filter(pl.col("kind") == "kernel").height == len(kernels) - 5
    assert "t.json: skipped 5 events without a name (5 of them device activity)" \
        in trace.meta.warnings


def test_a_gpu_the_table_lacks_keeps_its_name_with_peaks_unknown(tmp_path: Path) -> None:
    """Issue 25 A3: the real A100 trace with its deviceProperties renamed ``NVIDIA H800 PCIe``
    (114 SMs: an H100 PCIe's properties, a model the table lacks) shows that name and says
    its peaks are unknown: the peaks line left the device out, the HTML said nothing."""
    from click.testing import CliRunner

    from tracelens.cli.commands import main

    doc = json.loads(gzip.decompress(_real("a100_nccl_2rank_rank0.json.gz").read_bytes()))
    for p in doc["deviceProperties"]:
        p.update(name="NVIDIA H800 PCIe", computeMajor=9, computeMinor=0, numSms=114,
                 totalGlobalMem=85_000_000_000)
    path = tmp_path / "h800pcie.json.gz"
    path.write_bytes(gzip.compress(json.dumps(doc).encode()))
    r = CliRunner().invoke(main, ["summarize", str(path)])
    assert r.exit_code == 0, r.output
    assert "NVIDIA H800 PCIe" in r.output and "NVIDIA H800 PCIe: peaks unknown" in r.output
    html = tmp_path / "r.html"
    r = CliRunner().invoke(main, ["report", str(path), "-o", str(html)])
    assert r.exit_code == 0, r.output
    assert "1× NVIDIA H800 PCIe (peaks unknown)" in html.read_text()


def test_a_worker_process_sends_the_file_costed_and_identified() -> None:
    """Issue 26: shape costs and device identification are core stages that run right after
    the reader, in the reading worker too (tracelens.loading.reading.file_stages): what comes back
    is
    costed and identified, and the reader's facts are used up, not shipped."""
    from tracelens.loading.reading import from_worker, read_in_worker

    path = _real("mi250_rocm62_minitoy_train.json.gz")
    part = from_worker(read_in_worker("kineto", path, None))
    assert part.meta.facts(ShapeFacts) == [] and part.meta.facts(CounterFacts) == []
    assert part.events.filter(pl.col("cost_source") == "shapes").height == 3
    assert "spec_id" in part.devices.columns and "notes_at" not in part.devices.columns
    assert part.meta.warnings[0].startswith(f"{path.name}: device 2 (AMD Radeon Graphics")
    flops = part.events.filter(pl.col("cost_source") == "shapes")["flops"].sum()
    whole = tracelens.load(path)
    assert flops > 0 and whole.events.filter(pl.col("cost_source") == "shapes")[
        "flops"].sum() == flops
