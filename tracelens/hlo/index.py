"""Index of a trace's HLO: instructions by (host, program id, instruction name).

A kernel's ``op`` (XSpace ``hlo_op``) names an instruction of the module whose
``HloModuleProto.id`` equals the kernel's ``program_id`` (hlo.md §0.3). Module names repeat
within a trace (``jit_dot`` six times in the MI300X GEMM trace), so the join never uses them.
Only modules some event references are decoded. HLO text dumps add modules by program id for
every host that has none of its own.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

import polars as pl

from tracelens.loading.formats import decode_hlo, read_hlo_text
from tracelens.core.hlo_model import Computation, Instruction, Module
from tracelens.core.model import Notice, shown_program_id


@functools.lru_cache(maxsize=64)
def decoded_module(blob: bytes, program_id: int) -> Module | Exception:
    """One HloProto decoded once per process: hosts of one job carry the same programs, in one
    file and across the host files a process reads (the engine maps many hosts per process).
    Modules are read-only once built, so they are shared."""
    try:
        return decode_hlo(blob, program_id=program_id)
    except Exception as exc:  # a damaged module is that module's problem
        return exc


@dataclass
class HloIndex:
    modules: dict[tuple[str | None, int], Module] = field(default_factory=dict)
    problems: list[Notice] = field(default_factory=list)
    _by_name: dict[tuple[str | None, int], dict[str, tuple[Computation, Instruction]]] = \
        field(default_factory=dict)

    @classmethod
    def from_frames(cls, modules: pl.DataFrame, wanted: pl.DataFrame | None = None,
                    text_dumps: Iterable[str | Path] = ()) -> "HloIndex":
        """Decode ``trace.modules`` rows (only the (host, program_id) pairs in ``wanted`` when
        given) and parse the text dumps."""
        index = cls()
        rows = modules.filter(pl.col("program_id").is_not_null())
        if wanted is not None:
            rows = rows.join(wanted.select("host", "program_id").unique(),
                             on=["host", "program_id"], how="semi")
        for host, pid, name, blob in rows.select("host", "program_id", "module",
                                                 "hlo_proto").iter_rows():
            found = decoded_module(blob, pid)
            if isinstance(found, Exception):
                index.problems.append(Notice.of(
                    "cost.hlo_undecodable", "HLO of module {module}({program_id}) on {host} "
                    "could not be decoded ({error}: {why})", module=name,
                    program_id=shown_program_id(pid),
                    host=host, error=type(found).__name__, why=str(found)))
            else:
                index.modules[(host, pid)] = found
        for path in text_dumps:
            index.add_text_dump(path)
        return index

    def add_text_dump(self, path: str | Path, program_id: int | None = None) -> None:
        try:
            module = read_hlo_text(path, program_id)
        except (OSError, ValueError) as exc:
            self.problems.append(Notice.of("cost.dump_unreadable", "HLO text dump {path} could "
                                           "not be read ({why})", path=str(path), why=str(exc)))
            return
        if module.program_id is None:
            self.problems.append(Notice.of("cost.dump_no_program_id", "HLO text dump {path}: no "
                                           "program id (name it module_<id>.*.txt or pass "
                                           "program_id)", path=str(path)))
            return
        self.add(module, host=None)

    def add(self, module: Module, host: str | None = None) -> None:
        """Add a module; ``host=None`` serves every host lacking that program id."""
        self.modules[(host, module.program_id)] = module

    def module(self, host: str | None, program_id: int) -> Module | None:
        return self.modules.get((host, program_id)) or self.modules.get((None, program_id))

    def fusion_root(self, host: str | None, program_id: int, name: str) -> str | None:
        """The opcode at the root of the computation the fusion ``name`` calls: a
        multi-output fusion's (a ``tuple`` root) is ``reduce``/``reduce-window`` when one of
        its outputs is, else ``tuple``; None when the instruction, its body or root is not
        in the HLO."""
        found = self.lookup(host, program_id, name)
        if found is None or not found[2].called:
            return None
        module, _, inst = found
        body = module.computations.get(inst.called[0])
        root = body.root_instruction if body is not None else None
        if root is None:
            return None
        if root.opcode != "tuple":
            return root.opcode
        outs = {body.instructions[o].opcode for o in root.operands if o in body.instructions}
        return next((r for r in ("reduce", "reduce-window") if r in outs), "tuple")

    def lookup(self, host: str | None, program_id: int,
               name: str) -> tuple[Module, Computation, Instruction] | None:
        """The instruction a kernel's ``op`` names: in the entry computation first, then any
        other non-fusion computation (while bodies, calls); names are unique per module."""
        key = (host, program_id) if (host, program_id) in self.modules else (None, program_id)
        module = self.modules.get(key)
        if module is None:
            return None
        names = self._by_name.get(key)
        if names is None:
            names = {}
            entry = module.computations.get(module.entry)
            comps = ([entry] if entry else []) + [c for c in module.computations.values()
                                                   if c is not entry and not c.is_fusion]
            for comp in comps:
                for inst_name, inst in comp.instructions.items():
                    names.setdefault(inst_name, (comp, inst))
            self._by_name[key] = names
        found = names.get(name)
        return (module, *found) if found else None
