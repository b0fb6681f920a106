"""Make the real XLA:CPU HLO and XProf trace behind ``tests/test_hlo_lens.py``.

Run with a JAX install (not a tracelens dependency), from the repository root:

    python3 -m venv /tmp/venv-jax && /tmp/venv-jax/bin/pip install jax
    /tmp/venv-jax/bin/python sample_traces/hlo/make_hlo.py

It sets ``XLA_FLAGS=--xla_force_host_platform_device_count=8 --xla_dump_to=<tmp>`` itself,
compiles three shard_mapped programs over an 8-device mesh, each planting one pattern that
``tracelens hlo`` looks for, and writes next to this script:

- ``<name>.after_optimizations.txt``: the optimized HLO text of each program;
- ``upcast_step.hlo.pb``: the same program as a serialized ``xla.HloProto``;
- ``planted.xplane.pb``: an XProf trace of three steps, each running the three programs once
  inside ``jax.profiler.StepTraceAnnotation``.

The programs (what survives XLA:CPU compilation is what the tests check, not this source):

- ``loop_step``: gradient accumulation over 4 microbatches in ``lax.fori_loop`` with a
  ``psum`` of the f32[256,128] gradient in every iteration (a collective inside a loop);
- ``upcast_step``: a bf16 gradient ``.astype(float32)`` just before its ``psum`` (an upcast
  collective: twice the bytes);
- ``small_step``: sixteen ``pmax`` of tiny f32[64] amax values (XLA:CPU combines them into one
  tuple all-reduce, so "many small collectives" does not survive compilation).
"""

from __future__ import annotations

import glob
import os
import shutil
import sys
import tempfile
from functools import partial
from pathlib import Path

HERE = Path(__file__).resolve().parent
DUMP = Path(tempfile.mkdtemp(prefix="tracelens_hlo_dump_"))
os.environ["XLA_FLAGS"] = (f"--xla_force_host_platform_device_count=8 --xla_dump_to={DUMP} "
                           "--xla_dump_hlo_as_text --xla_dump_hlo_as_proto")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from jax import lax  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P  # noqa: E402

try:
    from jax import shard_map  # noqa: E402
except ImportError:  # older JAX
    from jax.experimental.shard_map import shard_map  # noqa: E402

MESH = Mesh(jax.devices()[:8], ("d",))
# Without replication checking, the gradient of a replicated weight stays local: the only
# all-reduce is the explicit psum (with checking JAX adds its own psum of the gradient).
NO_VMA = {"check_vma": False}
MICRO = 4


def _loss(w, x):
    return jnp.mean(jnp.tanh(x @ w) ** 2)


@jax.jit
@partial(shard_map, mesh=MESH, in_specs=(P(), P("d")), out_specs=P(), **NO_VMA)
def loop_step(w, x):
    """x: f32[MICRO, 32, 256] per device; one psum per microbatch."""
    def body(i, acc):
        g = jax.grad(_loss)(w, x[i])
        return acc + lax.psum(g, "d")
    g = lax.fori_loop(0, MICRO, body, jnp.zeros_like(w))
    return w - 0.01 * g / MICRO


@jax.jit
@partial(shard_map, mesh=MESH, in_specs=(P(), P("d")), out_specs=P(), **NO_VMA)
def upcast_step(w, x):
    """A bf16 gradient upcast to f32 right before its all-reduce."""
    g = jax.grad(_loss)(w.astype(jnp.bfloat16), x.astype(jnp.bfloat16))
    g = lax.psum(g.astype(jnp.float32), "d")
    return w - 0.01 * g


@jax.jit
@partial(shard_map, mesh=MESH, in_specs=(P("d"),), out_specs=P())
def small_step(xs):
    """Sixteen tiny amax all-reduces (FP8 scale bookkeeping)."""
    amaxes = [lax.pmax(jnp.max(jnp.abs(xs[k]), axis=0), "d") for k in range(16)]
    return jnp.stack(amaxes)


def main() -> None:
    key = jax.random.key(0)
    w = jax.device_put(jax.random.normal(key, (256, 128), jnp.float32),
                       NamedSharding(MESH, P()))
    xl = jax.device_put(jnp.ones((8 * MICRO, 32, 256), jnp.float32) * 0.01,
                        NamedSharding(MESH, P("d")))
    xu = jax.device_put(jnp.ones((8 * 32, 256), jnp.float32) * 0.01,
                        NamedSharding(MESH, P("d")))
    xs = jax.device_put(jnp.ones((8 * 16, 8, 64), jnp.float32), NamedSharding(MESH, P("d")))
    # compile and warm up outside the trace
    jax.block_until_ready((loop_step(w, xl),
                           upcast_step(w, xu), small_step(xs)))
    logdir = Path(tempfile.mkdtemp(prefix="tracelens_hlo_trace_"))
    with jax.profiler.trace(str(logdir)):
        for i in range(3):
            with jax.profiler.StepTraceAnnotation("train", step_num=i):
                jax.block_until_ready((loop_step(w, xl),
                                       upcast_step(w, xu), small_step(xs)))
    for name in ("loop_step", "upcast_step", "small_step"):
        found = sorted(glob.glob(str(DUMP / f"module_*.jit_{name}.*after_optimizations.txt")))
        if not found:
            sys.exit(f"no optimized HLO dump for {name} in {DUMP}")
        shutil.copy(found[-1], HERE / f"{Path(found[-1]).name.split('.')[0]}.{name}"
                                      ".after_optimizations.txt")
    protos = sorted(glob.glob(str(DUMP / "module_*.jit_upcast_step.*after_optimizations.hlo.pb")))
    if protos:
        shutil.copy(protos[-1], HERE / "upcast_step.hlo.pb")
    traces = sorted(glob.glob(str(logdir / "plugins/profile/*/*.xplane.pb")))
    shutil.copy(traces[-1], HERE / "planted.xplane.pb")
    print("dump:", DUMP, "trace:", traces[-1])


if __name__ == "__main__":
    main()
