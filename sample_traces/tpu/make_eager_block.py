"""Make eager_block.xplane.pb (run on a TPU; writes it into $OUT): the JAX program of the real
MI300X trace ``../shared/traces/xprof/mi300x_jax08_attention.xplane.pb``, run on a TPU so that
one JAX program has a GPU and a TPU trace (issue 48: a TPU-vs-GPU compare of one program).

The GPU trace holds no script; this program is read back from it: its HLO modules (names,
parameter shapes, dtypes, each instruction's JAX op name) and the order in which its kernels
ran. One transformer block in eager JAX (every jnp call its own jitted module, no outer jit):
x [4, 2048, 1024] bf16; q, k, v and the output projection by [1024, 1024] weights; scores
q @ swapaxes(k) scaled by sqrt(1024); softmax written out (max with initial -inf, subtract,
exp, sum, divide); p @ v; a residual add; an MLP [1024 -> 4096 -> 1024] with the tanh GELU
written out; a second residual add. Three iterations inside ``jax.profiler.trace``, one before
it (compiles), no step annotations (the GPU trace has none).
"""
import glob
import math
import os
import shutil
import tempfile

import jax
import jax.numpy as jnp

OUT = os.environ.get("OUT", ".")
B, S, D, F, ITERS = 4, 2048, 1024, 4096, 3
BF = jnp.bfloat16


def weights(key):
    ks = jax.random.split(key, 7)

    def n(k, shape):
        return jax.random.normal(k, shape).astype(BF)

    return dict(x=n(ks[0], (B, S, D)), wq=n(ks[1], (D, D)), wk=n(ks[2], (D, D)),
                wv=n(ks[3], (D, D)), wo=n(ks[4], (D, D)), w1=n(ks[5], (D, F)),
                w2=n(ks[6], (F, D)))


def block(p):
    x = p["x"]
    q, k, v = x @ p["wq"], x @ p["wk"], x @ p["wv"]
    s = q @ jnp.swapaxes(k, 1, 2)
    s = s / jnp.sqrt(q.shape[-1]).astype(BF)
    m = jnp.max(s, axis=-1, keepdims=True, initial=-jnp.inf)
    e = jnp.exp(s - m)
    a = (e / jnp.sum(e, axis=-1, keepdims=True)) @ v
    h = x + a @ p["wo"]
    u = h @ p["w1"]
    c = jnp.asarray(math.sqrt(2 / math.pi), BF)
    t = 1.0 + jnp.tanh(c * (u + 0.044715 * u ** 3))
    return h + (0.5 * u * t) @ p["w2"]


def main():
    print("jax", jax.__version__, jax.devices(), flush=True)
    p = weights(jax.random.PRNGKey(0))
    jax.block_until_ready(block(p))  # compiles every module outside the trace
    d = tempfile.mkdtemp()
    with jax.profiler.trace(d):
        for _ in range(ITERS):
            out = block(p)
        jax.block_until_ready(out)
    (f,) = glob.glob(f"{d}/**/*.xplane.pb", recursive=True)
    shutil.copy(f, f"{OUT}/eager_block.xplane.pb")
    print("eager_block", float(out.astype(jnp.float32).mean()), os.path.getsize(f), "bytes")


if __name__ == "__main__":
    main()
