"""The JAX op each HLO op came from: the ``op_name`` of its instruction's metadata
(``jit(train_step)/jvp(attn)/dot_general``), the name stack JAX writes when it lowers a program.

Unlike instruction names (``fusion.12``, ``custom-call.1``), which each compilation numbers
anew, and kernel names, which each backend and library chooses, the JAX op name is the same on
every backend that compiles one JAX program: ``compare`` matches a TPU run's ops with a GPU
run's by it (docs/compare.md). XProf's TPU op events carry it as their ``tf_op`` stat; GPU
traces write ``XlaModule:`` there, so it is read from the HLO both carry.

A fusion's own metadata is often empty (XLA:GPU's ``loop_convert_fusion`` of an ``add``): its
op is then the first named instruction found walking its body from the root through operands,
breadth first (the root's ``convert`` is unnamed, the ``add`` under it is ``jit(add)/add``).
"""

from __future__ import annotations

from collections import deque

import polars as pl

from tracelens.hlo.index import decoded_module
from tracelens.core.hlo_model import Computation, Instruction, Module

JAX_OP_SCHEMA = {"module": pl.String, "program_id": pl.Int64, "op": pl.String,
                 "jax_op": pl.String}


def _body_op(module: Module, body: Computation | None, seen: set[str]) -> str | None:
    """The first op name of ``body`` from its root through operands, breadth first, nested
    fusions' bodies included."""
    if body is None or body.name in seen:
        return None
    seen.add(body.name)
    queue, visited = deque([body.root]), {body.root}
    while queue:
        inst = body.instructions.get(queue.popleft())
        if inst is None:
            continue
        if inst.op_name:
            return inst.op_name
        if inst.opcode == "fusion" and inst.called:
            found = _body_op(module, module.computations.get(inst.called[0]), seen)
            if found:
                return found
        for o in inst.operands:
            if o not in visited:
                visited.add(o)
                queue.append(o)
    return None


def jax_op_of(module: Module, inst: Instruction) -> str | None:
    """The JAX op of one instruction kernels name (module doc); None when nothing in it is
    named."""
    if inst.op_name:
        return inst.op_name
    if inst.opcode == "fusion" and inst.called:
        return _body_op(module, module.computations.get(inst.called[0]), set())
    return None


def jax_op_table(modules: pl.DataFrame, wanted: pl.DataFrame | None = None) -> pl.DataFrame:
    """(module, program_id, op, jax_op) for every instruction of a non-fusion computation of
    the ``trace.modules`` programs (only the (module, program_id) pairs of ``wanted`` when
    given) whose JAX op is known. A module that does not decode adds nothing (its ops stay
    unknown); ``hlo`` says why."""
    if not modules.height:
        return pl.DataFrame(schema=JAX_OP_SCHEMA)
    rows = modules.filter(pl.col("program_id").is_not_null()
                          & pl.col("module").is_not_null()).select(
        "module", "program_id", "hlo_proto").unique(["module", "program_id", "hlo_proto"])
    if wanted is not None:
        rows = rows.join(wanted.select(pl.col("module").cast(pl.String), "program_id")
                         .unique(), on=["module", "program_id"], how="semi")
    out: dict[tuple[str, int, str], str] = {}
    for name, pid, blob in rows.sort("module", "program_id").iter_rows():
        module = decoded_module(blob, pid)
        if isinstance(module, Exception):
            continue
        for comp in module.computations.values():
            if comp.is_fusion:
                continue
            for inst_name, inst in comp.instructions.items():
                op = jax_op_of(module, inst)
                if op:
                    out.setdefault((name, pid, inst_name), op)
    return pl.DataFrame([(*k, v) for k, v in sorted(out.items())], schema=JAX_OP_SCHEMA,
                        orient="row")
