"""Make the real TPU memory traces in this folder (run on a TPU; writes VARIANT.xplane.pb and
VARIANT.stats.json into $OUT).

A small decoder-only transformer trained for 3 steps under ``jax.profiler.trace``, with the
forward and backward passes as two jitted programs: the forward returns the VJP's residuals
(the activations kept for the backward), so they are device buffers the allocator records
(``MemoryAllocation``/``MemoryDeallocation`` events) instead of a program's temporaries.
Nothing is donated, so every step allocates its outputs and frees its inputs.

Variants: ``plain`` (batch 8), ``remat`` (each layer under ``jax.checkpoint``: only the layer
inputs are kept), ``bigbatch`` (``plain`` with batch 24), ``offload`` (``plain`` with a
momentum optimizer whose f32 state lives in the host's pinned memory, moved to the device for
the update and back). The parameters are made inside the trace (their allocations are in it);
the programs are compiled before it.
"""
import glob
import json
import os
import shutil
import sys
import tempfile
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

OUT = os.environ.get("OUT", ".")
L, D, H, F, V, S, STEPS = 4, 1024, 8, 4096, 4096, 512, 3
HD = D // H


def init(key):
    ks = jax.random.split(key, 2 + 4 * L)

    def n(k, s):
        return (jax.random.normal(k, s, jnp.float32) * s[0] ** -0.5).astype(jnp.bfloat16)

    layers = [dict(qkv=n(ks[2 + 4 * i], (D, 3 * D)), o=n(ks[3 + 4 * i], (D, D)),
                   up=n(ks[4 + 4 * i], (D, F)), down=n(ks[5 + 4 * i], (F, D))) for i in range(L)]
    return dict(emb=n(ks[0], (V, D)), out=n(ks[1], (D, V)), layers=layers)


def norm(x):
    x32 = x.astype(jnp.float32)
    return (x32 * jax.lax.rsqrt(jnp.mean(x32 * x32, -1, keepdims=True) + 1e-6)).astype(x.dtype)


def layer(p, x):
    b = x.shape[0]
    qkv = norm(x) @ p["qkv"]
    q, k, v = (t.reshape(b, S, H, HD).transpose(0, 2, 1, 3) for t in jnp.split(qkv, 3, -1))
    s = jnp.einsum("bhqd,bhkd->bhqk", q, k).astype(jnp.float32) * HD ** -0.5
    s = jnp.where(jnp.tril(jnp.ones((S, S), bool)), s, -1e30)
    a = jnp.einsum("bhqk,bhkd->bhqd", jax.nn.softmax(s, -1).astype(q.dtype), v)
    x = x + a.transpose(0, 2, 1, 3).reshape(b, S, D) @ p["o"]
    return x + jax.nn.gelu(norm(x) @ p["up"]) @ p["down"]


def loss_fn(params, tok, remat):
    x = params["emb"][tok[:, :-1]]
    for p in params["layers"]:
        x = (jax.checkpoint(layer) if remat else layer)(p, x)
    logits = (norm(x) @ params["out"]).astype(jnp.float32)
    lp = jax.nn.log_softmax(logits, -1)
    return -jnp.mean(jnp.take_along_axis(lp, tok[:, 1:, None], -1))


@partial(jax.jit, static_argnums=2)
def forward(params, tok, remat):
    loss, vjp = jax.vjp(lambda p: loss_fn(p, tok, remat), params)
    return loss, vjp  # vjp is a pytree of the residuals: device buffers of their own


@jax.jit
def backward_update(params, vjp):
    (g,) = vjp(jnp.ones((), jnp.float32))
    return jax.tree.map(lambda w, d: w - 1e-3 * d, params, g)


def sharding(kind):
    return jax.sharding.SingleDeviceSharding(jax.devices()[0], memory_kind=kind)


@jax.jit
def momentum_update(params, g, m):  # m arrives in pinned host memory and goes back there
    m = jax.device_put(m, sharding("device"))
    m = jax.tree.map(lambda a, b: 0.9 * a + 0.1 * b.astype(jnp.float32), m, g)
    new = jax.tree.map(lambda w, a: (w - 1e-3 * jnp.sign(a)).astype(w.dtype), params, m)
    return new, jax.device_put(m, sharding("pinned_host"))


@jax.jit
def grads_of(params, vjp):
    (g,) = vjp(jnp.ones((), jnp.float32))
    return g


def run(variant):
    b = 24 if variant == "bigbatch" else 8
    remat = variant == "remat"
    rng = np.random.default_rng(0)
    batches = [rng.integers(0, V, (b, S + 1), dtype=np.int32) for _ in range(STEPS)]
    init_jit = jax.jit(init)

    offload = variant == "offload"

    def steps():
        params = init_jit(jax.random.PRNGKey(0))
        if offload:
            m = jax.device_put(jax.tree.map(lambda w: np.zeros(w.shape, np.float32), params),
                               sharding("pinned_host"))
        for i in range(STEPS):
            with jax.profiler.StepTraceAnnotation("train", step_num=i):
                tok = jax.device_put(batches[i])
                loss, vjp = forward(params, tok, remat)
                if offload:
                    params, m = momentum_update(params, grads_of(params, vjp), m)
                else:
                    params = backward_update(params, vjp)
                del vjp, tok
        jax.block_until_ready((params, loss))
        return loss

    steps()  # compile outside the trace
    dev = jax.devices()[0]
    d = tempfile.mkdtemp()
    with jax.profiler.trace(d):
        loss = steps()
    (f,) = glob.glob(f"{d}/**/*.xplane.pb", recursive=True)
    shutil.copy(f, f"{OUT}/{variant}.xplane.pb")
    stats = dev.memory_stats() or {}
    with open(f"{OUT}/{variant}.stats.json", "w") as fh:
        json.dump({"jax": jax.__version__, "device": str(dev), "memory_stats": stats,
                   "loss": float(loss)}, fh, indent=1)
    print(variant, "loss", float(loss), os.path.getsize(f), "bytes",
          {k: stats.get(k) for k in ("peak_bytes_in_use", "bytes_limit", "bytes_in_use")},
          "programs compiled", forward._cache_size(), backward_update._cache_size(),
          {str(k): v for k, v in (jax.devices()[0].memory_stats() or {}).items()
           if "host" in str(k)}, flush=True)


if __name__ == "__main__":
    print("jax", jax.__version__, jax.devices(), flush=True)
    for v in sys.argv[1:] or ["plain", "remat", "bigbatch", "offload"]:
        try:
            run(v)
        except Exception as e:  # one variant failing must not lose the others
            print(v, "FAILED", type(e).__name__, str(e)[:2000], flush=True)
