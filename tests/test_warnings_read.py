"""Warnings a person reads (issue 25 C9): the FLOPs-coverage warning on real traces names
kernels briefly, gives reasons in the reader's own terms, never a share above 100%, says MFU is
a lower bound only where an MFU is shown, and stays a few lines long."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.conftest import SHARED, cli

TRACES = SHARED / "traces"
HLO_WORDS = re.compile(r"HLO|program id")


def _trace(rel: str) -> Path:
    path = TRACES / rel
    if not path.exists():
        pytest.skip(f"real trace {path} not present (shared/ is not beside this checkout)")
    return path


def _summary(rel: str, *extra: str) -> dict:
    r = cli("summarize", str(_trace(rel)), "--format", "json", "--quiet", *extra)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def _coverage(s: dict) -> str:
    (w,) = [w for w in s["warnings"] if w.startswith("FLOPs cover")]
    return w


def _percentages(text: str) -> list[float]:
    return [float(x) for x in re.findall(r"(\d+(?:\.\d+)?)%", text)]


@pytest.mark.parametrize("rel, extra", [
    ("rocprof/docs_snippets", ()),
    # kernels of two streams overlap: their summed time was 265.7% "of busy time"
    ("rocprof/docs_snippets", ("--category", "elementwise")),
])
def test_no_share_passes_100_percent(rel: str, extra: tuple[str, ...]) -> None:
    s = _summary(rel, *extra)
    w = _coverage(s)
    assert max(_percentages(w)) <= 100.0, w
    # the categories' shares are of compute-kernel time summed over streams: they add up to
    # the time without FLOPs (here every compute kernel: the documentation example's
    # addition, subtract and multiply kernels, elementwise by their names' words)
    assert "elementwise 100.0%" in w and "summed over streams" in w


@pytest.mark.parametrize("rel, reasons", [
    ("kineto/a100_nccl_2rank_rank0.json.gz",
     ["op not in the cost model", "no recorded input shapes (record_shapes off?)"]),
    ("kineto/mi300x_inference/vllm_decode_full_graph.json.gz",
     ["launched by a graph replay"]),
    ("rocprof/docs_snippets", ["no hardware counters recorded (FLOPs need rocprofv3 --pmc"]),
    # llama.cpp with rocprofv3 --pmc, but no FLOP counter among those collected
    ("rocprof/counters_gfx1151", ["the counters collected hold no FLOP counter"]),
])
def test_reasons_are_in_the_readers_terms(rel: str, reasons: list[str]) -> None:
    w = _coverage(_summary(rel))
    assert not HLO_WORDS.search(w), w
    for r in reasons:
        assert r in w, w


@pytest.mark.parametrize("rel", ["kineto/sampled_128rank_job", "rocprof/counters_gfx1151",
                                 "kineto/mi300x_inference/sglang_qwen3_8b_decode.json.gz"])
def test_a_few_short_lines(rel: str) -> None:
    """Whole C++ template names made this warning 4,906 characters (40 terminal lines)."""
    s = _summary(rel)
    w = _coverage(s)
    assert len(w) <= 700, w
    assert "(" not in re.sub(r"\([^()]*\)", "", w.split("Longest: ", 1)[1]), w  # no params
    m = re.search(r"and (\d+) more \(([\d,.]+) ms\)", w)
    assert m and int(m.group(1)) > 0, w
    # the kernels named and the "more" add up to every compute kernel without FLOPs
    named = len(re.findall(r" \((?:gemm|attention|elementwise|reduction|convolution|other),"
                           r" \d+\.\d%\)", w))
    assert named == 4


def test_lower_bound_only_where_an_mfu_is_shown() -> None:
    s = _summary("kineto/a100_nccl_2rank_rank0.json.gz")  # no FLOPs at all: MFU is "-"
    assert s["headline"]["mfu"] is None
    w = _coverage(s)
    assert "lower bound" not in w and "MFU is unknown" in w
    s = _summary("kineto/mi300x_inference/sglang_qwen3_8b_prefilldecode.json.gz")
    assert s["headline"]["mfu"] is not None
    assert "MFU is a lower bound" in _coverage(s)


def test_brief_names() -> None:
    from tracelens.core.names import brief_name
    assert brief_name(
        "void paged_attention_ll4mi_QKV_mfma16_kernel<0, __hip_bfloat16, __hip_bfloat16, "
        "(vllm::Fp8KVCacheDataType)0, 1, 128, 256, false, 4, 1, ck_tile::ComposedAttention<0u,"
        " false> >(__hip_bfloat16 const*, float, int const*)") \
        == "paged_attention_ll4mi_QKV_mfma16_kernel<…>"
    assert brief_name("Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT256x32x64_MI16x16x1_SN_"
                      "LDSB1_AFC1_AFEM1_AFEM1_ASEM1_CLR1_CADS0_WG64_4_1") \
        == "Cijk_Alik_Bljk_BBS…MT256x32x64_MI16x16x1"
    assert brief_name("void mul_mat_q<(ggml_type)14, 64, false>(char const*, int const*, "
                      "int const*, int const*, float*, float*, int, int)") \
        == "mul_mat_q<(ggml_type)14, 64, false>"
    assert brief_name("aten::convolution_backward") == "aten::convolution_backward"
    assert len(brief_name("x" * 500)) == 48
