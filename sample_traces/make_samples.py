"""Regenerate the bundled sample traces and their ground truth (deterministic, seeded).

    python sample_traces/make_samples.py [OUTDIR]

Writes every sample of ``tracelens_dev.synth.samples.SAMPLES`` into OUTDIR (default: this folder):
the trace (one ``.xplane.pb``, or an XProf log directory for multi-host samples) and
``<name>.truth.json``, the ground truth computed from the construction by ``tracelens_dev.synth``
(never by tracelens's analyzers). Running it twice gives byte-identical files.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from tracelens_dev.writers.xspace import write  # noqa: E402
from tracelens_dev.synth import build  # noqa: E402
from tracelens_dev.synth.samples import SAMPLES  # noqa: E402


def main(out: Path = HERE) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for sample in SAMPLES:
        syn = build(sample.scenario)
        target = out / sample.trace_path
        if sample.layout == "logdir" and target.exists():
            shutil.rmtree(target)
        files = write(syn.trace, target, layout=sample.layout)
        truth = {"trace": sample.trace_path, "what": sample.what, **syn.truth}
        (out / f"{sample.name}.truth.json").write_text(json.dumps(truth, indent=1) + "\n")
        size = sum(f.stat().st_size for f in files)
        print(f"wrote {sample.trace_path} ({len(files)} file(s), {size:,} bytes, "
              f"{syn.trace.events.height} device events)")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE)
