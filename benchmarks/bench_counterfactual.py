"""Benchmark: the critical path and what-ifs against the simulator's truth (issue 45, item 3).

    python benchmarks/bench_counterfactual.py [--scenarios 300] [--formats xspace,xspace-device]
                                              [--seed0 0] [--out NAME]

For each seeded scenario (tracelens_dev/sim/scenarios.py; the regime is ``seed % 9``) and
each format: simulate, write, run tracelens's critical path, and check (a) the longest
path's composition per component (tolerance max(1% of the step, 10 us)), (b) every listed
what-if's projected step against the re-simulated counterfactual (max(2%, 20 us)), (c) the
largest projected saving is the truly best change. Prints the pass rates and the error
distribution (median/p90/max, as % of the step) per check, regime and format, and writes
every result to ``benchmarks/results/<out>.json`` (default ``counterfactual.json``).
Docs: docs/simulator.md.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _pct(xs: list[float], q: float) -> float:
    if not xs:
        return float("nan")
    s = sorted(xs)
    return s[min(len(s) - 1, int(round(q * (len(s) - 1))))]


def summarize(rows: list[dict]) -> list[dict]:
    """Per (check, regime, format) and per (check, all, format): n, pass rate, error
    median/p90/max as % of the step."""
    keys: dict[tuple[str, str, str], list[dict]] = {}
    for r in rows:
        for name, c in r["checks"].items():
            if c["ok"] is None:
                continue
            for regime in (r["regime"], "all"):
                keys.setdefault((name, regime, r["fmt"]), []).append(
                    {"ok": c["ok"], "err": 100.0 * abs(c["error_ns"]) / max(r["step_ns"], 1)})
    out = []
    for (name, regime, fmt), xs in sorted(keys.items()):
        errs = [x["err"] for x in xs]
        out.append({"check": name, "regime": regime, "format": fmt, "n": len(xs),
                    "pass": sum(x["ok"] for x in xs) / len(xs), "median_pct": _pct(errs, 0.5),
                    "p90_pct": _pct(errs, 0.9), "max_pct": max(errs)})
    return out


def main() -> None:
    from tracelens_dev.sim.campaign import CAMPAIGN_FORMATS, check
    from tracelens_dev.sim.scenarios import generate

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenarios", type=int, default=300)
    ap.add_argument("--seed0", type=int, default=0)
    ap.add_argument("--formats", default=",".join(CAMPAIGN_FORMATS))
    ap.add_argument("--out", default="counterfactual")
    args = ap.parse_args()
    formats = [f for f in args.formats.split(",") if f]
    rows = []
    t0 = time.perf_counter()
    for seed in range(args.seed0, args.seed0 + args.scenarios):
        job = generate(seed)
        for fmt in formats:
            r = check(job, fmt)
            rows.append({"seed": seed, "regime": r.regime, "fmt": fmt, "step_ns": r.step_ns,
                         "ranks": job.ranks,
                         "checks": {k: {"ok": c.ok, "error_ns": c.error_ns,
                                        "tolerance_ns": c.tolerance_ns,
                                        # details of failures only (the file stays small)
                                        **({"detail": c.detail} if c.ok is False else {}),
                                        **({"why": c.why} if c.why else {})}
                                    for k, c in r.checks.items()},
                         "notes": r.analyzer.get("notes"), "error": r.analyzer.get("error")})
    wall = time.perf_counter() - t0
    table = summarize(rows)
    print(f"{args.scenarios} scenarios x {len(formats)} formats in {wall:.0f} s")
    print(f"{'check':8} {'regime':13} {'format':14} {'n':>4} {'pass':>6} {'med%':>7} "
          f"{'p90%':>7} {'max%':>7}")
    for t in table:
        print(f"{t['check']:8} {t['regime']:13} {t['format']:14} {t['n']:4d} "
              f"{100 * t['pass']:5.0f}% {t['median_pct']:7.2f} {t['p90_pct']:7.2f} "
              f"{t['max_pct']:7.2f}")
    out = ROOT / "benchmarks" / "results" / f"{args.out}.json"
    out.write_text(json.dumps({"scenarios": args.scenarios, "seed0": args.seed0,
                               "formats": formats, "wall_s": round(wall, 1),
                               "summary": table, "results": rows}, default=str) + "\n")
    print(f"wrote {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
