"""compare: the same inputs give byte-identical JSON in any process, a run compared with itself
shows no change, and kernels are matched one to one, only within a category, in the documented
order (HLO op and program, then normalized name, then unmatched)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner

from tracelens_dev.writers.xspace import Activity, build_xspace
from tests.synth_helpers import writer_device, writer_events
from tests.conftest import ROOT, SAMPLES
from tracelens.cli.commands import main
from tracelens.core.model import STEP_SCHEMA

MI300X = SAMPLES / "mi300x_8gpu_llama_step.xplane.pb"
MI355X = SAMPLES / "mi355x_8gpu_llama_fsdp.xplane.pb"
GEMM_A = "Cijk_Ailk_Bljk_BBS_BH_MT256x256x64_MI16x16x16x1_SN_1LDSB0.kd"
GEMM_B = "Cijk_Alik_Bljk_BBS_BH_MT128x128x64_MI16x16x16x1_SN_1LDSB0.kd"
FMHA_BWD = "void ck_tile::kentry<256, 1, ck_tile::FmhaBwdDQDKDVKernel<ck_tile::Traits>>"


def run_in_process(args: list[str], seed: str) -> bytes:
    """``tracelens ARGS`` in a fresh interpreter with PYTHONHASHSEED=seed: its stdout."""
    env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(ROOT)}
    prog = "from tracelens.cli.commands import main; main()"
    res = subprocess.run([sys.executable, "-c", prog, *args],
                         capture_output=True, env=env, cwd=ROOT, timeout=600)
    assert res.returncode == 0, res.stderr.decode()
    return res.stdout


_RUN_EACH = """
import json, sys
from tracelens.cli.commands import main
for args in json.loads(sys.argv[1]):
    main.main(args, standalone_mode=False)
    sys.stdout.write("\\0")
    sys.stdout.flush()
"""


def run_each_in_process(commands: list[list[str]], seed: str) -> list[bytes]:
    """Several ``tracelens ARGS`` one after the other in one fresh interpreter with
    PYTHONHASHSEED=seed (one start instead of one per command): each one's stdout."""
    env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(ROOT)}
    res = subprocess.run([sys.executable, "-c", _RUN_EACH, json.dumps(commands)],
                         capture_output=True, env=env, cwd=ROOT, timeout=600)
    assert res.returncode == 0, res.stderr.decode()
    *outs, rest = res.stdout.split(b"\0")
    assert rest == b"" and len(outs) == len(commands), res.stdout[-2000:]
    return outs


def compare_json(base: Path, new: Path, *extra: str) -> dict:
    res = CliRunner().invoke(main, ["compare", str(base), str(new), "--format", "json", *extra])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def one_step(path: Path, kernels: list[tuple[str, int, str | None]]) -> Path:
    """One device, one step: ``(name, duration, hlo_op or None)`` back to back on a stream."""
    acts, t = [], 1_000
    for name, dur, op in kernels:
        acts.append(Activity(0, 1, name, t, dur, {"hlo_op": op} if op else {}))
        t += dur + 10
    path.write_bytes(build_xspace(acts, steps=[(0, 0, t + 100)]))
    return path


def test_compare_json_is_identical_across_processes_and_hash_seeds() -> None:
    if not (MI300X.exists() and MI355X.exists()):
        pytest.skip("sample traces not generated")
    args = ["compare", str(MI300X), str(MI355X), "--format", "json", "--top", "1000"]
    first = run_in_process(args, "1")
    assert first == run_in_process(args, "2")
    rep = json.loads(first)
    # every list in a total order
    assert [abs(k["delta_ns"]) for k in rep["kernels"]] == sorted(
        (abs(k["delta_ns"]) for k in rep["kernels"]), reverse=True)
    assert [(-abs(c["delta_ns"]), c["component"]) for c in rep["components"]] == sorted(
        (-abs(c["delta_ns"]), c["component"]) for c in rep["components"])


def test_compare_with_itself_reports_no_change() -> None:
    if not MI300X.exists():
        pytest.skip("sample traces not generated")
    rep = compare_json(MI300X, MI300X)
    assert rep["delta_ns"] == 0 and rep["delta_pct"] == 0
    assert all(c["delta_ns"] == 0 for c in rep["components"])
    assert rep["kernels"] == [] and rep["only_base"] == [] and rep["only_new"] == []
    assert rep["matching"]["changed"] == 0 and rep["matching"]["by_op"] > 0
    assert rep["verdict"] == [f"step time did not change ({rep['base']['step_ns'] / 1e6:.3f} ms "
                              "per step)"]


def test_samples_pair_kernels_only_within_their_category() -> None:
    """MI300X vs MI355X: the attention backward op is matched with itself (its kernels are
    named per architecture), never with a GEMM, and nothing is counted twice."""
    if not (MI300X.exists() and MI355X.exists()):
        pytest.skip("sample traces not generated")
    from tracelens.analyze.runs.compare import match_kernels
    from tracelens.analyze.runs.scaling import profile
    from tracelens.loading.loader import load

    a, b = profile(load([MI300X])), profile(load([MI355X]))
    matched, only_a, only_b = match_kernels(a.kernels, b.kernels)
    cat = {r["name"]: r["category"] for k in (a.kernels, b.kernels)
           for r in k.select("name", "category").iter_rows(named=True)}
    for r in matched.iter_rows(named=True):
        assert cat[r["base_name"]] == cat[r["new_name"]] == r["category"], r
    bwd = matched.filter(pl.col("base_name").str.contains("FmhaBwd"))
    assert bwd.height == 4 and set(bwd["category"]) == {"attention"}
    assert bwd["new_name"].str.contains("FmhaBwd").all() and (bwd["base_kernels"] == 3).all()
    # one to one: every kernel of each side is in exactly one row
    for side, df, only in (("base", a.kernels, only_a), ("new", b.kernels, only_b)):
        assert matched[f"{side}_ns_per_step"].sum() + only[f"{side}_ns_per_step"].sum() == \
            pytest.approx(df["ns_per_step"].sum(), rel=1e-12)
        assert matched[f"{side}_count_per_step"].sum() + only[
            f"{side}_count_per_step"].sum() == pytest.approx(df["count_per_step"].sum())


def test_an_op_number_never_pairs_a_gemm_with_attention(tmp_path: Path) -> None:
    """Ops renumbered and kernels renamed: the op names line up a GEMM with attention, so
    nothing is paired (matching stays within a category; op names are compared whole)."""
    base = one_step(tmp_path / "a.xplane.pb", [(GEMM_A, 300_000, "custom-call.5"),
                                               (FMHA_BWD, 900_000, "custom-call.7")])
    new = one_step(tmp_path / "b.xplane.pb", [(GEMM_B, 320_000, "custom-call.7"),
                                              ("flash_attn_bwd_kernel", 3_000_000,
                                               "custom-call.5")])
    rep = compare_json(base, new)
    assert rep["kernels"] == []
    assert sorted(k["name"] for k in rep["only_base"]) == sorted([GEMM_A, FMHA_BWD])
    assert sorted(k["name"] for k in rep["only_new"]) == sorted([GEMM_B,
                                                                 "flash_attn_bwd_kernel"])


def test_renumbered_ops_do_not_pair_a_gemm_with_attention(tmp_path: Path) -> None:
    """The GEMM's op number is the other side's attention op: same op name, other category,
    so neither pairs through the op; the GEMM pairs by its name, the attention stays alone."""
    base = one_step(tmp_path / "a.xplane.pb", [(GEMM_A, 300_000, "custom-call.5"),
                                               (FMHA_BWD, 900_000, "custom-call.7")])
    new = one_step(tmp_path / "b.xplane.pb", [(GEMM_A, 320_000, "custom-call.7"),
                                              ("flash_attn_bwd_kernel", 3_000_000,
                                               "custom-call.5")])
    rep = compare_json(base, new)
    assert [(k["category"], k["base_name"], k["name"], k["delta_ns"])
            for k in rep["kernels"]] == [("gemm", GEMM_A, GEMM_A, 20_000)]
    assert rep["kernels"][0]["match"] == "name"
    assert [k["name"] for k in rep["only_base"]] == [FMHA_BWD]
    assert [k["name"] for k in rep["only_new"]] == ["flash_attn_bwd_kernel"]


@pytest.mark.parametrize("with_ops", [True, False])
def test_numbered_fusions_stay_distinct(tmp_path: Path, with_ops: bool) -> None:
    """``input_transpose_fusion`` and ``input_transpose_fusion_1`` are different fusions, with
    or without HLO ops (rocprofv3 traces have none)."""
    def ops(*names: str) -> list[str | None]:
        return list(names) if with_ops else [None] * len(names)
    o = ops("input_transpose_fusion", "input_transpose_fusion.1")
    base = one_step(tmp_path / "a.xplane.pb", [("input_transpose_fusion.kd", 50_000, o[0]),
                                               ("input_transpose_fusion_1.kd", 70_000, o[1])])
    new = one_step(tmp_path / "b.xplane.pb", [("input_transpose_fusion.kd", 50_000, o[0]),
                                              ("input_transpose_fusion_1.kd", 95_000, o[1])])
    rep = compare_json(base, new)
    assert [(k["name"], k["base_ns"], k["new_ns"]) for k in rep["kernels"]] == [
        ("input_transpose_fusion_1.kd", 70_000, 95_000)]
    assert rep["kernels"][0]["match"] == ("op" if with_ops else "name")
    assert rep["matching"]["by_op" if with_ops else "by_name"] == 2


def test_a_kernel_name_under_renumbered_ops_pairs_once_in_total(tmp_path: Path) -> None:
    """The same GEMM kernel under two ops that were renumbered: one row per side, summed."""
    base = one_step(tmp_path / "a.xplane.pb", [(GEMM_B, 100_000, "custom-call.1"),
                                               (GEMM_B, 100_000, "custom-call.2")])
    new = one_step(tmp_path / "b.xplane.pb", [(GEMM_B, 100_000, "custom-call.3"),
                                              (GEMM_B, 130_000, "custom-call.4")])
    rep = compare_json(base, new)
    assert [(k["name"], k["base_ns"], k["new_ns"], k["base_count"], k["new_count"])
            for k in rep["kernels"]] == [(GEMM_B, 200_000, 230_000, 2, 2)]
    assert rep["kernels"][0]["match"] == "name" and rep["kernels"][0]["op"] is None
    assert not rep["only_base"] and not rep["only_new"]


def test_matching_does_not_depend_on_row_order(tmp_path: Path) -> None:
    if not (MI300X.exists() and MI355X.exists()):
        pytest.skip("sample traces not generated")
    from tracelens.analyze.runs.compare import match_kernels
    from tracelens.analyze.runs.scaling import profile
    from tracelens.loading.loader import load

    a, b = profile(load([MI300X])).kernels, profile(load([MI355X])).kernels
    ref = match_kernels(a, b)
    for seed in (1, 2):
        got = match_kernels(a.sample(fraction=1.0, shuffle=True, seed=seed),
                            b.sample(fraction=1.0, shuffle=True, seed=seed + 10))
        for x, y in zip(ref, got):
            assert x.equals(y)


# --- what was compared (issue 25 C10): hardware, mismatches, warnings, nothing to compare ---

KINETO = ROOT.parent / "shared" / "traces" / "kineto"
A100 = KINETO / "a100_nccl_2rank_rank0.json.gz"  # 1× NVIDIA A100 40GB (CUDA)
MI300X_NORM = KINETO / "mi300x_inference" / "normalization_layers_2gpu.json.gz"  # 1× MI300X
STRAGGLER = SAMPLES / "mi355x_2x8gpu_straggler"  # 2 host files, 16× MI355X


def _need(*paths: Path) -> None:
    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        pytest.skip(f"trace not here: {', '.join(missing)}")


def _reader_warnings(path: Path) -> list[str]:
    """The run's reader warnings, without the facts the tool corrects (notes, which
    ``summarize`` says and a comparison does not repeat)."""
    import tracelens
    from tracelens.core.notices import NOTE_CODES
    return [n.text for n in tracelens.load(path).meta.notices if n.code not in NOTE_CODES]


def _kineto_side(path: Path, kernels: list[tuple[int, int]]) -> Path:
    """One A100 (rank 0, device 0) with ``kernels`` as (start, end) ns on a stream, and one
    CPU op: a Kineto file our writer builds, with the CPU op added as the profiler records
    it (the writer writes device activity only)."""
    import orjson

    import tracelens
    from tracelens_dev.writers.kineto import write as write_kineto

    ev = writer_events([("kernel", f"elementwise_kernel_{i}", s, e)
                        for i, (s, e) in enumerate(kernels)],
                       ("kind", "name", "start_ns", "end_ns")).cast(
        {"kind": pl.String, "name": pl.String, "start_ns": pl.Int64, "end_ns": pl.Int64})
    devices = pl.DataFrame([writer_device("nvidia", "sm_80", "NVIDIA A100 40GB", 108,
                                          40 << 30)])
    trace = tracelens.Trace(events=ev, host_events=pl.DataFrame(),
                            steps=pl.DataFrame(schema=STEP_SCHEMA),
                            devices=devices)
    out = write_kineto(trace, path)[0]
    doc = orjson.loads(out.read_bytes())
    doc["traceEvents"].append({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1000,
                               "tid": 1, "ts": 1.0, "dur": 5.0, "args": {}})
    out.write_bytes(orjson.dumps(doc))
    return out


def test_compare_shows_each_sides_hardware_and_warns_across_vendors() -> None:
    """A100 (CUDA) against MI300X (ROCm): both sides' hardware, as summarize's headline
    counts it, and one warning that the vendors differ; every reader warning of each side,
    prefixed with its side, in JSON, the terminal table and Markdown."""
    _need(A100, MI300X_NORM)
    rep = compare_json(A100, MI300X_NORM)
    assert rep["base"]["hardware"] == [{"product": "NVIDIA A100 40GB", "arch": "sm_80",
                                        "vendor": "nvidia", "count": 1}]
    assert rep["new"]["hardware"] == [{"product": "AMD Instinct MI300X", "arch": "gfx942",
                                       "vendor": "amd", "count": 1}]
    summary = CliRunner().invoke(main, ["summarize", str(A100), "--format", "json"])
    assert json.loads(summary.stdout)["headline"]["hardware"] == rep["base"]["hardware"]
    mismatch = [w for w in rep["warnings"] if not w.startswith(("base: ", "new: "))]
    # the vendors, then what else differs: the programs (kernel and ATen op mix: a training
    # step's NCCL/cuDNN kernels against normalization layers), and the A100 file's one step
    assert "different vendors" in mismatch[0]
    assert "1× NVIDIA A100 40GB" in mismatch[0] and "1× AMD Instinct MI300X" in mismatch[0]
    assert [w.split(":")[0] for w in mismatch[1:]] == [
        "the runs ran different kernels", "the runs ran different ops",
        "noise floor unknown (one step in new (1 step)"]
    base_w, new_w = _reader_warnings(A100), _reader_warnings(MI300X_NORM)
    assert base_w  # the A100 trace has no input shapes: its reader says so
    assert rep["warnings"] == mismatch + [f"base: {w}" for w in base_w] + [
        f"new: {w}" for w in new_w]
    for fmt in ("table", "markdown"):
        res = CliRunner().invoke(main, ["compare", str(A100), str(MI300X_NORM), "--format",
                                        fmt], terminal_width=400)
        assert res.exit_code == 0, res.output
        flat = " ".join(res.stdout.split())
        assert "1× NVIDIA A100 40GB" in flat and "1× AMD Instinct MI300X" in flat
        # the warnings on stderr, each once; stdout holds the result alone (issue 47)
        assert "different vendors" not in flat and "warning" not in flat.lower()
        said = res.stderr.splitlines()
        assert said == [f"warning: {w}" for w in rep["warnings"]]


def test_compare_warns_on_the_same_product_in_other_numbers(tmp_path: Path) -> None:
    """8× MI300X against 1× MI300X: the same hardware, a different device count."""
    _need(MI300X, MI300X_NORM)
    rep = compare_json(MI300X, MI300X_NORM)
    assert [h["count"] for h in (*rep["base"]["hardware"], *rep["new"]["hardware"])] == [8, 1]
    mismatch = [w for w in rep["warnings"] if not w.startswith(("base: ", "new: "))]
    assert "different device counts (base: 8, new: 1" in mismatch[0]
    assert not any("hardware" in w for w in mismatch)
    html = tmp_path / "c.html"
    res = CliRunner().invoke(main, ["compare", str(MI300X), str(MI300X_NORM), "--html",
                                    str(html), "--format", "json"])
    assert res.exit_code == 0, res.output
    page = html.read_text()
    assert "Hardware: base 8× AMD Instinct MI300X; new 1× AMD Instinct MI300X" in page
    assert "different device counts" in page


def test_compare_with_itself_warns_of_no_mismatch() -> None:
    _need(MI300X)
    rep = compare_json(MI300X, MI300X)
    own = _reader_warnings(MI300X)
    assert rep["warnings"] == [f"base: {w}" for w in own] + [f"new: {w}" for w in own]


def test_a_run_of_several_host_files_says_a_repeated_warning_once() -> None:
    """The 2-host straggler sample: each host's reader notes its bandwidth stat; summarize
    says it once, naming both files (on the engine, per host), and compare not at all."""
    _need(MI300X, STRAGGLER)
    rep = compare_json(MI300X, STRAGGLER)
    summary = CliRunner().invoke(main, ["summarize", str(STRAGGLER), "--format", "json"])
    folded = [w for w in json.loads(summary.stdout)["notes"] if "memory_bandwidth" in w]
    assert len(folded) == 1 and "the same on 2 hosts/files" in folded[0]
    # a fact the tool corrects is summarize's note, said once there, not a comparison's
    # warning (issue 47: it was said for each side of every AMD comparison)
    assert not [w for w in rep["warnings"] if "memory_bandwidth" in w]
    assert rep["new"]["hardware"][0]["count"] == 16
    assert any("different hardware" in w for w in rep["warnings"])


@pytest.mark.parametrize("kernels,problem", [
    ([], "no device with activity (0 analysable devices"),  # CPU events only
    ([(1_000, 1_000), (50_000, 50_000)], "no device time"),  # activity that lasts 0 ns
])
def test_nothing_to_compare_is_refused_naming_the_file(tmp_path: Path, kernels: list,
                                                       problem: str) -> None:
    """Once "step time did not change (0.000 ms)": now exit 2, one line naming the side."""
    empty = _kineto_side(tmp_path / "empty", kernels)
    real = _kineto_side(tmp_path / "real", [(1_000, 400_000), (500_000, 900_000)])
    for args in ([empty, real], [real, empty], [empty, empty]):
        res = CliRunner().invoke(main, ["compare", *map(str, args), "--format", "json"])
        assert res.exit_code == 2, res.output
        assert res.stdout == ""
        assert res.stderr == f"error: {empty}: nothing to compare: {problem}" + \
            res.stderr.split(problem, 1)[1] and res.stderr.count("\n") == 1
    assert compare_json(real, real)["delta_ns"] == 0  # the other side alone compares


def test_filters_that_leave_nothing_are_said(tmp_path: Path) -> None:
    real = _kineto_side(tmp_path / "real", [(1_000, 400_000), (500_000, 900_000)])
    res = CliRunner().invoke(main, ["compare", str(real), str(real), "--category", "gemm"])
    assert res.exit_code == 2
    assert res.stderr.strip() == (f"error: {real}: nothing to compare: no device with activity "
                                  "(0 analysable devices: no kernel, copy or collective) after "
                                  "the filters (category: gemm)")


def test_quiet_drops_the_warnings_table_not_the_json_list() -> None:
    """--quiet means no warnings on the terminal (as in summarize); the JSON keeps them."""
    _need(A100, MI300X_NORM)
    args = ["compare", str(A100), str(MI300X_NORM), "--quiet"]
    table = CliRunner().invoke(main, args, terminal_width=400)
    assert table.exit_code == 0 and "1× NVIDIA A100 40GB" in table.stdout
    assert "Warnings" not in table.stdout and "different vendors" not in table.stdout
    assert compare_json(A100, MI300X_NORM, "--quiet")["warnings"]
