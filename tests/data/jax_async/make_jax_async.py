"""Make ``async_steps.xplane.pb``: a real trace of a JAX training loop that does not wait for
each step, behind ``tests/test_steps.py``.

Run with a JAX install (not a tracelens dependency), from the repository root:

    python3 -m venv /tmp/venv-jax && /tmp/venv-jax/bin/pip install jax
    /tmp/venv-jax/bin/python tests/data/jax_async/make_jax_async.py

Five steps, each inside ``jax.profiler.StepTraceAnnotation`` and none blocking on its result
(JAX dispatches asynchronously, as in a real training loop; the loop waits once at the end).
Each annotation then spans only the host dispatching the step (microseconds) while XLA:CPU
runs the step's ops afterwards, outside every annotation. One virtual CPU device; the Python
tracer is off (the file stays small).
"""

from __future__ import annotations

import glob
import shutil
import sys
import tempfile
from pathlib import Path

import jax
import jax.numpy as jnp

HERE = Path(__file__).resolve().parent


@jax.jit
def step(w, x):
    for _ in range(4):
        x = jnp.tanh(x @ w)
    return w - 1e-3 * jnp.mean(x), x


def main() -> None:
    w, x = jnp.ones((512, 512)) * 0.01, jnp.ones((512, 512))
    w, x = step(w, x)  # compiled before the trace
    w.block_until_ready()
    out = Path(tempfile.mkdtemp(prefix="tracelens_async_"))
    options = jax.profiler.ProfileOptions()
    options.python_tracer_level = 0
    jax.profiler.start_trace(str(out), profiler_options=options)
    for i in range(5):
        with jax.profiler.StepTraceAnnotation("train", step_num=i):
            w, x = step(w, x)  # no block_until_ready: the next step is dispatched at once
    w.block_until_ready()
    jax.profiler.stop_trace()
    found = glob.glob(str(out / "plugins/profile/*/*.xplane.pb"))
    if len(found) != 1:
        sys.exit(f"expected one .xplane.pb under {out}, found {found}")
    shutil.copyfile(found[0], HERE / "async_steps.xplane.pb")
    shutil.rmtree(out)
    print(f"wrote {HERE / 'async_steps.xplane.pb'} with jax {jax.__version__}")


if __name__ == "__main__":
    main()
