"""Golden outputs: every JSON/CSV command on every sample and shared trace, as fixtures.

A refactoring that must not change a single output byte (issue 14) is checked against these:
``tests/test_golden.py`` reruns each case and requires the same bytes. Run this script only
when an output is *meant* to change, and say why in the commit::

    PYTHONPATH=. python tests/golden/make_golden.py            # every case
    PYTHONPATH=. python tests/golden/make_golden.py summarize-gemm08 ...   # some

Each case runs in-process through click's CliRunner with ``--quiet``. Absolute paths are
written relative: the repository root becomes ``""`` (so ``sample_traces/...``), the shared
folder beside the checkout becomes ``../shared``, and an export's temporary output file
becomes ``<out>``. Outputs longer than :data:`MAX_TEXT` characters are stored as their
sha256 and length instead of the text (the fixture says so in ``"stored"``), to keep the
committed fixtures small.
"""

from __future__ import annotations

import hashlib
import json
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[2]
SHARED = ROOT.parent / "shared"
GOLDEN = Path(__file__).resolve().parent
MAX_TEXT = 200_000  # characters of output stored as text; longer ones as a sha256

S = "sample_traces/"
T = "../shared/traces/"
SAMPLES = {  # name -> path relative to the repo
    "h100": S + "h100_8gpu_moe_ddp.xplane.pb",
    "mi300x": S + "mi300x_8gpu_llama_step.xplane.pb",
    "mi355x": S + "mi355x_8gpu_llama_fsdp.xplane.pb",
    "straggler": S + "mi355x_2x8gpu_straggler",
    "planted": S + "hlo/planted.xplane.pb",
}
SHARED_TRACES = {
    "gemm08": T + "xprof/mi300x_jax08_gemm.xplane.pb",
    "attention08": T + "xprof/mi300x_jax08_attention.xplane.pb",
    "conv08": T + "xprof/mi300x_jax08_conv_8gpu.xplane.pb",
    "cpu4dev": T + "xprof/cpu_4dev_dp_allreduce.xplane.pb",
    "mi350x": T + "rocprof/mi350x_908_results.json.gz",
    "kineto-a100": T + "kineto/a100_nccl_2rank_rank0.json.gz",
    "kineto-mi250": T + "kineto/mi250_rocm62_minitoy_train.json.gz",
    "kineto-norm": T + "kineto/mi300x_inference/normalization_layers_2gpu.json.gz",
    "kineto-sglang-decode": T + "kineto/mi300x_inference/sglang_qwen3_8b_decode.json.gz",
    "kineto-sglang-prefill": T + "kineto/mi300x_inference/sglang_qwen3_8b_prefilldecode.json.gz",
    "kineto-vllm-decode": T + "kineto/mi300x_inference/vllm_decode_full_graph.json.gz",
    "kineto-vllm-prefill": T + "kineto/mi300x_inference/"
                                "vllm_prefilldecode_piecewise_graph.json.gz",
    "kineto-128rank": T + "kineto/sampled_128rank_job",
    "kineto-xdit": T + "kineto/mi300x_inference/xdit_flux1_aiter_sage_rank0.json.gz",  # 2.6 s
    "rocprof-csv-snippets": T + "rocprof/docs_snippets",
    "rocprof-counters": T + "rocprof/counters_gfx1151",  # two processes, one host
}
# Left out: commands slower than ~5 s, to keep the test suite within minutes (none today:
# the slowest shared trace, kineto-xdit, takes 2.6 s per command on a shared 2-core box).
SLOW: dict[str, str] = {}
HAS_HLO = {"h100", "mi300x", "mi355x", "straggler", "planted", "gemm08", "attention08",
           "conv08", "cpu4dev"}  # traces that carry HLO modules (XSpace)


def _scaling_pair(fmt: str) -> Callable[[Path], None]:
    def make(root: Path) -> None:
        from tests.synth_helpers import write_scaling_pair

        write_scaling_pair(root, fmt)
    return make


GENERATED = {  # name -> writes a case's inputs under a folder that its argv calls ``<gen>``
    # the planted 8 -> 64 GPU pair (issue 45): +3.0 ms exposed all-reduce, +1.5 ms waiting
    "scaling-pair": _scaling_pair("xspace"),
}


@dataclass(frozen=True)
class Case:
    """One command line; paths in ``argv`` are relative (repo root, or ``../shared``), or
    under ``<gen>``: the inputs :data:`GENERATED` ``[generate]`` writes from planted
    constants (a truth that a test also checks), in a temporary folder."""

    name: str
    argv: tuple[str, ...]
    export: bool = False  # writes ``<out>`` (a CSV), compared instead of stdout
    generate: str | None = None

    def shared(self) -> bool:
        return any(a.startswith("../shared/") for a in self.argv)


def cases() -> list[Case]:
    out: list[Case] = []
    for name, path in {**SAMPLES, **SHARED_TRACES}.items():
        if name in SLOW:
            continue
        out.append(Case(f"summarize-{name}", ("summarize", path, "--format", "json")))
        out.append(Case(f"collectives-{name}", ("collectives", path, "--format", "json")))
        if name in HAS_HLO:
            out.append(Case(f"hlo-{name}", ("hlo", path, "--format", "json")))
        out.append(Case(f"export-kernels-{name}",
                        ("export", path, "--table", "kernels", "-o", "<out>"), export=True))
    out.append(Case("hlo-dump-loop-step", ("hlo", S + "hlo/module_0024.loop_step."
                                           "after_optimizations.txt", "--format", "json")))
    out.append(Case("compare-mi300x-mi355x",
                    ("compare", SAMPLES["mi300x"], SAMPLES["mi355x"], "--format", "json")))
    out.append(Case("scaling-mi300x-straggler",
                    ("scaling", SAMPLES["mi300x"], SAMPLES["straggler"], "--format", "json")))
    # (the Kineto form of the pair, 72 rank files, takes 45 s here: its truth test covers it)
    out.append(Case("scaling-planted-8-to-64", ("scaling", "<gen>/n8", "<gen>/n64", "--format",
                                                "json"), generate="scaling-pair"))
    ranks = SHARED_TRACES["kineto-128rank"]  # two ranks of one job: within noise
    out.append(Case("compare-kineto-128rank-ranks", ("compare", ranks + "/rank-0.json.gz",
                                                     ranks + "/rank-1.json.gz", "--format",
                                                     "json")))
    out.append(Case("compare-planted-8-to-64", ("compare", "<gen>/n8", "<gen>/n64", "--format",
                                                "json"), generate="scaling-pair"))
    return out


def absolute(arg: str) -> str:
    if arg.startswith("../shared/"):
        return str(SHARED / arg[len("../shared/"):])
    if arg.startswith(("sample_traces/", "tests/")):
        return str(ROOT / arg)
    return arg


def relative(text: str, out_file: str | None, gen: str | None = None) -> str:
    """The output with absolute paths written as they are in the case's argv."""
    if out_file:
        text = text.replace(out_file, "<out>")
    if gen:
        text = text.replace(gen, "<gen>")
    text = text.replace(str(SHARED) + "/", "../shared/")
    return text.replace(str(ROOT) + "/", "")


def run(case: Case) -> dict:
    """Run one case in-process; its exit code and normalized output (stdout, or the file)."""
    from click.testing import CliRunner

    from tracelens.cli.commands import main

    with tempfile.TemporaryDirectory() as tmp:
        out_file = str(Path(tmp) / "out.csv")
        gen = None
        if case.generate:
            gen = str(Path(tmp) / "gen")
            GENERATED[case.generate](Path(gen))
        argv = [out_file if a == "<out>" else gen + a[len("<gen>"):]
                if gen and a.startswith("<gen>/") else absolute(a)
                for a in case.argv] + ["--quiet"]
        res = CliRunner().invoke(main, argv)
        if res.exception is not None and not isinstance(res.exception, SystemExit):
            raise RuntimeError(f"{case.name}: {res.exception!r}") from res.exception
        text = Path(out_file).read_text() if case.export and res.exit_code == 0 else res.stdout
        return {"exit_code": res.exit_code, "output": relative(text, out_file, gen)}


def fixture(case: Case, result: dict) -> dict:
    """What is committed for one case: the text, or its sha256 when it is long."""
    text = result["output"]
    body: dict = {"case": case.name, "argv": list(case.argv), "exit_code": result["exit_code"]}
    if len(text) > MAX_TEXT:
        body.update(stored="sha256 (output too long to commit as text)", chars=len(text),
                    sha256=hashlib.sha256(text.encode()).hexdigest())
    else:
        body.update(stored="text", output=text)
    return body


def path_of(case: Case) -> Path:
    return GOLDEN / f"{case.name}.json"


def write(case: Case) -> None:
    body = fixture(case, run(case))
    path_of(case).write_text(json.dumps(body, indent=1, ensure_ascii=False) + "\n")


def main(names: list[str]) -> None:
    import time

    todo = [c for c in cases() if not names or c.name in names]
    for case in todo:
        if case.shared() and not SHARED.exists():
            print(f"skip {case.name}: {SHARED} not present", file=sys.stderr)
            continue
        t0 = time.perf_counter()
        write(case)
        print(f"{case.name}: {time.perf_counter() - t0:.1f} s", file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv[1:])
