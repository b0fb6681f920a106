"""Shared test helpers: where the real traces live, and builders for hand-made traces."""

from __future__ import annotations

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
