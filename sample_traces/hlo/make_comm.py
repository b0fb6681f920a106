"""Make ``comm_types.xplane.pb``: a real XProf trace whose program runs one collective of each
type JAX's shard_map primitives lower to, behind ``tests/test_comm_types.py``.

Run with a JAX install (not a tracelens dependency), from the repository root:

    python3 -m venv /tmp/venv-jax && /tmp/venv-jax/bin/pip install jax
    /tmp/venv-jax/bin/python sample_traces/hlo/make_comm.py

It sets ``XLA_FLAGS=--xla_force_host_platform_device_count=8`` itself, compiles one
shard_mapped program over an 8-device mesh and traces three steps, each inside
``jax.profiler.StepTraceAnnotation``. Per device and step the program runs, on an f32[4096]
shard: ``all_gather`` (tiled, f32[32768] out), ``psum_scatter`` (tiled, back to f32[4096]),
``all_to_all`` (8 chunks of 512), ``ppermute`` (a ring shift) and ``psum``. JAX names the ops
after its primitives (``all_gather.N``, ``reduce_scatter.N``, ``ppermute.N``, ``psum.N``), so
only the HLO opcode says what each one is.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))  # the checkout, for tracelens_dev
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import Mesh, NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

from tracelens_dev.jax_trace import record  # noqa: E402

try:
    from jax import shard_map
except ImportError:  # JAX before 0.8
    from jax.experimental.shard_map import shard_map  # type: ignore[no-redef]


def per_device(x):
    y = jax.lax.all_gather(x, "d", tiled=True)
    z = jax.lax.psum_scatter(y, "d", tiled=True)
    a = jax.lax.all_to_all(z.reshape(8, -1), "d", 0, 0, tiled=True).reshape(x.shape)
    p = jax.lax.ppermute(a, "d", [(i, (i + 1) % 8) for i in range(8)])
    return p + jax.lax.psum(p, "d")


def main() -> None:
    mesh = Mesh(np.array(jax.devices()[:8]), ("d",))
    step = jax.jit(shard_map(per_device, mesh=mesh, in_specs=P("d"), out_specs=P("d")))
    x = jax.device_put(jnp.arange(8 * 4096, dtype=jnp.float32), NamedSharding(mesh, P("d")))
    step(x).block_until_ready()  # compiled before the trace

    def steps() -> None:
        nonlocal x
        for i in range(3):
            with jax.profiler.StepTraceAnnotation("train", step_num=i):
                x = step(x)
                x.block_until_ready()

    record(HERE / "comm_types.xplane.pb", steps)


if __name__ == "__main__":
    main()
