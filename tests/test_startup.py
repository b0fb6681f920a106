"""Start-up cost (issue 26): ``tracelens summarize`` on a Kineto file loads only what that
input needs, and the command runs with fewer garbage collections. No time is asserted here
(``benchmarks/bench_startup.py`` measures it); what is checked is which modules a fresh
process imported and the collector's threshold while a command runs."""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, SHARED, cli

KINETO = SHARED / "traces" / "kineto" / "mi250_rocm62_minitoy_train.json.gz"
# Run the CLI as ``python -m tracelens.cli.commands`` would, then write the names in sys.modules.
RUN = """
import json, runpy, sys
out, sys.argv = sys.argv[1], ["tracelens", *sys.argv[2:]]
try:
    runpy.run_module("tracelens.cli.commands", run_name="__main__", alter_sys=True)
except SystemExit as exc:
    assert not exc.code, exc.code
with open(out, "w") as fh:
    json.dump(sorted(sys.modules), fh)
"""
NEVER = ("google.protobuf.descriptor", "google.protobuf.descriptor_pb2",
         "google.protobuf.text_format", "parsers.hlo", "parsers.hlo.schema", "tracelens.hlo.lens",
         "tracelens.hlo.index", "tracelens.core.hlo_model", "tracelens.cost.opcost",
         "tracelens.analyze.compute.hlo_findings", "tracelens.results.runs",
         "plotly", "jinja2", "dask", "distributed")


def _modules_after(tmp_path: Path, *args: str) -> set[str]:
    out = tmp_path / "modules.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    res = subprocess.run([sys.executable, "-c", RUN, str(out), *args], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    return set(json.loads(out.read_text()))


@pytest.mark.parametrize("fmt", ["table", "json"])
def test_summarize_kineto_imports_no_protobuf_hlo_report_or_dask(tmp_path: Path,
                                                                  fmt: str) -> None:
    if not KINETO.exists():
        pytest.skip(f"real trace {KINETO} not present")
    loaded = _modules_after(tmp_path, "summarize", str(KINETO), "--format", fmt)
    assert "parsers.kineto.reader" in loaded  # the run did read the file
    assert not sorted(m for m in loaded if m in NEVER or m.split(".")[0] in NEVER)
    # rich renders the terminal table; the other formats do without it
    assert ("rich.table" in loaded) == (fmt == "table")


def test_help_imports_no_polars(tmp_path: Path) -> None:
    """``import tracelens`` and the option choices need no polars (nor numpy)."""
    loaded = _modules_after(tmp_path, "--help")
    assert "tracelens.cli.common" in loaded and "click" in loaded
    assert not sorted(m for m in loaded if m.split(".")[0] in ("polars", "numpy", "rich"))


def test_commands_run_with_a_raised_collector_threshold_and_restore_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    if not KINETO.exists():
        pytest.skip(f"real trace {KINETO} not present")
    import tracelens.cli.common as common

    seen = []
    real = common.print_result

    def spy(*args: object, **kwargs: object) -> None:
        seen.append(gc.get_threshold())
        real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(common, "print_result", spy)
    monkeypatch.setattr("tracelens.cli.commands.print_result", spy)
    before = gc.get_threshold()
    res = cli("summarize", str(KINETO), "--format", "json")
    assert res.returncode == 0, res.stderr
    assert seen and seen[0][0] == 100_000 and seen[0][1:] == before[1:]
    assert gc.get_threshold() == before
