"""Benchmark: hostile inputs are refused or read in bounded time and memory (issue 25, D12/12c).

    python benchmarks/bench_bounds.py [--bomb-gib 2]

Each case runs ``tracelens summarize`` in a fresh process and records its wall time, exit code
and peak RSS (the child's ``VmHWM``), beside the floor: a process that only imports the CLI.

- a gzip bomb of every compressed format (``--bomb-gib`` GiB of zeros or spaces, about
  1 MB per GiB compressed), refused by the read budget;
- a rocpd file whose kernel symbols carry 1 MiB names (cut to 16 KiB after reading);
- an XSpace with 200k events naming undefined event metadata (one shared unknown name);
- an XSpace of 20k one-event stream lines naming ids just below the C decoder's index bounds
  (each line's maps are sized by its events).

Prints a table and writes ``benchmarks/results/bounds.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

_CHILD = """
import re, sys
from click.testing import CliRunner
from tracelens.cli.commands import main
code = 0
if sys.argv[1] != '--floor':
    code = CliRunner().invoke(main, ['summarize', sys.argv[1], '--format', 'json']).exit_code
hwm = re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read()).group(1)
print(code, hwm)
"""


def measure(path: str) -> dict[str, float | int]:
    """Exit code, wall seconds and peak RSS (MB) of ``summarize PATH`` in a fresh process."""
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", _CHILD, path], capture_output=True, text=True,
                         cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=600)
    wall = time.perf_counter() - t0
    code, hwm = out.stdout.split()[-2:]
    return {"exit": int(code), "wall_s": round(wall, 2), "peak_mb": round(int(hwm) / 1024)}


def cases(d: Path, bomb_gib: int) -> dict[str, Path]:
    from tests.test_inflation import BOMBS, write_bomb
    from tests.test_long_names import _with_long_names
    from tests.xspace_flood import one_event_lines, ordinary_ids, xspace_with_ids

    out = {f"gzip bomb {fmt} ({bomb_gib} GiB)": write_bomb(d / BOMBS[fmt][0], fmt,
                                                           bomb_gib << 30)
           for fmt in BOMBS}
    long_dir = d / "long"
    long_dir.mkdir()
    out["rocpd, 1 MiB kernel names"] = _with_long_names(long_dir, "rocpd")
    dangling = d / "dangling.xplane.pb"
    dangling.write_bytes(xspace_with_ids(ordinary_ids(200_000)))
    out["XSpace, 200k dangling metadata ids"] = dangling
    lines = d / "lines.xplane.pb"
    lines.write_bytes(one_event_lines(20_000, 2**15 - 1, 2**13 - 1))
    out["XSpace, 20k one-event lines, large ids"] = lines
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bomb-gib", type=int, default=2)
    args = ap.parse_args()
    rows = {"floor (import the CLI)": measure("--floor")}
    with tempfile.TemporaryDirectory(prefix="tracelens-bounds-") as tmp:
        for name, path in cases(Path(tmp), args.bomb_gib).items():
            rows[name] = {**measure(str(path)), "input_mb": round(path.stat().st_size / 2**20, 1)}
    width = max(map(len, rows))
    print(f"{'case':<{width}}  exit  wall s  peak MB  input MB")
    for name, r in rows.items():
        print(f"{name:<{width}}  {r['exit']:>4}  {r['wall_s']:>6}  {r['peak_mb']:>7}  "
              f"{r.get('input_mb', '')!s:>8}")
    res = ROOT / "benchmarks" / "results"
    res.mkdir(exist_ok=True)
    (res / "bounds.json").write_text(json.dumps(
        {"machine": platform.platform(), "cpus": os.cpu_count(), "cases": rows}, indent=1)
        + "\n")


if __name__ == "__main__":
    main()
