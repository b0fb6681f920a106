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

import sys
from pathlib import Path

import jax
import jax.numpy as jnp

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2]))  # the checkout, for tracelens_dev
from tracelens_dev.jax_trace import record  # noqa: E402


@jax.jit
def step(w, x):
    for _ in range(4):
        x = jnp.tanh(x @ w)
    return w - 1e-3 * jnp.mean(x), x


def main() -> None:
    w, x = jnp.ones((512, 512)) * 0.01, jnp.ones((512, 512))
    w, x = step(w, x)  # compiled before the trace
    w.block_until_ready()

    def steps() -> None:
        nonlocal w, x
        for i in range(5):
            with jax.profiler.StepTraceAnnotation("train", step_num=i):
                w, x = step(w, x)  # no block_until_ready: the next step is dispatched at once
        w.block_until_ready()

    record(HERE / "async_steps.xplane.pb", steps, python_tracer=False)


if __name__ == "__main__":
    main()
