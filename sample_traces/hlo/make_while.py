"""Make the real XLA:CPU loops behind ``tests/test_hlo_tripcount.py``.

Run with a JAX install (not a tracelens dependency), from the repository root:

    /tmp/venv-jax/bin/python sample_traces/hlo/make_while.py

It dumps the optimized HLO (text and serialized ``HloModuleProto``) of two programs and writes
next to this script:

- ``while_loops.after_optimizations.{txt,hlo.pb}``: five ``lax.while_loop``\\ s with constant
  bounds, one per compare direction and step sign (``i < 7`` by 2 from 0, ``i <= 9`` by 3 from
  1, ``i > 0`` by -3 from 10, ``i >= -5`` by -2 from 4, ``i != 12`` by 4 from 0). XLA's
  trip-count annotator writes ``known_trip_count`` on each: the tests strip it and re-derive
  the count from the condition, with XLA's number as the oracle.
- ``data_bound.after_optimizations.{txt,hlo.pb}``: a ``psum`` inside a ``lax.while_loop``
  whose bound is an argument of the program: the trip count depends on data, XLA writes no
  ``known_trip_count``, and the lens must leave it unknown.
"""

from __future__ import annotations

import glob
import shutil
import sys
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
# make_hlo sets XLA_FLAGS (8 host devices, dump text and proto to DUMP) before importing jax
from make_hlo import DUMP, HERE, MESH, shard_map  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from jax import lax  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

# (init, step, direction, bound): the loop runs while ``i <direction> bound``.
LOOPS = ((0, 2, "lt", 7), (1, 3, "le", 9), (10, -3, "gt", 0), (4, -2, "ge", -5),
         (0, 4, "ne", 12))
COMPARE = {"lt": lax.lt, "le": lax.le, "gt": lax.gt, "ge": lax.ge, "ne": lax.ne}


def _loop(x, init, step, direction, bound):
    def cond(c):
        return COMPARE[direction](c[0], jnp.int32(bound))

    def body(c):
        return c[0] + jnp.int32(step), jnp.sin(c[1]) * 1.5
    return lax.while_loop(cond, body, (jnp.int32(init), x))[1]


@jax.jit
def while_loops(x):
    return sum(_loop(x, *spec) for spec in LOOPS)


@jax.jit
@partial(shard_map, mesh=MESH, in_specs=(P("d"), P()), out_specs=P("d"), check_vma=False)
def data_bound(x, n):
    def body(c):
        return c[0] + 1, c[1] + lax.psum(c[1], "d")
    return lax.while_loop(lambda c: c[0] < n, body, (jnp.int32(0), x))[1]


def _copy(name: str) -> None:
    for suffix in ("txt", "hlo.pb"):
        found = sorted(glob.glob(str(DUMP / f"module_*.jit_{name}.*after_optimizations.{suffix}")))
        if not found:
            sys.exit(f"no optimized HLO dump for {name} in {DUMP}")
        shutil.copy(found[-1], HERE / f"{Path(found[-1]).name.split('.')[0]}.{name}"
                                      f".after_optimizations.{suffix}")


def main() -> None:
    x = jnp.ones((8, 16), jnp.float32)
    jax.block_until_ready(while_loops(x))
    jax.block_until_ready(data_bound(jnp.ones((8 * 4, 16), jnp.float32), jnp.int32(3)))
    for name in ("while_loops", "data_bound"):
        _copy(name)
    print("dump:", DUMP)


if __name__ == "__main__":
    main()
