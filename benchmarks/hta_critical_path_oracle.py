"""Write HTA's critical-path device activities of every single-rank shared Kineto trace as a
JSON oracle fixture (issue 27).

    /work/venv-hta/bin/python benchmarks/hta_critical_path_oracle.py ../shared/traces/kineto \
        tests/data/kineto_hta_critical_path.json

Runs in a separate virtual environment (tracelens does not depend on HTA), as
``benchmarks/hta_oracle.py`` does: ``python3 -m venv /work/venv-hta &&
/work/venv-hta/bin/pip install HolisticTraceAnalysis 'pandas<3'`` (HTA 0.5.0 fails on every
trace with pandas 3: ``drop(axis=1, columns=...)``; the fixture was written with pandas 2.3.3).

Per trace file: the CPU-side ``ProfilerStep#N`` annotation HTA analyzes (the middle step by
number, the lower of two; the first annotation of that exact name), the window it spans
(ns), whether HTA's algorithm succeeded, and the device activities (GPU kernels, copies,
sets) on HTA's critical path: name, start and end (ns, as tracelens reads Kineto's µs) and
stream. A trace HTA cannot read records the error instead.
``tests/test_critical_path_hta.py`` compares tracelens with it.
"""

from __future__ import annotations

import json
import re
import sys
import tempfile
from pathlib import Path

STEP = re.compile(r"^ProfilerStep#(\d+)$")


def _ns(us: float, base: float = 0.0) -> int:
    """HTA's µs (relative to the trace's first event, ``base`` µs) -> ns as in the file."""
    return int(round((float(us) + base) * 1000))


def critical(file: Path) -> dict:
    from hta.trace_analysis import TraceAnalysis

    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / file.name).symlink_to(file.resolve())
        ta = TraceAnalysis(trace_dir=tmp)
        rank = next(iter(ta.t.traces))
        df = ta.t.get_trace(rank)
        base = float(ta.t.min_ts)
        sym = ta.t.symbol_table.get_sym_table()
        df = df.assign(s_name=df["name"].map(lambda i: sym[i]))
        cpu = df[df["stream"].eq(-1)]
        steps = sorted({int(m.group(1)) for n in cpu["s_name"] if (m := STEP.match(n))})
        if not steps:
            return {"error": "no CPU-side ProfilerStep annotation"}
        step = steps[(len(steps) - 1) // 2]
        name = f"ProfilerStep#{step}"
        ann = cpu[cpu["s_name"] == name].sort_values("ts").iloc[0]
        # HTA matches annotations by substring and indexes their rows: the exact name's
        # first row is the instance when no other annotation name contains it
        others = [n for n in set(df["s_name"]) if name in n and n != name]
        if others:
            return {"error": f"{name} is part of other names {sorted(others)[:3]}"}
        graph, ok = ta.critical_path_analysis(rank=rank, annotation=name, instance_id=0)
        events = df.loc[sorted(graph.critical_path_events_set)] if ok else df.head(0)
        dev = events[events["stream"].ne(-1) & ~events["s_name"].str.startswith("ProfilerStep")]
        acts = [{"name": r.s_name, "start_ns": _ns(r.ts, base),
                 "end_ns": _ns(r.ts + r.dur, base),
                 "stream": int(r.stream)} for r in dev.sort_values(["ts", "stream"]).itertuples()]
        return {"step": step, "annotation": name, "window": {
            "start_ns": _ns(ann.ts, base), "end_ns": _ns(ann.ts + ann.dur, base)},
            "success": bool(ok),
            "device_activities": acts}


def _guarded(file: Path) -> dict:
    try:
        return critical(file)
    except Exception as exc:  # HTA fails on some traces: record how, not a path
        return {"error": f"{type(exc).__name__}: {str(exc)[:200]}"}


def main(root: str, out: str) -> None:
    base = Path(root)
    result = {f.relative_to(base).as_posix(): _guarded(f)
              for f in sorted(base.glob("*.json.gz")) + sorted(base.glob("*/*.json.gz"))}
    Path(out).write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main(*sys.argv[1:3])
