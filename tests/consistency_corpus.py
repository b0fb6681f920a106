"""The traces the consistency gate runs on (tests/test_consistency.py): every bundled sample and
every real trace in ``../shared/traces`` (skipped where absent), and the contradictions the gate
finds on each, as ``(check, subject, claimed_ns, bound_ns)`` rows (``python -m
tests.consistency_corpus`` prints them)."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "traces"

SAMPLES = ["h100_8gpu_moe_ddp.xplane.pb", "mi300x_8gpu_llama_step.xplane.pb",
           "mi355x_8gpu_llama_fsdp.xplane.pb", "mi355x_2x8gpu_straggler",
           "hlo/planted.xplane.pb", "hlo/comm_types.xplane.pb", "tpu/eager_block.xplane.pb",
           "tpu/flash.xplane.pb", "tpu/multi.xplane.pb", "tpu/remat.xplane.pb",
           "tpu/sync.xplane.pb"]
REAL = ["xprof/mi300x_jax08_gemm.xplane.pb", "xprof/mi300x_jax08_attention.xplane.pb",
        "xprof/mi300x_jax08_conv_8gpu.xplane.pb", "xprof/cpu_4dev_dp_allreduce.xplane.pb",
        "rocprof/mi350x_908_results.json.gz", "kineto/mi250_rocm62_minitoy_train.json.gz",
        "kineto/a100_nccl_2rank_rank0.json.gz", "kineto/sampled_128rank_job",
        "kineto/mi300x_inference/sglang_qwen3_8b_decode.json.gz",
        "kineto/mi300x_inference/sglang_qwen3_8b_prefilldecode.json.gz",
        "kineto/mi300x_inference/vllm_decode_full_graph.json.gz",
        "kineto/mi300x_inference/vllm_prefilldecode_piecewise_graph.json.gz",
        "kineto/mi300x_inference/xdit_flux1_aiter_sage_rank0.json.gz",
        "kineto/mi300x_inference/normalization_layers_2gpu.json.gz",
        "rocprof/counters_gfx1151", "rocprof/docs_snippets"]


def corpus() -> list[tuple[str, Path]]:
    """(name, path) of every trace present: samples as ``sample_traces/...``, shared ones as
    ``shared/...``."""
    out = [(f"sample_traces/{s}", ROOT / "sample_traces" / s) for s in SAMPLES]
    out += [(f"shared/{r}", SHARED / r) for r in REAL if (SHARED / r).exists()]
    return out


Row = tuple[str, str, str, int, int]  # (command, check, subject, claimed_ns, bound_ns)


def contradictions(path: Path) -> tuple[list[Row], list[str]]:
    """What the gate finds on ``path`` in ``summarize`` and ``critical-path`` (in process,
    their defaults), and the facts in words."""
    from tracelens.api.analysis import TraceAnalysis
    from tracelens.core.errors import TraceInputError

    a = TraceAnalysis(str(path))
    rows: list[Row] = []
    words: list[str] = []
    s = a.summarize()
    for v in s.consistency.violations if s.consistency is not None else ():
        rows.append(("summarize", v.check, v.subject, v.claimed_ns, v.bound_ns))
        words.append(f"summarize: {v.subject} ({v.check}): {v.fact}")
    try:
        res = a.critical_path(top=10, activities="longest")  # as the command's table
    except TraceInputError:  # no critical path (no device activity in a window): nothing to check
        return rows, words
    for v in res.consistency.violations:
        rows.append(("critical-path", v.check, v.subject, v.claimed_ns, v.bound_ns))
        words.append(f"critical-path: {v.subject} ({v.check}): {v.fact}")
    return rows, words


if __name__ == "__main__":
    names = sys.argv[1:]
    for name, path in corpus():
        if names and not any(n in name for n in names):
            continue
        rows, words = contradictions(path)
        print(f"== {name}: {len(rows)}", flush=True)
        for r in rows:
            print("   ", r)
        for w in words:
            print("     ", w)
