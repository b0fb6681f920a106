"""Record a real JAX trace for the test data: the capture and copy the generator scripts
(``sample_traces/hlo/make_comm.py``, ``tests/data/jax_*/make_*.py``) share.

Runs only where JAX is installed (a separate venv: JAX is not a tracelens dependency).
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path
from typing import Callable


def record(dest: Path, steps: Callable[[], None], python_tracer: bool = True) -> None:
    """Run ``steps`` under ``jax.profiler`` into a temporary log directory and copy the one
    ``.xplane.pb`` it wrote to ``dest`` (exit with a message when there is not exactly one).
    ``python_tracer=False`` leaves out the Python function events (a much smaller file)."""
    import jax

    out = Path(tempfile.mkdtemp(prefix="tracelens_jax_"))
    options = jax.profiler.ProfileOptions()
    if not python_tracer:
        options.python_tracer_level = 0
    jax.profiler.start_trace(str(out), profiler_options=options)
    steps()
    jax.profiler.stop_trace()
    found = sorted(out.glob("plugins/profile/*/*.xplane.pb"))
    if len(found) != 1:
        sys.exit(f"expected one .xplane.pb under {out}, found {found}")
    shutil.copyfile(found[0], dest)
    shutil.rmtree(out)
    print(f"wrote {dest} with jax {jax.__version__}")
