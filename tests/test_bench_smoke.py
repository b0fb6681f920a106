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
