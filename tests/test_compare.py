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
from tests.conftest import ROOT, SAMPLES
from tracelens.cli import main

MI300X = SAMPLES / "mi300x_8gpu_llama_step.xplane.pb"
MI355X = SAMPLES / "mi355x_8gpu_llama_fsdp.xplane.pb"
GEMM_A = "Cijk_Ailk_Bljk_BBS_BH_MT256x256x64_MI16x16x16x1_SN_1LDSB0.kd"
GEMM_B = "Cijk_Alik_Bljk_BBS_BH_MT128x128x64_MI16x16x16x1_SN_1LDSB0.kd"
FMHA_BWD = "void ck_tile::kentry<256, 1, ck_tile::FmhaBwdDQDKDVKernel<ck_tile::Traits>>"


def run_in_process(args: list[str], seed: str) -> bytes:
    """``tracelens ARGS`` in a fresh interpreter with PYTHONHASHSEED=seed: its stdout."""
    env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(ROOT)}
    res = subprocess.run([sys.executable, "-c", "from tracelens.cli import main; main()", *args],
                         capture_output=True, env=env, cwd=ROOT, timeout=600)
    assert res.returncode == 0, res.stderr.decode()
    return res.stdout


_RUN_EACH = """
import json, sys
from tracelens.cli import main
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
    from tracelens.analyze.compare import match_kernels
    from tracelens.analyze.scaling import profile
    from tracelens.loader import load

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
    from tracelens.analyze.compare import match_kernels
    from tracelens.analyze.scaling import profile
    from tracelens.loader import load

    a, b = profile(load([MI300X])).kernels, profile(load([MI355X])).kernels
    ref = match_kernels(a, b)
    for seed in (1, 2):
        got = match_kernels(a.sample(fraction=1.0, shuffle=True, seed=seed),
                            b.sample(fraction=1.0, shuffle=True, seed=seed + 10))
        for x, y in zip(ref, got):
            assert x.equals(y)
