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


def test_samples_regenerate_byte_identical(tmp_path) -> None:
    script = (SAMPLES / "make_samples.py").read_text()
    copy = tmp_path / "make_samples.py"
    # Same generator, writing into tmp_path, importing parsers from this checkout.
    copy.write_text(script.replace("sys.path.insert(0, str(HERE.parent))",
                                   f"sys.path.insert(0, {str(ROOT)!r})"))
    subprocess.run([sys.executable, str(copy)], check=True, capture_output=True)
    for name in ("mi300x_8gpu_llama_step.xplane.pb", "mi300x_8gpu_llama_step.truth.json"):
        assert (tmp_path / name).read_bytes() == (SAMPLES / name).read_bytes(), name
