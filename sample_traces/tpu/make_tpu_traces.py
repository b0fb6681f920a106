"""Make the real TPU traces in this folder (run on a TPU; writes VARIANT.xplane.pb into $OUT).

A small decoder-only transformer training step, profiled with jax.profiler.trace after compiling:
remat (each layer under jax.checkpoint), flash (the same with Pallas TPU flash attention),
sync (host reads the loss every step), multi (grads and the optimizer update as two programs).
"""
import glob
import os
import shutil
import sys
import tempfile
from functools import partial

import jax
import jax.numpy as jnp

OUT = os.environ.get("OUT", ".")
L, D, H, F, V, B, S, STEPS = 4, 1024, 8, 4096, 4096, 8, 512, 4
HD = D // H
try:
    from jax.experimental.pallas.ops.tpu.flash_attention import flash_attention
except ImportError:
    flash_attention = None


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


def attention(q, k, v, flash):  # q,k,v: [B,H,S,HD]
    if flash:
        return flash_attention(q, k, v, causal=True, sm_scale=HD ** -0.5)
    s = jnp.einsum("bhqd,bhkd->bhqk", q, k).astype(jnp.float32) * HD ** -0.5
    s = jnp.where(jnp.tril(jnp.ones((S, S), bool)), s, -1e30)
    return jnp.einsum("bhqk,bhkd->bhqd", jax.nn.softmax(s, -1).astype(q.dtype), v)


def layer(p, x, flash):
    qkv = norm(x) @ p["qkv"]
    q, k, v = (t.reshape(B, S, H, HD).transpose(0, 2, 1, 3) for t in jnp.split(qkv, 3, -1))
    a = attention(q, k, v, flash).transpose(0, 2, 1, 3).reshape(B, S, D)
    x = x + a @ p["o"]
    return x + jax.nn.gelu(norm(x) @ p["up"]) @ p["down"]


def loss_fn(params, tok, flash):
    x = params["emb"][tok[:, :-1]]
    for p in params["layers"]:
        x = jax.checkpoint(partial(layer, flash=flash))(p, x)
    logits = (norm(x) @ params["out"]).astype(jnp.float32)
    lp = jax.nn.log_softmax(logits, -1)
    return -jnp.mean(jnp.take_along_axis(lp, tok[:, 1:, None], -1))


@partial(jax.jit, static_argnums=2, donate_argnums=0)
def train_step(params, tok, flash):
    loss, g = jax.value_and_grad(loss_fn)(params, tok, flash)
    return jax.tree.map(lambda w, d: w - 1e-3 * d, params, g), loss


grads = jax.jit(jax.value_and_grad(partial(loss_fn, flash=False)))


@partial(jax.jit, donate_argnums=(0, 2))
def adam(params, g, m):
    m = jax.tree.map(lambda a, b: 0.9 * a + 0.1 * b.astype(jnp.float32), m, g)
    return jax.tree.map(lambda w, a: (w - 1e-3 * jnp.sign(a)).astype(w.dtype), params, m), m


def run(variant):
    key = jax.random.PRNGKey(0)
    params = init(key)
    tok = jax.random.randint(key, (B, S + 1), 0, V)
    flash = variant == "flash"
    m = jax.tree.map(lambda w: jnp.zeros(w.shape, jnp.float32), params)

    def step(params, m):
        if variant == "multi":
            loss, g = grads(params, tok)
            params, m = adam(params, g, m)
        else:
            params, loss = train_step(params, tok, flash)
        if variant == "sync":
            float(loss)
        return params, m, loss

    for _ in range(2):  # compile and warm up outside the trace
        params, m, loss = step(params, m)
    jax.block_until_ready(loss)
    d = tempfile.mkdtemp()
    with jax.profiler.trace(d):
        for i in range(STEPS):
            with jax.profiler.StepTraceAnnotation("train", step_num=i):
                params, m, loss = step(params, m)
        jax.block_until_ready((params, loss))
    (f,) = glob.glob(f"{d}/**/*.xplane.pb", recursive=True)
    shutil.copy(f, f"{OUT}/{variant}.xplane.pb")
    print(variant, "loss", float(loss), os.path.getsize(f), "bytes", flush=True)


if __name__ == "__main__":
    print("jax", jax.__version__, jax.devices(), "flash_attention", flash_attention is not None)
    for v in sys.argv[1:] or ["remat", "flash", "sync", "multi"]:
        try:
            run(v)
        except Exception as e:  # one variant failing must not lose the others
            print(v, "FAILED", type(e).__name__, str(e)[:2000], flush=True)
