"""Write HTA's temporal breakdown of every shared Kineto trace as a JSON oracle fixture.

    /work/venv-hta/bin/python benchmarks/hta_oracle.py ../shared/traces/kineto \
        tests/data/kineto_hta_oracle.json

Runs in a separate virtual environment with ``HolisticTraceAnalysis`` installed (it pulls
pandas and more; tracelens does not depend on it). Per trace (a file, or the folder of rank
files): HTA's ``get_temporal_breakdown`` rows (µs: idle, compute, non-compute, kernel time per
rank). ``tests/test_kineto_oracles.py`` compares tracelens with it.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path


def breakdown(files: list[Path]) -> list[dict]:
    from hta.trace_analysis import TraceAnalysis

    with tempfile.TemporaryDirectory() as tmp:
        for f in files:
            (Path(tmp) / f.name).symlink_to(f.resolve())
        df = TraceAnalysis(trace_dir=tmp).get_temporal_breakdown(visualize=False)
    return [{k: (int(v) if k != "rank" else int(v)) for k, v in row.items()
             if k in ("rank", "idle_time(us)", "compute_time(us)", "non_compute_time(us)",
                      "kernel_time(us)")} for row in df.to_dict("records")]


def _guarded(files: list[Path]) -> list[dict] | dict:
    try:
        return breakdown(files)
    except Exception as exc:  # HTA fails on some traces: record how, not a number
        return {"error": f"{type(exc).__name__}: {str(exc)[:200]}"}


def main(root: str, out: str) -> None:
    base = Path(root)
    result = {}
    for f in sorted(base.glob("*.json.gz")) + sorted(base.glob("*/*.json.gz")):
        if f.parent.name == "sampled_128rank_job":
            continue
        result[f.relative_to(base).as_posix()] = _guarded([f])
    job = base / "sampled_128rank_job"
    if job.exists():
        result[job.name] = _guarded(sorted(job.glob("*.json.gz")))
    Path(out).write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main(*sys.argv[1:3])
