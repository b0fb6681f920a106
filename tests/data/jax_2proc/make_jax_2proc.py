"""Make the two-process JAX job behind ``tests/test_jobs.py``: one log directory per process.

Run with a JAX install (not a tracelens dependency), from the repository root:

    python3 -m venv /tmp/venv-jax && /tmp/venv-jax/bin/pip install jax
    /tmp/venv-jax/bin/python tests/data/jax_2proc/make_jax_2proc.py

It starts two processes of one ``jax.distributed`` job on this machine (gloo CPU collectives,
two virtual CPU devices each, coordinator on 127.0.0.1), each profiling the same three
``StepTraceAnnotation`` steps of a data-parallel step into its own log directory, ``p0/`` and
``p1/`` beside this script: ``p<N>/plugins/profile/<timestamp>/<hostname>.xplane.pb``. Both
files carry the same host name and program and overlapping profile windows; only the
``process_id`` plane stat tells the processes apart.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def worker(pid: int, out: str) -> None:
    os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=2"
    import jax
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize("127.0.0.1:12355", num_processes=2, process_id=pid)
    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P

    mesh = Mesh(np.array(jax.devices()), ("d",))

    @jax.jit
    def step(w, x):
        g = jax.grad(lambda w: jnp.mean(jnp.tanh(x @ w) ** 2))(w)
        return w - 0.01 * g

    w = jax.device_put(jnp.ones((256, 256)) * 0.01, NamedSharding(mesh, P()))
    x = jax.make_array_from_callback(
        (1024, 256), NamedSharding(mesh, P("d")),
        lambda idx: np.ones((idx[0].stop - idx[0].start, 256), np.float32))
    step(w, x).block_until_ready()  # compiled before the trace
    jax.profiler.start_trace(out)
    for i in range(3):
        with jax.profiler.StepTraceAnnotation("train", step_num=i):
            w = step(w, x)
            w.block_until_ready()
    jax.profiler.stop_trace()


def main() -> None:
    if len(sys.argv) == 3:
        worker(int(sys.argv[1]), sys.argv[2])
        return
    for p in ("p0", "p1"):
        shutil.rmtree(HERE / p, ignore_errors=True)
    procs = [subprocess.Popen([sys.executable, __file__, str(i), str(HERE / f"p{i}")])
             for i in range(2)]
    if any(p.wait() for p in procs):
        sys.exit("a worker failed")
    print(sorted(str(p.relative_to(HERE)) for p in HERE.rglob("*.xplane.pb")))


if __name__ == "__main__":
    main()
