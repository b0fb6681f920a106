"""Issue 25 B6 on traces our Kineto writer builds: a B200 MoE step of TRT-LLM/FlashInfer kernels
and a TensorFlow V100 step of Eigen kernels are classified (``other`` under 2% of busy; all of
it was ``other`` before), and a GEMM's dtype comes from its name where nothing better says it
(tracelens.core.name_dtype)."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

import tracelens
from tests.synth_helpers import writer_device, writer_events
from tests.conftest import cli
from tracelens.core import hardware
from tracelens.analyze.compute.roofline import device_specs, roofline, spec_frame
from tests.test_classify import B6_NAMES
from tracelens.core.name_dtype import dtype_from_name, name_dtypes
from tracelens_dev.writers.kineto import write as write_kineto

# (name, dtype or None): the conventions of tracelens/core/name_dtype.py
DTYPES = [
    ("bmm_MxE4m3_MxE2m1MxE4m3_Fp32_t128x256x256u2_s3_et128x256_m256x256x32_cga1x1x1_sm100f",
     "fp8"),  # MXFP4 x MXFP8 operands run on Blackwell's f8f6f4 path, at the fp8 rate
    ("bmm_Bfloat16_MxE2m1MxE4m3_Fp32_t128x8x256u2_s6_et128x8_sm100f", "fp8"),  # C is bf16
    ("bmm_E4m3_E4m3E4m3_Fp32_t128x128x128_s4_et128x128_sm100f", "fp8"),
    ("bmm_E2m1_E2m1E2m1_Fp32_t128x64x256_s6_et128x64_sm100a", "fp4"),
    ("bmm_Bfloat16_Bfloat16Bfloat16_Fp32_t128x128x64_sm100f", "bf16"),
    ("bmm_Bfloat16_E2m1Bfloat16_Fp32_t128x8x512_sm100f", None),  # 16-bit x fp4: no one peak
    ("GemmKernel_Bfloat16_E4m3_Fp32_tile128x128x256_epilogueTile128x128_sm100a", "fp8"),
    ("Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT64x32x256_MI16x16x1", "bf16"),
    ("Cijk_Ailk_Bljk_HHS_BH_MT128x128x32_MI32x32x8x1", "fp16"),
    ("Custom_Cijk_Alik_Bljk_F8BS_BH_shortname0", "fp8"),
    ("Cijk_Alik_Bljk_F8HS_BH_MT256x256x128", "fp8"),
    ("Cijk_Ailk_Bljk_F8NBS_BH_MT128x128x64", "fp8"),  # FNUZ fp8 (gfx942)
    ("Cijk_Ailk_Bljk_I8II_BH_MT128x128x64", "int8"),
    ("Cijk_Ailk_Bjlk_SB_Bias_AS_SAV_UserArgs_MT64x16x16", "fp32"),
    ("Cijk_Ailk_Bljk_S_MX_B_MT128x128x16", "tf32"),  # fp32 with xf32 math
    ("Cijk_SB_BiasB_HAS_ScaleAlphaVec_PostGSU16_VW4", None),  # a GSU helper: no operand types
    ("sm90_xmma_gemm_e4m3e4m3_bf16f32_f32_tn_n_tilesize128x128x128", "fp8"),
    ("sm80_xmma_gemm_bf16bf16_bf16f32_f32_nn_n_tilesize128x128x32", "bf16"),
    ("ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_64x4_tn", "bf16"),
    ("void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x64_16x6_nn_align4>(Params)", "tf32"),
    ("void sgemm_largek_lds64<true, true, 6, 3, 4, 5, 2, 66>(float*, float const*)", "fp32"),
    ("volta_h884gemm_64x64_ldg8_nn", "fp16"),
    ("nvjet_sm100_tst_64x16_64x16_2x4_2cta_h_bz_splitK_bias_TNT", None),  # says no dtype
    ("_matmul_ogs_NNT_bf16xbf16xmxfp4_16x128x256x1", None),  # bf16 x MXFP4: no one peak
]


@pytest.mark.parametrize(("name", "dtype"), DTYPES, ids=[d[0][:40] for d in DTYPES])
def test_dtype_from_name(name: str, dtype: str | None) -> None:
    got = pl.select(dtype_from_name(pl.lit(name))).item()
    assert got == dtype


def test_column_path_gives_each_name_its_own_answer() -> None:
    """``name_dtypes`` (each pattern on the names no earlier one matched) answers like the
    expression per name, on a column mixing every convention, repeats and a null."""
    names = [n for n, _ in DTYPES] * 2 + [None, DTYPES[3][0]]
    got = name_dtypes(pl.Series(names, dtype=pl.String))
    assert got.dtype == pl.Categorical
    assert got.cast(pl.String).to_list() == [
        None if n is None else pl.select(dtype_from_name(pl.lit(n))).item() for n in names]


def _write(tmp: Path, product: str, arch: str, names: list[str],
           op_args: dict | None = None, ops: list[str | None] | None = None) -> Path:
    """One rank, one device: ``names`` back to back, 100 µs each, three times over."""
    cus, memory = {"sm_100": (148, 180 << 30), "sm_70": (80, 16 << 30)}[arch]
    rows = []
    t = 0
    for _ in range(3):
        for i, name in enumerate(names):
            rows.append(("kernel", name, t, t + 100_000, (ops or [None] * len(names))[i]))
            t += 100_000
    ev = writer_events(rows)
    devices = pl.DataFrame([writer_device("nvidia", arch, product, cus, memory)])
    steps = pl.DataFrame({"rank": [0], "step": [0], "start_ns": [0], "end_ns": [t],
                          "source": ["x"]})
    trace = tracelens.Trace(events=ev, host_events=pl.DataFrame(), steps=steps,
                            devices=devices)
    return write_kineto(trace, tmp, op_args=op_args)[0]


B200 = [n for n in B6_NAMES if "Eigen" not in n and "tensorflow" not in n]
V100 = [n for n in B6_NAMES if "Eigen" in n or "tensorflow" in n]


@pytest.mark.parametrize(("product", "arch", "names"), [
    ("NVIDIA B200", "sm_100", B200), ("Tesla V100-SXM2-16GB", "sm_70", V100)],
    ids=["b200-moe", "v100-tensorflow"])
def test_other_under_two_percent_of_busy(tmp_path: Path, product: str, arch: str,
                                         names: list[str]) -> None:
    """On a real B200 PyTorch trace 48.2% of busy was other (the MoE GEMMs and routing), on a
    TensorFlow V100 XSpace 72.4% (Eigen); here every one of these kernels was other."""
    path = _write(tmp_path, product, arch, names)
    out = json.loads(cli("summarize", str(path), "--format", "json", "--quiet").stdout)
    (dev,) = out["devices"]
    other = sum(c["exclusive_ns"] for c in dev["categories"] if c["category"] == "other")
    assert dev["timeline"]["busy_ns"] == 3 * len(names) * 100_000
    assert other / dev["timeline"]["busy_ns"] < 0.02
    for name in names:  # explain names the rule of each family
        res = cli("explain", name)
        assert res.returncode == 0 and B6_NAMES[name][2] in res.stdout, res.stdout


def test_dtype_from_the_name_only_where_nothing_better_says_it(tmp_path: Path) -> None:
    """The fp8 MoE GEMM without an ATen op gets fp8 from its name (``dtype_source = name``) and
    its roofline row says fp8; a GEMM under ``aten::mm`` keeps the dtype of the op's input
    types (``shapes``) whatever its name says; an unknown name stays unknown."""
    fp8 = B200[2]
    assert "E4m3_E4m3E4m3" in fp8
    mm = {"Input Dims": [[1024, 4096], [4096, 8192]], "Input type": ["c10::Half"] * 2,
          "Concrete Inputs": ["", ""]}
    half_name = "Cijk_Alik_Bljk_BBS_BH_MT256x256x64"  # the name says bf16, the op fp16
    path = _write(tmp_path, "NVIDIA B200", "sm_100", [fp8, half_name, "nvjet_tst_64x8_h_bz"],
                  op_args={"aten::mm": mm}, ops=[None, "aten::mm", None])
    ev = tracelens.load(path).events
    got = {r["name"]: (r["dtype"], r["dtype_source"]) for r in
           ev.select("name", "dtype", "dtype_source").unique().iter_rows(named=True)}
    assert got == {fp8: ("fp8", "name"), half_name: ("fp16", "shapes"),
                   "nvjet_tst_64x8_h_bz": (None, None)}
    out = json.loads(cli("summarize", str(path), "--format", "json", "--quiet").stdout)
    rows = {r["kernel"]: r["dtype"] for r in out["roofline"]}
    assert rows[fp8] == "fp8" and rows[half_name] == "fp16"
    # the fp8 GEMM's roofline row takes the B200's fp8 peak, not none
    trace = tracelens.load(path)
    specs = spec_frame(device_specs(trace.devices))
    peaks = dict(roofline(trace.events, specs).select("kernel", "peak_tflops").iter_rows())
    b200 = hardware.SPECS["b200"]
    assert peaks[fp8] == b200.peak("fp8") and peaks[half_name] == b200.peak("fp16")
    assert peaks["nvjet_tst_64x8_h_bz"] is None


REAL = [("xprof/mi300x_jax08_gemm.xplane.pb", {"hlo"}),  # every dtype from the HLO
        ("kineto/mi300x_inference/sglang_qwen3_8b_decode.json.gz", {"name"}),  # Cijk_*_BBS_
        ("kineto/sampled_128rank_job", {"shapes"})]  # aten::mm input types, names not read


@pytest.mark.parametrize(("path", "sources"), REAL, ids=[r[0].split("/")[-1] for r in REAL])
def test_dtype_sources_on_real_traces(path: str, sources: set[str]) -> None:
    from tests.conftest import SHARED
    full = SHARED / "traces" / path
    if not full.exists():
        pytest.skip(f"{full} not present")
    gemm = tracelens.load(full).events.filter(pl.col("category") == "gemm",
                                              pl.col("dtype").is_not_null())
    assert gemm.height and set(gemm["dtype_source"]) == sources
    assert (gemm["dtype_source"] == "name").sum() == 0 or set(gemm["dtype"]) == {"bf16"}
