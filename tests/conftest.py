"""Shared test helpers: where the real traces live, and builders for hand-made traces."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tracelens.xcheck import kernel_stats_by_name  # noqa: F401  (used by the oracle tests)

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"
REAL_XPROF = SHARED / "traces" / "xprof"
ORACLES = SHARED / "oracles"
SAMPLES = ROOT / "sample_traces"

GPU_TRACES = {
    "gemm08": "mi300x_jax08_gemm.xplane.pb",
    "attention08": "mi300x_jax08_attention.xplane.pb",
    "conv08": "mi300x_jax08_conv_8gpu.xplane.pb",
}
CPU_TRACE = "cpu_4dev_dp_allreduce.xplane.pb"


def real_trace(name: str) -> Path:
    """Path of a real shared trace, or skip the test with the reason."""
    path = REAL_XPROF / name
    if not path.exists():
        pytest.skip(f"real trace {path} not present (shared/ is not beside this checkout)")
    return path


def oracle(folder: str, name: str) -> Path:
    path = ORACLES / folder / name
    if not path.exists():
        pytest.skip(f"oracle file {path} not present")
    return path


REAL_ROCPROF = SHARED / "traces" / "rocprof"


def real_rocprof(name: str) -> Path:
    """Path of a real shared rocprofv3 trace, or skip the test with the reason."""
    path = REAL_ROCPROF / name
    if not path.exists():
        pytest.skip(f"real trace {path} not present (shared/ is not beside this checkout)")
    return path


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    """``tracelens ARGS`` run in this process by click's CliRunner, returned as a finished
    process (exit code, stdout and stderr apart): a tenth of a second instead of a fresh
    interpreter. An exception other than the exit is raised here, where a subprocess would
    print a traceback. Tests of the process boundary itself (the entry point, hash seeds)
    use ``tests.test_bad_input.run_cli``."""
    from click.testing import CliRunner

    from tracelens.cli import main

    res = CliRunner().invoke(main, list(args), catch_exceptions=False)
    return subprocess.CompletedProcess(["tracelens", *args], res.exit_code, res.stdout,
                                       res.stderr)
