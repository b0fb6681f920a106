"""Shared test helpers: where the real traces live, and builders for hand-made traces."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tracelens.analyze.xcheck import kernel_stats_by_name  # noqa: F401  (used by the oracle tests)

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

    from tracelens.cli.commands import main

    res = CliRunner().invoke(main, list(args), catch_exceptions=False)
    return subprocess.CompletedProcess(["tracelens", *args], res.exit_code, res.stdout,
                                       res.stderr)


# -- the tests by layer (issue 26) -----------------------------------------------------------
# Every test module belongs to one layer, by its name; `pytest -m parsers` (or core, engine,
# reports, cli) runs one layer, `pytest -m "not slow"` skips the cluster, benchmark and
# equivalence tests (seconds to minutes each). tests/test_layers.py checks every module is
# assigned. The first matching prefix wins.
LAYERS: tuple[tuple[str, str], ...] = (
    ("test_xspace", "parsers"), ("test_rocprof", "parsers"), ("test_rpd", "parsers"),
    ("test_kineto", "parsers"), ("test_json_kind", "parsers"), ("test_bad_input", "parsers"),
    ("test_inflation", "parsers"), ("test_long_names", "parsers"),
    ("test_foreign_formats", "parsers"), ("test_hlo_text", "parsers"),
    ("test_engine", "engine"), ("test_multihost", "engine"), ("test_protocol", "engine"),
    ("test_collective_partials", "engine"), ("test_profile_partials", "engine"),
    ("test_summary_partial", "engine"), ("test_jobs", "engine"), ("test_align", "engine"),
    ("test_report", "reports"), ("test_export", "reports"), ("test_encode", "reports"),
    ("test_xcheck", "reports"),
    ("test_cli", "cli"), ("test_golden", "cli"), ("test_startup", "cli"),
    ("test_bench", "engine"), ("test_perf_equivalence", "engine"),
    ("test_", "core"),
)
SLOW_MODULES = ("test_bench_", "test_perf_equivalence", "test_report_browser",
                "test_real_traces", "test_multihost")


def layer_of(module: str) -> str:
    """The layer of a test module (by its file name, see :data:`LAYERS`)."""
    return next(layer for prefix, layer in LAYERS if module.startswith(prefix))


def pytest_collection_modifyitems(config, items) -> None:  # noqa: ANN001 (pytest's hook)
    """Mark each test with its module's layer, and ``slow`` where it starts a Dask cluster
    (the ``cluster`` fixture) or its module is a benchmark or equivalence run."""
    import pytest

    for item in items:
        module = Path(str(item.fspath)).stem
        item.add_marker(getattr(pytest.mark, layer_of(module)))
        if module.startswith(SLOW_MODULES) or "cluster" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.slow)
