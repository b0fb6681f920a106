"""Shared test helpers: where the real traces live, and builders for hand-made traces."""

from __future__ import annotations

from pathlib import Path

import pytest

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


def kernel_stats_by_name(table: dict) -> dict[str, tuple[int, float]]:
    """XProf ``kernel_stats`` gviz table -> kernel name: (occurrences, total µs), summed over
    its rows (one row per name × op × launch configuration)."""
    cols = [c["id"] for c in table["cols"]]
    out: dict[str, list[float]] = {}
    for row in table["rows"]:
        r = dict(zip(cols, (c["v"] for c in row["c"])))
        acc = out.setdefault(r["kernel_name"], [0, 0.0])
        acc[0] += int(r["occurrences"])
        acc[1] += float(r["total_duration_us"])
    return {k: (int(v[0]), v[1]) for k, v in out.items()}
