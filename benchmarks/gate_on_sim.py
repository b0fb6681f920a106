"""The consistency gate on the simulator's campaign (docs/critical-path.md, "The consistency
gate"):

    PYTHONPATH=. python benchmarks/gate_on_sim.py [--scenarios 100] [--seed0 0]
                                                  [--formats xspace,xspace-device]

For each seeded scenario (tracelens_dev/sim/scenarios.py; the regime is ``seed % 9``) and each
format: simulate, write, run ``summarize`` and ``critical-path`` in process and print every
contradiction the gate finds (tests/consistency_corpus.py), then how many traces had none,
per regime. Seeds 0-99 x both formats on 2 shared cores: ~25 minutes.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.consistency_corpus import contradictions  # noqa: E402
from tracelens_dev.sim.campaign import simulate, write  # noqa: E402
from tracelens_dev.sim.scenarios import generate  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenarios", type=int, default=100)
    ap.add_argument("--seed0", type=int, default=0)
    ap.add_argument("--formats", default="xspace,xspace-device")
    args = ap.parse_args()
    clean: Counter[str] = Counter()
    total: Counter[str] = Counter()
    for seed in range(args.seed0, args.seed0 + args.scenarios):
        job = generate(seed)
        sim = simulate(job)
        regime = str(job.meta.get("regime", ""))
        for fmt in args.formats.split(","):
            with tempfile.TemporaryDirectory(prefix="tl-gate-") as tmp:
                (path,) = write(sim, fmt, Path(tmp) / fmt)[:1]
                rows, words = contradictions(path)
            total[regime] += 1
            clean[regime] += not rows
            print(f"seed {seed} ({regime}) {fmt}: {len(rows)}", flush=True)
            for w in words:
                print(f"    {w}", flush=True)
    print(f"clean: {sum(clean.values())} of {sum(total.values())} traces")
    for regime in sorted(total):
        print(f"  {regime}: {clean[regime]} of {total[regime]}")


if __name__ == "__main__":
    main()
