"""Make the real counterfactual runs in this folder: families of real JAX runs that differ by
one planted cause, each run profiled with ``jax.profiler`` and its measured step times written
beside its trace.

Usage (JAX is not a tracelens dependency; run in a venv that has it)::

    python3 make_runs.py --backend tpu  --out DIR   # one TPU chip: the host and loop families
    python3 make_runs.py --backend cpu1 --out DIR   # XLA:CPU, one device: the same families
    python3 make_runs.py --backend cpu8 --out DIR   # XLA:CPU, 8 devices: the collective families
    (--small: tiny shapes, for a dry run; FAMILY ... : only those families)

Each run writes ``DIR/<family>/<backend>_<variant>.xplane.pb`` and ``...facts.json``: the
variant, what was planted, the counterpart run (the same program without the cause), the
shapes, and the measured step times. A step's time is the wall time between the completions of
consecutive steps (a watcher thread calls ``block_until_ready`` on each step's output and takes
``time.perf_counter()``; the first step counts from the loop's start), so runs that never block
the dispatching thread are timed the same way as runs that do. Each run: 2 warm-up steps
(compiles), ``STEPS`` untimed-by-profiler steps (``untraced``), then ``STEPS`` steps inside
``jax.profiler`` (``traced``; the trace holds exactly these), each inside
``jax.profiler.StepTraceAnnotation("train", step_num=i)``. The Python tracer is off
(``python_tracer_level=0``) to keep the files small.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from typing import Any, Callable

STEPS = 12
WARM = 2

p = argparse.ArgumentParser()
p.add_argument("--backend", choices=("tpu", "cpu1", "cpu8"), required=True)
p.add_argument("--out", required=True)
p.add_argument("--small", action="store_true")
p.add_argument("families", nargs="*")
ARGS = p.parse_args()
if ARGS.backend.startswith("cpu"):
    os.environ["JAX_PLATFORMS"] = "cpu"
    if ARGS.backend == "cpu8":
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "")
                                   + " --xla_force_host_platform_device_count=8").strip()

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

try:
    from jax import shard_map
except ImportError:  # JAX before 0.8
    from jax.experimental.shard_map import shard_map  # type: ignore[no-redef]
from jax.sharding import Mesh, NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

BACKEND = ARGS.backend
TPU = BACKEND == "tpu"
SMALL = ARGS.small
DT = jnp.bfloat16 if TPU else jnp.float32
# the compute-bound chain: x [M, D] through L layers of tanh(x @ W)
if TPU:
    M, D, L = 4096, 4096, 6          # ~0.83 ms a matmul at ~165 TFLOP/s: ~5 ms a step
elif SMALL:
    M, D, L = 128, 128, 4
else:
    M, D, L = 512, 512, 8
PAUSE_S = 0.002 if SMALL else 0.005   # the host pause
HOST_MS = 2.0 if SMALL else 4.0       # the host's own work per step in host_sync


def facts_base() -> dict[str, Any]:
    return {"backend": BACKEND, "jax": jax.__version__,
            "devices": [str(d) for d in jax.devices()],
            "device_kind": jax.devices()[0].device_kind, "python": platform.python_version(),
            "script": "sample_traces/real_runs/make_runs.py",
            "command": f"python3 make_runs.py --backend {BACKEND} --out DIR"
                       + (" --small" if SMALL else ""),
            "steps": STEPS, "warmup_steps": WARM}


def stats(times: list[float]) -> dict[str, Any]:
    ms = [t * 1e3 for t in times]
    s = sorted(ms)
    return {"step_ms": [round(x, 4) for x in ms], "median_ms": round(statistics.median(ms), 4),
            "min_ms": round(s[0], 4), "max_ms": round(s[-1], 4),
            "stdev_ms": round(statistics.stdev(ms), 4) if len(ms) > 1 else 0.0}


def timed(body: Callable, state: Any, n: int, blocking: bool) -> tuple[list[float], Any]:
    """Run ``n`` steps of ``body(i, state) -> (state, out)``; a step's time is the gap between
    the completions of consecutive steps' ``out``. A ``blocking`` body waits for its own
    ``out``, so its step ends when it returns; any other keeps one step in flight: after
    dispatching step i the loop waits for step i-1's ``out`` (the device has step i queued
    meanwhile), and that wait's end is step i-1's completion."""
    ends: list[float] = []
    prev = None
    t0 = time.perf_counter()
    for i in range(n):
        with jax.profiler.StepTraceAnnotation("train", step_num=i):
            state, out = body(i, state)
            if blocking:
                ends.append(time.perf_counter())
            elif prev is not None:
                jax.block_until_ready(prev)
                ends.append(time.perf_counter())
        prev = out
    if not blocking:
        jax.block_until_ready(prev)
        ends.append(time.perf_counter())
    e = [t0] + ends
    return [b - a for a, b in zip(e, e[1:])], state


def run(family: str, variant: str, planted: str, counterpart: str | None,
        setup: Callable[[], Any], body: Callable, blocking: bool, **extra: Any) -> None:
    """Warm up, time ``STEPS`` steps, then time ``STEPS`` more inside the profiler; write the
    trace and its facts."""
    out_dir = os.path.join(ARGS.out, family)
    os.makedirs(out_dir, exist_ok=True)
    name = f"{BACKEND}_{variant}"
    state = setup()
    for i in range(WARM):
        state, o = body(i, state)
        jax.block_until_ready(o)
    untraced, state = timed(body, state, STEPS, blocking)
    d = tempfile.mkdtemp()
    opts = jax.profiler.ProfileOptions()
    opts.python_tracer_level = 0
    jax.profiler.start_trace(d, profiler_options=opts)
    traced, state = timed(body, state, STEPS, blocking)
    jax.profiler.stop_trace()
    (f,) = glob.glob(f"{d}/**/*.xplane.pb", recursive=True)
    dest = os.path.join(out_dir, name + ".xplane.pb")
    shutil.copy(f, dest)
    shutil.rmtree(d)
    facts = facts_base() | {"family": family, "variant": variant, "planted": planted,
                            "counterpart": f"{BACKEND}_{counterpart}" if counterpart else None,
                            "traced": stats(traced), "untraced": stats(untraced),
                            "timing": "blocking" if blocking else "one step in flight"} | extra
    with open(os.path.join(out_dir, name + ".facts.json"), "w") as fh:
        json.dump(facts, fh, indent=1)
    print(f"{family:22s} {name:22s} traced median {facts['traced']['median_ms']:9.3f} ms "
          f"[{facts['traced']['min_ms']:.3f}-{facts['traced']['max_ms']:.3f}] untraced "
          f"{facts['untraced']['median_ms']:9.3f} ms  {os.path.getsize(dest)} bytes", flush=True)


# ---------------------------------------------------------------- one device (TPU or CPU)

def weights(n: int = L, d: int = D) -> Any:
    k = jax.random.split(jax.random.PRNGKey(0), n)
    return jnp.stack([(jax.random.normal(kk, (d, d), jnp.float32) * d ** -0.5).astype(DT)
                      for kk in k])


def chain(ws: Any, x: Any) -> Any:
    """L layers of tanh(x @ W), unrolled under jit."""
    for i in range(ws.shape[0]):
        x = jnp.tanh(x @ ws[i])
    return x


step = jax.jit(chain)


@jax.jit
def step_loss(ws: Any, x: Any) -> tuple[Any, Any]:
    y = chain(ws, x)
    return y, jnp.mean(y.astype(jnp.float32))


@jax.jit
def step_input(ws: Any, x: Any, batch: Any) -> Any:
    return chain(ws, x + batch.astype(DT))


def x0() -> Any:
    return jax.random.normal(jax.random.PRNGKey(1), (M, D), jnp.float32).astype(DT)


def host_pause() -> None:
    """The host sleeps PAUSE_S after each step's result is ready; the counterpart does not."""
    planted = f"time.sleep({PAUSE_S}) on the host after each step's block_until_ready"
    ws = weights()

    def body(pause: bool) -> Callable:
        def b(i: int, x: Any) -> tuple[Any, Any]:
            x = step(ws, x)
            x.block_until_ready()
            if pause:
                time.sleep(PAUSE_S)
            return x, x
        return b

    run("host_pause", "pause", planted, "nopause", x0, body(True), True, pause_s=PAUSE_S,
        shapes=dict(M=M, D=D, L=L, dtype=str(DT.dtype if hasattr(DT, "dtype") else DT)))
    run("host_pause", "nopause", "nothing (the same loop without the pause)", None, x0,
        body(False), True, shapes=dict(M=M, D=D, L=L))


def calibrate_host_work(ms: float) -> int:
    """How many 64k-element numpy sorts take ``ms`` on this host."""
    a = np.random.default_rng(0).random(1 << 16)
    t = time.perf_counter()
    for _ in range(20):
        np.sort(a)
    one = (time.perf_counter() - t) / 20
    return max(1, round(ms / 1e3 / one))


def host_sync() -> None:
    """The host does HOST_MS of its own numpy work each step; with the sync it first reads the
    step's loss (float), so the device waits for that work; without, the host dispatches ahead
    and its work overlaps the device's."""
    ws = weights()
    n = calibrate_host_work(HOST_MS)
    a = np.random.default_rng(0).random(1 << 16)

    def host_work() -> None:
        for _ in range(n):
            np.sort(a)

    t = time.perf_counter()
    host_work()
    measured = (time.perf_counter() - t) * 1e3

    def body(sync: bool) -> Callable:
        def b(i: int, x: Any) -> tuple[Any, Any]:
            x, loss = step_loss(ws, x)
            if sync:
                float(loss)
            host_work()
            return x, x
        return b

    run("host_sync", "sync", f"float(loss) each step before {HOST_MS} ms of host numpy work",
        "nosync", x0, body(True), True, host_work_ms=round(measured, 3), host_sorts=n,
        shapes=dict(M=M, D=D, L=L))
    run("host_sync", "nosync", "nothing (the same host work, no sync: dispatch runs ahead)",
        None, x0, body(False), False, host_work_ms=round(measured, 3), host_sorts=n,
        shapes=dict(M=M, D=D, L=L))


def h2d() -> None:
    """Each step copies a host f32 [M, D] batch to the device (jax.device_put) and waits for
    the step; the counterpart's batch is already on the device."""
    ws = weights()
    batch = np.random.default_rng(0).standard_normal((M, D), dtype=np.float32)
    resident = jax.device_put(batch)

    def body(copy: bool) -> Callable:
        def b(i: int, x: Any) -> tuple[Any, Any]:
            bt = jax.device_put(batch) if copy else resident
            x = step_input(ws, x, bt)
            x.block_until_ready()
            return x, x
        return b

    run("h2d", "transfer", f"jax.device_put of a host f32 [{M}, {D}] batch "
        f"({batch.nbytes} bytes) each step", "resident", x0, body(True), True,
        h2d_bytes=batch.nbytes, shapes=dict(M=M, D=D, L=L))
    run("h2d", "resident", "nothing (the batch stays on the device)", None, x0, body(False), True,
        shapes=dict(M=M, D=D, L=L))


def eager() -> None:
    """Many small ops per step run op by op (eager dispatch) vs the same function under jit."""
    n, m, d = (16, 64, 128) if SMALL else (48, 256, 512)
    ws = weights(n, d)
    xs = jax.random.normal(jax.random.PRNGKey(1), (m, d), jnp.float32).astype(DT)

    def f(ws: Any, x: Any) -> Any:
        for i in range(n):
            x = jnp.tanh(x @ ws[i]) * 0.5 + x * 0.5
        return x

    jf = jax.jit(f)

    def body(fn: Callable) -> Callable:
        def b(i: int, x: Any) -> tuple[Any, Any]:
            x = fn(ws, x)
            x.block_until_ready()
            return x, x
        return b

    shapes = dict(layers=n, M=m, D=d, ops_per_layer=5)
    run("eager", "eager", f"{n} layers of tanh(x @ W) * 0.5 + x * 0.5 dispatched op by op "
        "(no jit)", "jit", lambda: xs, body(f), True, shapes=shapes)
    run("eager", "jit", "nothing (the same function under jax.jit)", None, lambda: xs, body(jf),
        True,
        shapes=shapes)


def scan() -> None:
    """The chain's layers under lax.scan (an HLO while loop) vs unrolled under jit: the same
    work, one nested in a loop op."""
    n = 4 if SMALL else 8
    ws = weights(n)

    @jax.jit
    def scanned(ws: Any, x: Any) -> Any:
        return jax.lax.scan(lambda x, w: (jnp.tanh(x @ w), None), x, ws)[0]

    def body(fn: Callable) -> Callable:
        def b(i: int, x: Any) -> tuple[Any, Any]:
            x = fn(ws, x)
            return x, x
        return b

    shapes = dict(M=M, D=D, layers=n)
    run("scan", "scan", f"lax.scan over {n} layers of tanh(x @ W) (a while loop in the HLO)",
        "unrolled", x0, body(scanned), False, shapes=shapes)
    run("scan", "unrolled", "nothing (the same layers unrolled under jit)", None, x0,
        body(step), False, shapes=shapes)


def scan_train() -> None:
    """A training step (value_and_grad and an SGD update) of the chain's layers under lax.scan
    vs unrolled: the scan's forward and backward are while loops whose bodies hold the
    matmuls (the case of a real scanned training step whose path read as idle)."""
    n = 4 if SMALL else 8
    ws = weights(n)

    def loss_scan(ws: Any, x: Any) -> Any:
        y = jax.lax.scan(lambda x, w: (jnp.tanh(x @ w), None), x, ws)[0]
        return jnp.mean(jnp.square(y.astype(jnp.float32)))

    def loss_unrolled(ws: Any, x: Any) -> Any:
        return jnp.mean(jnp.square(chain(ws, x).astype(jnp.float32)))

    def train(loss: Callable) -> Callable:
        @jax.jit
        def t(ws: Any, x: Any) -> tuple[Any, Any]:
            v, g = jax.value_and_grad(loss)(ws, x)
            return (ws - (1e-3 * g).astype(ws.dtype)), v
        return t

    def body(fn: Callable) -> Callable:
        def b(i: int, ws: Any) -> tuple[Any, Any]:
            ws, v = fn(ws, xs)
            return ws, ws
        return b

    xs = x0()
    shapes = dict(M=M, D=D, layers=n)
    run("scan_train", "scan", f"value_and_grad + SGD of {n} layers of tanh(x @ W) under "
        "lax.scan (while loops forward and backward)", "unrolled", lambda: ws,
        body(train(loss_scan)), False, shapes=shapes)
    run("scan_train", "unrolled", "nothing (the same layers unrolled under jit)", None,
        lambda: ws, body(train(loss_unrolled)), False, shapes=shapes)


# ---------------------------------------------------------------- 8 XLA:CPU devices

if SMALL:
    CM, CD, CL = 64, 128, 2
else:
    CM, CD, CL = 128, 1024, 4    # per device: CL matmuls of [CM, CD] x [CD, CD]
SLOW_DEV = 3


def mesh() -> Mesh:
    return Mesh(np.array(jax.devices()[:8]), ("d",))


def local_work(w: Any, x: Any, n: int = CL) -> Any:
    for _ in range(n):
        x = jnp.tanh(x @ w)
    return x


def sharded(fn: Callable, mesh_: Mesh, in_specs: Any, out_specs: Any) -> Callable:
    return jax.jit(shard_map(fn, mesh=mesh_, in_specs=in_specs, out_specs=out_specs))


def cpu8_inputs(mesh_: Mesh, rows: int = CM) -> tuple[Any, Any]:
    w = jax.device_put((jax.random.normal(jax.random.PRNGKey(0), (CD, CD)) * CD ** -0.5),
                       NamedSharding(mesh_, P()))
    x = jax.device_put(jax.random.normal(jax.random.PRNGKey(1), (8 * rows, CD)),
                       NamedSharding(mesh_, P("d")))
    return w, x


def async_body(fn: Callable, w: Any) -> Callable:
    def b(i: int, x: Any) -> tuple[Any, Any]:
        x = fn(w, x)
        return x, x
    return b


def straggler_extra() -> None:
    """shard_map over 8 devices: CL matmuls, then a psum. Device SLOW_DEV alone runs 2*CL more
    matmuls first (a lax.cond on axis_index); the counterpart has no cond."""
    m = mesh()
    w, x = cpu8_inputs(m)

    def f(extra: bool) -> Callable:
        def g(w: Any, x: Any) -> Any:
            y = local_work(w, x)
            if extra:
                y = jax.lax.cond(jax.lax.axis_index("d") == SLOW_DEV,
                                 lambda y: local_work(w, y, 2 * CL), lambda y: y, y)
            return jnp.tanh(x + jax.lax.psum(y, "d") * 0.125)
        return sharded(g, m, (P(), P("d")), P("d"))

    shapes = dict(rows_per_device=CM, D=CD, matmuls=CL, extra_matmuls=2 * CL,
                  slow_device=SLOW_DEV)
    run("straggler_extra", "extra", f"CPU{SLOW_DEV} alone runs {2 * CL} extra matmuls (a "
        "lax.cond on axis_index) before the psum", "balanced", lambda: x,
        async_body(f(True), w), False, shapes=shapes)
    run("straggler_extra", "balanced", "nothing (no cond: every device the same work)", None,
        lambda: x, async_body(f(False), w), False, shapes=shapes)


def trips_loop(w: Any, x: Any, slow: int, dev: int) -> Any:
    """``local_work`` repeated in a fori_loop whose trip count is ``slow`` on device ``dev``
    and 1 elsewhere: the same op, longer on that device."""
    n = jnp.where(jax.lax.axis_index("d") == dev, slow, 1)
    return jax.lax.fori_loop(0, n, lambda i, y: local_work(w, y), x)


def straggler_slow() -> None:
    """The same program on every device (a while loop of CL matmuls, then a psum); on device
    SLOW_DEV the loop takes 3 trips, elsewhere 1: the same op, 3x as long there. The
    counterpart is the same program with 1 trip everywhere."""
    m = mesh()
    w, x = cpu8_inputs(m)

    def f(slow: int) -> Callable:
        def g(w: Any, x: Any) -> Any:
            y = trips_loop(w, x, slow, SLOW_DEV)
            return jnp.tanh(x + jax.lax.psum(y, "d") * 0.125)
        return sharded(g, m, (P(), P("d")), P("d"))

    shapes = dict(rows_per_device=CM, D=CD, matmuls=CL, slow_trips=3, slow_device=SLOW_DEV)
    run("straggler_slow", "slow", f"CPU{SLOW_DEV}'s while loop (the same op on every device) "
        "runs 3 trips, the others' 1, before the psum", "even", lambda: x,
        async_body(f(3), w), False, shapes=shapes)
    run("straggler_slow", "even", "nothing (1 trip on every device: the same program)", None,
        lambda: x, async_body(f(1), w), False, shapes=shapes)


def collective() -> None:
    """A psum of a large buffer that depends on the step's compute (exposed), the same psum of
    a buffer the compute does not touch (free to overlap), and the program without the psum."""
    m = mesh()
    w, x = cpu8_inputs(m)
    big = (256, 1024) if SMALL else (1024, 2048)
    bufs = jax.device_put(jnp.ones((8 * big[0], big[1]), jnp.float32),
                          NamedSharding(m, P("d")))

    def f(mode: str) -> Callable:
        def g(w: Any, x: Any, b: Any) -> tuple[Any, Any]:
            y = local_work(w, x)
            if mode == "exposed":
                b = jax.lax.psum(b + jnp.mean(y), "d") * 0.125
            elif mode == "overlapped":
                b = jax.lax.psum(b, "d") * 0.125
            else:
                b = b + jnp.mean(y) * 0.0
            return jnp.tanh(y), b
        return sharded(g, m, (P(), P("d"), P("d")), (P("d"), P("d")))

    def body(fn: Callable) -> Callable:
        def bd(i: int, s: Any) -> tuple[Any, Any]:
            x, b = fn(w, *s)
            return (x, b), (x, b)
        return bd

    shapes = dict(rows_per_device=CM, D=CD, matmuls=CL, psum_shape_per_device=list(big),
                  psum_bytes_per_device=big[0] * big[1] * 4)
    run("collective", "exposed", f"a psum of f32{list(big)} per device that waits for the "
        "step's matmuls (through their mean)", "nocomm", lambda: (x, bufs),
        body(f("exposed")), False, shapes=shapes)
    run("collective", "overlapped", "the same psum of a buffer the matmuls do not touch (XLA "
        "may run it beside them)", "nocomm", lambda: (x, bufs), body(f("overlapped")), False,
        shapes=shapes)
    run("collective", "nocomm", "nothing (the psum left out)", None, lambda: (x, bufs),
        body(f("nocomm")), False, shapes=shapes)


def pipeline() -> None:
    """8 pipeline stages (one a device), MB microbatches through them by ppermute, GPipe-like:
    every tick each stage runs its layer on what it holds and passes it on. Stage SLOW_STAGE's
    layer loop takes 2 trips (the same op, twice as long); the counterpart's 1."""
    m = mesh()
    mb = 4 if SMALL else 8
    rows = CM // 2
    slow_stage = 5
    w = jax.device_put((jax.random.normal(jax.random.PRNGKey(0), (CD, CD)) * CD ** -0.5),
                       NamedSharding(m, P()))
    xs = jax.device_put(jax.random.normal(jax.random.PRNGKey(1), (8 * mb, rows, CD)),
                        NamedSharding(m, P("d")))

    def f(slow: int) -> Callable:
        def g(w: Any, xs: Any) -> Any:
            idx = jax.lax.axis_index("d")
            buf = jnp.zeros_like(xs[0])
            outs = []
            for t in range(mb + 7):
                inp = jnp.where(idx == 0, xs[min(t, mb - 1)], buf)
                h = trips_loop(w, inp, slow, slow_stage)
                if t >= 7:
                    outs.append(h)
                buf = jax.lax.ppermute(h, "d", [(i, i + 1) for i in range(7)])
            return jnp.stack(outs) * 0.5 + xs * 0.5
        return sharded(g, m, (P(), P("d")), P("d"))

    shapes = dict(stages=8, microbatches=mb, rows=rows, D=CD, matmuls_per_stage=CL,
                  slow_stage=slow_stage, slow_trips=2, ticks=mb + 7)
    run("pipeline", "slowstage", f"stage {slow_stage} (CPU{slow_stage})'s layer loop runs 2 "
        "trips, the others' 1", "even", lambda: xs, async_body(f(2), w), False, shapes=shapes)
    run("pipeline", "even", "nothing (1 trip on every stage)", None, lambda: xs,
        async_body(f(1), w), False, shapes=shapes)


def alltoall() -> None:
    """An MoE-like step: all_to_all dispatch of each device's tokens to 8 experts (one a
    device), the expert's layer loop, all_to_all back. Expert HOT_DEV's loop runs 4 trips (4x
    the tokens' work; all_to_all chunks are equal-sized in JAX, so the imbalance is in the
    expert's work); the counterpart's 1."""
    m = mesh()
    hot = 0
    w, x = cpu8_inputs(m)

    def f(slow: int) -> Callable:
        def g(w: Any, x: Any) -> Any:
            a = jax.lax.all_to_all(x, "d", 0, 0, tiled=True)
            h = trips_loop(w, a, slow, hot)
            return jnp.tanh(x + jax.lax.all_to_all(h, "d", 0, 0, tiled=True))
        return sharded(g, m, (P(), P("d")), P("d"))

    shapes = dict(rows_per_device=CM, D=CD, matmuls=CL, hot_expert=hot, hot_trips=4)
    run("alltoall", "imbalanced", f"expert {hot} (CPU{hot})'s loop between the two all_to_alls "
        "runs 4 trips, the others' 1", "balanced", lambda: x, async_body(f(4), w), False,
        shapes=shapes)
    run("alltoall", "balanced", "nothing (1 trip on every expert)", None, lambda: x,
        async_body(f(1), w), False, shapes=shapes)


ONE = {"host_pause": host_pause, "host_sync": host_sync, "h2d": h2d, "eager": eager,
       "scan": scan, "scan_train": scan_train}
EIGHT = {"straggler_extra": straggler_extra, "straggler_slow": straggler_slow,
         "collective": collective, "pipeline": pipeline, "alltoall": alltoall}

if __name__ == "__main__":
    table = EIGHT if BACKEND == "cpu8" else ONE
    if BACKEND == "cpu1":
        table = {k: v for k, v in table.items() if k != "h2d"}  # CPU device_put: no copy
    print("jax", jax.__version__, jax.devices(), flush=True)
    for name in ARGS.families or list(table):
        t = time.perf_counter()
        try:
            table[name]()
        except Exception as e:  # one family failing must not lose the others
            print(name, "FAILED", type(e).__name__, str(e)[:2000], flush=True)
        print(f"  ({name}: {time.perf_counter() - t:.1f} s)", flush=True)
    sys.exit(0)
