"""A name no real kernel has (1 MB) is cut right after reading (issue 25 item 12c).

One 1 MiB kernel name shared by every dispatch of an 8 MB rocpd file took 2.9 GB in
``summarize`` (each multi-key group-by encoded a copy per row); cut to 16 KiB with its length
and hash, it takes under 300 MB.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

import tracelens
from tests.conftest import ROOT, SAMPLES
from tracelens.loading.long_names import MAX_NAME_BYTES
from tracelens_dev.writers.rocprof import write_json, write_rocpd

BIG = 1 << 20


def _long(kernel_id: int) -> str | None:
    """Two long names that differ only past the cut; a third of the kernels keep theirs."""
    return None if kernel_id % 3 == 2 else "K" * BIG + "ab"[kernel_id % 3]


def _with_long_names(d: Path, writer: str) -> Path:
    """The MI300X sample as rocprofv3 output, its kernel symbols renamed afterwards (one
    symbol row per name, as a hostile file would have them)."""
    trace = tracelens.load(SAMPLES / "mi300x_8gpu_llama_step.xplane.pb")
    if writer == "rocpd":
        path = d / "1_results.db"
        write_rocpd(trace, path)
        con = sqlite3.connect(path)
        (table,) = con.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name "
                               "LIKE 'rocpd_info_kernel_symbol%'").fetchone()
        for (kid,) in con.execute(f'SELECT id FROM "{table}"').fetchall():
            if _long(kid):
                con.execute(f'UPDATE "{table}" SET kernel_name = ?, display_name = ? '
                            "WHERE id = ?", (_long(kid), _long(kid), kid))
        con.commit()
        con.close()
        return path
    path = d / "1_results.json"
    write_json(trace, path)
    doc = json.loads(path.read_text())
    for sym in doc["rocprofiler-sdk-tool"][0]["kernel_symbols"]:
        if _long(sym["kernel_id"]):
            for key in ("kernel_name", "formatted_kernel_name", "demangled_kernel_name",
                        "truncated_kernel_name"):
                sym[key] = _long(sym["kernel_id"])
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.parametrize("writer", ["rocpd", "json"])
def test_long_names_are_cut_distinct_and_counted(tmp_path: Path, writer: str) -> None:
    trace = tracelens.load(_with_long_names(tmp_path, writer))
    names = trace.events["name"].cast(pl.String)
    assert names.str.len_bytes().max() < MAX_NAME_BYTES + 100
    cut = names.filter(names.str.contains(r"…\[1048577 bytes, sha256 [0-9a-f]{12}\]$"))
    assert cut.n_unique() == 2 and cut.len() > 300
    assert names.filter(~names.str.starts_with("KKK")).len() > 0  # the others untouched
    assert any("2 names longer than 16384 bytes (longest 1048577)" in w
               for w in trace.meta.warnings), trace.meta.warnings


def test_summarize_of_a_shared_long_name_stays_small(tmp_path: Path) -> None:
    path = _with_long_names(tmp_path, "rocpd")
    # the child's own peak (VmHWM starts anew at exec; ru_maxrss keeps this process's)
    code = ("import re; from click.testing import CliRunner; "
            "from tracelens.cli.commands import main; "
            f"r = CliRunner().invoke(main, ['summarize', {str(path)!r}, '--format', 'json']); "
            "hwm = re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read()); "
            "print(r.exit_code, hwm.group(1))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout.split()
    assert out[0] == "0"
    assert int(out[1]) < 600 << 10, f"peak RSS {int(out[1]) >> 10} MB"  # was 2.9 GB
