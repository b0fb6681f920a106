"""Make ``cnn_step.xplane.pb``: a real XLA:CPU trace of a small CNN training step, behind
``tests/test_classify_real.py``.

Run with a JAX install (not a tracelens dependency), from the repository root:

    python3 -m venv /tmp/venv-jax && /tmp/venv-jax/bin/pip install jax
    /tmp/venv-jax/bin/python tests/data/jax_cnn/make_jax_cnn.py

Two virtual CPU devices (``pmap``), two ``StepTraceAnnotation`` steps of: a 3x3 convolution,
ReLU, 2x2 max pooling (``reduce_window``; its gradient is a ``select-and-scatter``), a
rematerialized ``tanh`` (``jax.checkpoint``), a dense layer, a ``lax.cond`` and a ``sort``.
XLA:CPU runs the pooling as a one-op fusion named ``wrapped_reduce-window``: its name reads
like an elementwise fusion, its HLO body is a reduction. The Python tracer is off (the file
stays small); the XLA:CPU ops and the step annotations are all there.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2]))  # the checkout, for tracelens_dev
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=2"

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

from tracelens_dev.jax_trace import record  # noqa: E402


def loss(params, x):
    w1, w2 = params
    y = jax.lax.conv_general_dilated(x, w1, (1, 1), "SAME",
                                     dimension_numbers=("NHWC", "HWIO", "NHWC"))
    y = jax.nn.relu(y)
    y = jax.lax.reduce_window(y, -jnp.inf, jax.lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
    y = jax.checkpoint(lambda z: jnp.tanh(z) * 2)(y)
    y = y.reshape(y.shape[0], -1) @ w2
    y = jax.lax.cond(y.sum() > 0, lambda t: t * 2, lambda t: t - 1, y)
    return jnp.mean(jnp.sort(y, axis=-1) ** 2)


@jax.pmap
def step(params, x):
    grads = jax.grad(loss)(params, x)
    return jax.tree_util.tree_map(lambda p, g: p - 1e-3 * g, params, grads)


def main() -> None:
    key = jax.random.PRNGKey(0)
    w1 = jax.random.normal(key, (3, 3, 4, 8)) * 0.1
    w2 = jax.random.normal(key, (8 * 8 * 8, 10)) * 0.1
    params = jax.tree_util.tree_map(lambda w: jnp.stack([w] * 2), (w1, w2))
    x = jnp.ones((2, 4, 16, 16, 4))
    params = step(params, x)  # compiled before the trace
    jax.block_until_ready(params)

    def steps() -> None:
        nonlocal params
        for i in range(2):
            with jax.profiler.StepTraceAnnotation("train", step_num=i):
                params = step(params, x)
                jax.block_until_ready(params)

    record(HERE / "cnn_step.xplane.pb", steps, python_tracer=False)


if __name__ == "__main__":
    main()
