"""Make ``recompile_bf16.xplane.pb``: a real XLA:CPU trace of one program compiled twice and a
bf16 all-reduce, behind ``tests/test_hlo_dedup.py``.

Run with a JAX install (not a tracelens dependency), from the repository root:

    python3 -m venv /tmp/venv-jax && /tmp/venv-jax/bin/pip install jax
    /tmp/venv-jax/bin/python tests/data/jax_recompile/make_jax_recompile.py

Four virtual CPU devices. ``accumulate`` (a ``psum`` in every iteration of a 4-iteration
``fori_loop``: a collective inside a loop) is compiled for two batch sizes, so the trace's
``/host:metadata`` holds two compilations of the module ``jit_accumulate``; only the batch of 32
runs inside the trace, the batch of 16 ran only before it. ``bf16_step`` all-reduces a bf16
gradient: XLA:CPU promotes the all-reduce to f32 itself (its reducer becomes
``region_..._promoted``, its operand a bf16 -> f32 ``convert``), nothing the program asked for.
Three steps inside ``jax.profiler.StepTraceAnnotation``; the Python tracer is off.
"""

from __future__ import annotations

import os
import sys
from functools import partial
from pathlib import Path

os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=4"

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from jax import lax  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P  # noqa: E402

try:
    from jax import shard_map  # noqa: E402
except ImportError:  # older JAX
    from jax.experimental.shard_map import shard_map  # noqa: E402

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2]))  # the checkout, for tracelens_dev
from tracelens_dev.jax_trace import record  # noqa: E402

MESH = Mesh(jax.devices()[:4], ("d",))
NO_VMA = {"check_vma": False}  # the only all-reduce is the explicit psum


def _loss(w, x):
    return jnp.mean(jnp.tanh(x @ w) ** 2)


@jax.jit
@partial(shard_map, mesh=MESH, in_specs=(P(), P(None, "d")), out_specs=P(), **NO_VMA)
def accumulate(w, x):
    """x: f32[4, batch, 256] per device; one psum per microbatch."""
    def body(i, acc):
        return acc + lax.psum(jax.grad(_loss)(w, x[i]), "d")
    return w - 0.01 * lax.fori_loop(0, 4, body, jnp.zeros_like(w)) / 4


@jax.jit
@partial(shard_map, mesh=MESH, in_specs=(P(), P("d")), out_specs=P(), **NO_VMA)
def bf16_step(w, x):
    """A bf16 gradient all-reduced in bf16, as the program says."""
    return w - 0.01 * lax.psum(jax.grad(_loss)(w, x), "d")


def main() -> None:
    rep, shard = NamedSharding(MESH, P()), NamedSharding(MESH, P(None, "d"))
    w = jax.device_put(jnp.ones((256, 128), jnp.float32) * 0.01, rep)
    x32 = jax.device_put(jnp.ones((4, 4 * 32, 256), jnp.float32) * 0.01, shard)
    x16 = jax.device_put(jnp.ones((4, 4 * 16, 256), jnp.float32) * 0.01, shard)
    wb = jax.device_put(jnp.ones((256, 128), jnp.bfloat16) * 0.01, rep)
    xb = jax.device_put(jnp.ones((4 * 32, 256), jnp.bfloat16) * 0.01,
                        NamedSharding(MESH, P("d")))
    # both compilations of accumulate, and bf16_step, before the trace
    jax.block_until_ready((accumulate(w, x16), accumulate(w, x32), bf16_step(wb, xb)))

    def steps() -> None:
        for i in range(3):
            with jax.profiler.StepTraceAnnotation("train", step_num=i):
                jax.block_until_ready((accumulate(w, x32), bf16_step(wb, xb)))

    record(HERE / "recompile_bf16.xplane.pb", steps, python_tracer=False)


if __name__ == "__main__":
    main()
