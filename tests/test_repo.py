"""The repository's promises: CI runs the README's test command; samples regenerate identically."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import ROOT, SAMPLES


def test_ci_runs_exactly_the_readme_test_command() -> None:
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text().strip().splitlines()[-1]
    assert ci.startswith("python3 -m venv .venv") and "pytest" in ci
    assert f"\n{ci}\n" in readme


def _sample_files(root) -> dict[str, bytes]:
    """Files of the seeded generator; ``hlo/`` is real JAX output (hlo/make_hlo.py needs JAX),
    ``tpu/`` real TPU traces (tpu/make_tpu_traces.py needs a TPU) and ``real_runs/`` real runs
    made on a TPU machine (real_runs/make_runs.py)."""
    skip = {"README.md", "make_samples.py"}
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and p.name not in skip and "__pycache__" not in p.parts
            and p.relative_to(root).parts[0] not in ("hlo", "tpu", "real_runs")}


def test_samples_regenerate_byte_identical(tmp_path) -> None:
    """Every committed sample (traces, log directories, truth JSON) is exactly what the
    seeded generator writes, and nothing stale is left beside them."""
    out = tmp_path / "samples"
    subprocess.run([sys.executable, str(SAMPLES / "make_samples.py"), str(out)], check=True,
                   capture_output=True, cwd=ROOT)
    fresh, committed = _sample_files(out), _sample_files(SAMPLES)
    assert sorted(fresh) == sorted(committed)
    for name, data in fresh.items():
        assert data == committed[name], name
    assert len(fresh) >= 2 * 4 and all(len(d) < 1_000_000 for d in fresh.values())
