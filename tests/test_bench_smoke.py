"""The benchmark harness runs end to end at tiny sizes (no timing is asserted)."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import ROOT


def test_benchmark_harness_smoke(tmp_path) -> None:
    res = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "run.py"), "--smoke",
                          "--repeat", "1", "--no-write", "--data", str(tmp_path)],
                         capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert res.returncode == 0, res.stderr[-2000:]
    out = res.stdout
    for title in ("### 1. XSpace", "### 4. XProf log directory", "### 5. `report`",
                  "### Targets (issue 8)", "bare ParseFromString (floor)"):
        assert title in out, out[-3000:]
    assert "FAILED" not in out, out
    if (ROOT / "benchmarks" / "bench_rocpd.py").exists():
        assert "### 2. rocpd SQLite" in out and "### 3. rocprofv3 JSON" in out


def test_worker_memory_floors_measure(tmp_path) -> None:
    """``bench_engine.py --floor``'s two floors run in fresh processes and report what
    RESULTS.md quotes: the bare decode's peak over its imports, and a worker's RSS after its
    imports, after a warm-up map, and its peak loading a host file (never below the RSS the
    peak was reset to), with the model's events frame of that file."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import bench_engine
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    data = tmp_path / "hosts"
    data.mkdir()
    src = ROOT / "sample_traces" / "h100_8gpu_moe_ddp.xplane.pb"
    (data / src.name).write_bytes(src.read_bytes())
    floor = bench_engine.measure("floor", data, "summarize")
    assert "error" not in floor, floor
    assert floor["client_peak_rss_bytes"] > floor["rss_after_imports_bytes"] > 0
    assert floor["file_bytes"] == src.stat().st_size
    rt = bench_engine.measure("runtime-floor", data, "summarize")
    assert "error" not in rt, rt
    assert rt["file_bytes"] == src.stat().st_size and rt["events"] > 0
    assert rt["events_frame_bytes"] > 0
    assert rt["rss_warm_bytes"] > rt["rss_after_imports_bytes"] > 0
    assert rt["load_peak_rss_bytes"] >= rt["rss_hwm_reset_bytes"] > 0
