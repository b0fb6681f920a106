"""Read a compiled XLA program for *why* its communication costs what it does (``tracelens hlo``).

Static half of the HLO lens: every collective of a module with its size, groups, where it sits,
how often it runs per step and the compute scheduled behind it, and the findings that follow
from the HLO alone. The measured half (each finding's exposed time from the trace) is joined in
:mod:`tracelens.analyze.compute.hlo_findings`.

Facts (shared/reference/hlo.md): a ``while`` runs its body ``known_trip_count.n`` times
(``WhileLoopBackendConfig``), else the count :mod:`tracelens.hlo.tripcount` derives from its
condition (or unknown, with the reason); the condition is the callee whose root is ``pred[]``;
the module's
``schedule`` (``HloModuleProto`` field 7) lists each computation's instructions in run order, and
a text dump of a module marked ``is_scheduled=true`` prints them in that order. The program is
read as compiled: XLA:CPU computes bf16 in f32 and combines small all-reduces into one tuple
all-reduce, and the findings see what runs, not what the source said.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable

from tracelens.cost.groups import group_mode
from tracelens.cost.opcost import COLLECTIVES, instruction_cost
from tracelens.hlo.tripcount import derive, known_trip_count, while_parts
from tracelens.core.hlo_model import Computation, Instruction, Module
from tracelens.core.model import shown_program_id
from tracelens.results.encode import blank_as_null, converted, renamed, rounded

HIDDEN = {"json": False}

# Thresholds of the findings (README "tracelens hlo").
SMALL_BYTES = 1 << 20  # small-collectives: a collective moving less than 1 MiB per execution ...
SMALL_MIN_COUNT = 8    # ... counts when the program runs at least this many per step
WIDE_TYPES = ("f32", "f64", "c64", "c128")
NARROW_FLOATS = ("bf16", "f16")  # and every f8*/f6*/f4* type
# Ops that only move or relabel data: an upcast value keeps being one through them.
MOVES = ("copy", "transpose", "bitcast", "reshape")
# Instructions that launch no work: they never count as compute in an overlap window.
NO_WORK = ("parameter", "constant", "get-tuple-element", "tuple", "bitcast", "after-all",
           "partition-id", "replica-id", "add-dependency", "opt-barrier")
LOOP_CALLERS = ("while", "call", "conditional", "async-start")


def program_label(module: str, program_id: int | None) -> str:
    """``<module>(<program id>)`` with the id as the trace writes it (a TPU fingerprint is a
    uint64: :func:`tracelens.core.model.shown_program_id`); the module alone without an id."""
    return module if program_id is None else f"{module}({shown_program_id(program_id)})"


@dataclass(frozen=True, kw_only=True)
class Collective:
    """One collective of a program (an async pair is one collective, named by its start).
    Field order is the key order of ``tracelens hlo``'s JSON."""

    program_id: int | None = field(metadata=HIDDEN)
    module: str = field(metadata=HIDDEN)
    name: str
    opcode: str                      # base opcode: all-reduce, all-gather, ...
    dtype: str | None                # operand element type(s), "f32" or "f32,bf16"
    # per execution (message bytes: docs/cost-model.md#4-collectives-msg_bytes-group_size)
    bytes: int | None
    group_size: int | None
    is_async: bool = field(metadata=renamed("async"))
    done: str | None                 # the matching -done of an async start
    wrapped: str | None = None       # the collective inside an async-start's computation
    computation: str
    in_loop: bool
    loop: str | None                 # the innermost while instruction around it
    trip_count: int | None           # product of the enclosing loops' trip counts
    # why trip_count is None inside a loop (null in the JSON when it is not)
    trip_note: str = field(default="", metadata=converted(blank_as_null))
    executions_per_step: int | None  # None: a loop of unknown trip count or a conditional
    bytes_per_step: int | None
    spans_hosts: bool | None
    overlap_ops: int | None          # instructions with work scheduled between start and done
    overlap_flops: float | None
    overlap_bytes: float | None
    groups: tuple[tuple[int, ...], ...] | None
    operands: tuple[str, ...] = field(default=(), metadata=HIDDEN)
    # its reducer when XLA promoted its type (``*_promoted``)
    promoted: str | None = field(default=None, metadata=HIDDEN)

    @property
    def op_names(self) -> tuple[str, ...]:
        """Every name its kernels may carry as ``hlo_op``: start, done and, for an
        async-start, the wrapped instruction (XProf names the kernel after that one)."""
        return tuple(n for n in (self.name, self.done, self.wrapped) if n)


@dataclass(frozen=True)
class Finding:
    """A pattern in the compiled program, with its measured cost once joined to a trace.
    Field order is the key order of the JSON (``tracelens hlo``, ``summarize``)."""

    kind: str
    program: str
    program_id: int | None = field(metadata=converted(shown_program_id))
    instruction: str
    # every instruction it covers (small-collectives: all)
    instructions: tuple[str, ...] = field(default=(), kw_only=True)
    # the collective type it is about (None: several)
    opcode: str | None = field(default=None, kw_only=True)
    message: str
    bytes_per_step: int | None
    exposed_ns_per_step: float | None = field(default=None, metadata=rounded(3))
    # why exposed_ns_per_step is null, when it is (null in the JSON when it is not)
    exposed_note: str = field(default="", metadata=converted(blank_as_null))
    compilations: int = field(init=False)  # len(program_ids), at least 1
    # the programs (compilations of its module) it was found in, itself first when alone
    program_ids: tuple[int | None, ...] = field(default=(), metadata=converted(
        lambda ids: tuple(shown_program_id(i) for i in ids)))  # type: ignore[arg-type]
    executed: bool | None = None        # any of them ran in the trace (None: cannot tell)

    def __post_init__(self) -> None:
        object.__setattr__(self, "compilations", len(self.program_ids) or 1)


@dataclass(frozen=True, kw_only=True)
class ProgramLens:
    """One program's collectives and static findings (field order: the JSON's keys; the
    findings are written once, merged over compilations, by ``tracelens hlo``)."""

    module: str
    program_id: int | None = field(metadata=converted(shown_program_id))
    scheduled: bool
    executed: bool | None = None  # it has device events in the trace (None: cannot tell)
    notes: tuple[str, ...] = ()
    collectives: tuple[Collective, ...]
    findings: tuple[Finding, ...] = field(metadata=HIDDEN)


@dataclass(frozen=True)
class HostMap:
    """Which host each device id of a replica group is on. ``hosts == 1``: nothing can span
    hosts; ``host_of`` None with several hosts: unknown (the trace gives no device→host map)."""

    hosts: int | None = None
    host_of: Callable[[int], str | None] | None = field(default=None, compare=False)

    def spans(self, groups: list[list[int]] | None) -> bool | None:
        if self.hosts == 1:
            return False
        if self.host_of is None or groups is None:
            return None
        if not groups:  # every device of the job takes part
            return None if self.hosts is None else self.hosts > 1
        hosts = [{self.host_of(d) for d in g} for g in groups]
        if any(None in h for h in hosts):
            return None
        return any(len(h) > 1 for h in hosts)


def human_bytes(n: float | None) -> str:
    if n is None:
        return "unknown bytes"
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.4g} {unit}"
    return f"{int(n)} B"


def _narrow(dtype: str) -> bool:
    return dtype in NARROW_FLOATS or dtype.startswith(("f8", "f6", "f4"))


def collective_op(inst: Instruction, module: Module) -> tuple[str, bool, Instruction] | None:
    """(base opcode, async, the instruction carrying groups and operands) of a collective start
    or synchronous collective; None for anything else, -done halves included."""
    op = inst.opcode
    if op.endswith("-done") or op in ("async-done", "async-update"):
        return None
    if op == "async-start" and inst.called:
        body = module.computations.get(inst.called[0])
        root = body.root_instruction if body else None
        if root is not None and root.opcode.removesuffix("-start") in COLLECTIVES:
            return root.opcode.removesuffix("-start"), True, root
        return None
    base = op.removesuffix("-start")
    if base in COLLECTIVES and base not in ("send", "recv"):
        return base, op.endswith("-start"), inst
    if base in ("send", "recv"):
        return base, True, inst
    return None


@dataclass(frozen=True)
class _Context:
    executions: int | None  # per step; None when unknown
    trips: int | None       # product of loop trip counts (1 outside loops)
    loop: str | None        # innermost enclosing while
    in_loop: bool = False
    trip_note: str = ""     # why ``trips`` is None: the first loop of unknown count on the path


# (callee, runs per run of the caller or None, the while when it is a loop body, why unknown)
_Edge = tuple[str, int | None, str | None, str]


def _call_edges(module: Module, comp: Computation) -> list[_Edge]:
    """Each computation ``comp`` calls, with how often per run of ``comp``."""
    edges: list[_Edge] = []
    for inst in comp.instructions.values():
        if inst.opcode == "while":
            body = while_parts(inst, module)[1]
            if body:
                trips = derive(module, comp, inst)
                edges.append((body, trips.n, inst.name,
                              "" if trips.n is not None else f"{inst.name}: {trips.note}"))
        elif inst.opcode == "call":
            edges += [(c, 1, None, "") for c in inst.called]
        elif inst.opcode == "conditional":  # a branch runs 0 or 1 times: unknown
            edges += [(c, None, None, f"{inst.name}: a conditional branch") for c in inst.called]
    return [e for e in edges if e[0] in module.computations]


def loop_notes(module: Module) -> list[str]:
    """One line per reachable while without ``known_trip_count``: the count derived from its
    condition and how, or why it stays unknown."""
    notes = []
    for name in sorted(computation_contexts(module)):
        comp = module.computations[name]
        for inst in comp.instructions.values():
            if inst.opcode == "while" and known_trip_count(inst) is None:
                trips = derive(module, comp, inst)
                notes.append(f"loop {inst.name} has no known_trip_count; " + (
                    f"from its condition: {trips.note}" if trips.n is not None
                    else f"its trip count is unknown: {trips.note}"))
    return notes


def computation_contexts(module: Module) -> dict[str, _Context]:
    """How often each non-fusion computation reachable from the entry runs per program run:
    summed over every call path (XLA normally gives each call site its own clone)."""
    callers: dict[str, list[tuple[str, int | None, str | None, str]]] = {}
    seen, todo = {module.entry}, [module.entry]
    while todo:
        name = todo.pop()
        comp = module.computations.get(name)
        for callee, factor, loop, why in (_call_edges(module, comp) if comp else []):
            callers.setdefault(callee, []).append((name, factor, loop, why))
            if callee not in seen:
                seen.add(callee)
                todo.append(callee)
    out: dict[str, _Context] = {module.entry: _Context(1, 1, None)}

    def ctx(name: str, depth: int = 0) -> _Context:
        if name in out:
            return out[name]
        if depth > 64:  # HLO call graphs are acyclic; refuse to recurse on a hostile one
            return _Context(None, None, None)
        paths = []
        for caller, factor, loop, why in callers.get(name, []):
            c = ctx(caller, depth + 1)
            trips_unknown = (loop and factor is None) or c.trips is None
            paths.append(_Context(
                None if factor is None or c.executions is None else c.executions * factor,
                None if trips_unknown else c.trips * (factor if loop else 1),
                loop or c.loop, bool(loop) or c.in_loop,
                (c.trip_note or (why if loop else "")) if trips_unknown else ""))
        execs = [p.executions for p in paths]
        same_trips = len({p.trips for p in paths}) == 1
        out[name] = _Context(None if None in execs or not paths else sum(execs),
                             paths[0].trips if same_trips else None,
                             paths[0].loop if len({p.loop for p in paths}) == 1 else None,
                             any(p.in_loop for p in paths),
                             "its call paths have different trip counts" if not same_trips
                             else paths[0].trip_note if paths else "")
        return out[name]

    for name in sorted(seen):
        ctx(name)
    return out


def _device_groups(module: Module, base: Instruction) -> list[list[int]] | None:
    """The groups as device ids: in cross-replica-and-partition mode with several partitions
    they hold replica ids (each standing for all its partitions): unknown here."""
    mode = group_mode(base.channel_id, base.use_global_device_ids, base.opcode)
    if mode == "cross-replica-and-partition" and module.partition_count not in (None, 1):
        return None
    return base.replica_groups


def _dtype(module: Module, comp: Computation, base: Instruction) -> str | None:
    types: list[str] = []
    for shape in module.operand_shapes(base, comp):
        for leaf in shape.leaves():
            if leaf.dtype not in types:
                types.append(leaf.dtype)
    return ",".join(types) or None


def _done_of(comp: Computation) -> dict[str, Instruction]:
    """Per instruction name, the -done / async-update / async-done taking it as operand 0."""
    out: dict[str, Instruction] = {}
    for inst in comp.instructions.values():
        if inst.operands and (inst.opcode.endswith("-done")
                              or inst.opcode in ("async-update", "async-done")):
            out.setdefault(inst.operands[0], inst)
    return out


def _find_done(done_of: dict[str, Instruction], start: Instruction) -> Instruction | None:
    """The -done (or async-done, through async-updates) ending ``start``."""
    found = done_of.get(start.name)
    for _ in range(64):
        if found is None or found.opcode != "async-update":
            return found
        found = done_of.get(found.name)
    return None


def _window(module: Module, comp: Computation, order: list[str], position: dict[str, int],
            start: str, done: str) -> tuple[int, float | None, float | None] | None:
    """(instructions with work, their FLOPs, their bytes) scheduled strictly between start and
    done; FLOPs/bytes None when any of them is unknown; None without a schedule."""
    if start not in position or done not in position:
        return None
    i, j = position[start], position[done]
    ops = flops = nbytes = 0
    flops_known = bytes_known = True
    for name in order[i + 1:j]:
        inst = comp.instructions.get(name)
        if inst is None or inst.opcode in NO_WORK or collective_op(inst, module) is not None \
                or inst.opcode.endswith("-done") or inst.opcode in ("async-done",
                                                                     "async-update"):
            continue
        ops += 1
        cost = instruction_cost(module, comp, inst)
        if cost.flops is None:
            flops_known = False
        else:
            flops += cost.flops
        if cost.bytes is None:
            bytes_known = False
        else:
            nbytes += cost.bytes
    return ops, float(flops) if flops_known else None, float(nbytes) if bytes_known else None


def collectives(module: Module, schedule: dict[str, list[str]] | None,
                hosts: HostMap = HostMap()) -> list[Collective]:
    """Every collective of ``module`` reachable from its entry, in computation then schedule
    (else dependency) order."""
    out = []
    for comp_name, ctx in sorted(computation_contexts(module).items(),
                                 key=lambda kv: (kv[0] != module.entry, kv[0])):
        comp = module.computations[comp_name]
        order = (schedule or {}).get(comp_name)
        position = {n: k for k, n in enumerate(order or ())}
        done_of = _done_of(comp)
        for inst in comp.instructions.values():
            found = collective_op(inst, module)
            if found is None:
                continue
            opcode, is_async, base = found
            cost = instruction_cost(module, comp, inst)
            done = _find_done(done_of, inst) if is_async else None
            if is_async:
                window = _window(module, comp, order, position, inst.name, done.name) \
                    if order and done is not None else None
                ops, flops, nbytes = window if window else (None, None, None)
            else:
                ops, flops, nbytes = 0, 0.0, 0.0
            base_comp = module.computations.get(inst.called[0]) if base is not inst else comp
            execs = ctx.executions
            out.append(Collective(
                program_id=module.program_id, module=module.name, name=inst.name,
                opcode=opcode, dtype=_dtype(module, base_comp or comp, base),
                bytes=cost.msg_bytes, group_size=cost.group_size,
                groups=None if base.replica_groups is None else tuple(
                    tuple(g) for g in base.replica_groups),
                is_async=is_async, done=done.name if done is not None else None,
                computation=comp_name, in_loop=ctx.in_loop, loop=ctx.loop,
                trip_count=ctx.trips if ctx.in_loop else None,
                trip_note=ctx.trip_note if ctx.in_loop and ctx.trips is None else "",
                executions_per_step=execs,
                bytes_per_step=None if execs is None or cost.msg_bytes is None
                else execs * cost.msg_bytes,
                spans_hosts=hosts.spans(_device_groups(module, base)),
                overlap_ops=ops, overlap_flops=flops, overlap_bytes=nbytes,
                operands=base.operands if base is inst else inst.operands,
                wrapped=None if base is inst else base.name, promoted=_promoted(base)))
    return out


PROMOTED_SUFFIX = "_promoted"
"""XLA's AllReducePromotion pass clones an all-reduce's or reduce-scatter's reducer under
this suffix when it widens the collective's type (XLA:CPU: bf16 to f32)."""


def _promoted(inst: Instruction) -> str | None:
    """The reducer of an all-reduce or reduce-scatter that XLA promoted itself, else None."""
    if inst.opcode.removesuffix("-start") not in ("all-reduce", "reduce-scatter"):
        return None
    return next((c for c in inst.called if c.endswith(PROMOTED_SUFFIX)), None)


def promotion_notes(colls: list[Collective]) -> list[str]:
    """One line per collective XLA promoted: what it is, since no upcast finding is raised
    for it (the program asked for the narrow type; the compiler widened it)."""
    return [f"{c.name} ({c.opcode}) moves {c.dtype or 'a wider type'}: XLA widened it itself "
            f"(AllReducePromotion, reducer {c.promoted}), as XLA:CPU does with a bf16 "
            f"{c.opcode}; not an upcast in the program, so no advice"
            for c in colls if c.promoted]


def upcast_source(module: Module, comp: Computation, name: str,
                  depth: int = 0) -> tuple[str, str] | None:
    """(convert instruction, narrow type) when the value ``name`` is a wide float converted
    from a narrow float with only data movement since: directly, or as a fusion's root."""
    inst = comp.instructions.get(name)
    if inst is None or depth > 16:
        return None
    if inst.opcode == "convert" and inst.operands and inst.shape.dtype in WIDE_TYPES:
        src = comp.instructions.get(inst.operands[0])
        if src is not None and not src.shape.is_tuple and _narrow(src.shape.dtype):
            return inst.name, src.shape.dtype
        return None
    if inst.opcode in MOVES and inst.operands:
        return upcast_source(module, comp, inst.operands[0], depth + 1)
    if inst.opcode == "fusion" and inst.called:
        body = module.computations.get(inst.called[0])
        if body is not None and body.root:
            found = upcast_source(module, body, body.root, depth + 1)
            if found is not None:
                return f"{inst.name} ({found[0]})", found[1]
    return None


def static_findings(module: Module, colls: list[Collective]) -> list[Finding]:
    """Findings read from the HLO alone (no-overlap-window's synchronous case and every
    measured cost need the trace: :mod:`tracelens.analyze.compute.hlo_findings`)."""
    program = program_label(module.name, module.program_id)
    out: list[Finding] = []

    def add(kind: str, c: Collective, message: str, bytes_per_step: int | None,
            names: tuple[str, ...] = ()) -> None:
        out.append(Finding(kind, program, module.program_id, c.name, message, bytes_per_step,
                           instructions=names or c.op_names, opcode=c.opcode))

    for c in colls:
        size = human_bytes(c.bytes)
        if c.in_loop and (c.trip_count is None or c.trip_count > 1):
            if c.trip_count is None:
                note = c.trip_note.removeprefix(f"{c.loop}: ")  # an outer loop keeps its name
                why = f" ({note})" if note else ""
                msg = (f"{c.name} ({c.opcode}, {size}) runs inside loop {c.loop} of unknown "
                       f"trip count{why}: its bytes per step are unknown")
            else:
                msg = (f"{c.name} ({c.opcode}, {size}) runs inside the {c.trip_count}-iteration "
                       f"loop {c.loop}: {c.trip_count} × {size} = {human_bytes(c.bytes_per_step)}"
                       f" per step; if it reduces an accumulator, one {c.opcode} after the loop "
                       "moves the data once")
            add("collective-in-loop", c, msg, c.bytes_per_step)
        comp = module.computations[c.computation]
        # XLA's own promotion is no upcast of the program's (promotion_notes says what it is)
        up = [] if c.promoted else [(o, upcast_source(module, comp, o)) for o in c.operands]
        up = [(o, s) for o, s in up if s is not None]
        if up:
            shapes = {o: comp.instructions[o].shape for o, _ in up}
            wide = sum(shapes[o].bytes for o, _ in up)
            total = sum(comp.instructions[o].shape.bytes for o in c.operands
                        if o in comp.instructions)
            # the upcast operands' share of what the collective moves per step
            per_step = None if c.bytes_per_step is None or not total else \
                c.bytes_per_step * wide // total
            narrow = sorted({s[1] for _, s in up})
            src = ", ".join(s[0] for _, s in up)
            add("upcast-collective", c,
                f"{c.name} ({c.opcode}) moves {human_bytes(wide)} of "
                f"{'/'.join(sorted({shapes[o].dtype for o, _ in up}))} converted from "
                f"{'/'.join(narrow)} by {src}: twice the bytes the {'/'.join(narrow)} values "
                f"need; communicate in {'/'.join(narrow)} or convert after the {c.opcode}",
                per_step)
        if c.is_async and c.overlap_ops == 0:
            add("no-overlap-window", c,
                f"{c.name} … {c.done}: no compute is scheduled between the start and the done, "
                f"so the {c.opcode} ({size}) cannot hide behind anything", c.bytes_per_step)
        if c.spans_hosts:
            add("cross-host", c,
                f"{c.name} ({c.opcode}) has replica groups spanning hosts: "
                f"{human_bytes(c.bytes_per_step)} per step over the inter-host network",
                c.bytes_per_step)
    small = [c for c in colls if c.bytes is not None and c.bytes < SMALL_BYTES]
    known = [c for c in small if c.executions_per_step is not None]
    count = sum(c.executions_per_step for c in known)
    if count >= SMALL_MIN_COUNT:
        total = sum(c.bytes_per_step for c in known)
        first = max(known, key=lambda c: (c.executions_per_step, c.name))
        out.append(Finding(
            "small-collectives", program, module.program_id, first.name,
            f"{count} collectives under {human_bytes(SMALL_BYTES)} per step "
            f"({len(known)} instructions, {human_bytes(total)} in all) each pay launch and "
            "latency; combine them into fewer, larger collectives", total,
            instructions=tuple(n for c in known for n in c.op_names),
            opcode=known[0].opcode if len({c.opcode for c in known}) == 1 else None))
    gathers: dict[tuple, list[Collective]] = {}
    for c in colls:
        if c.opcode == "all-gather" and c.operands:
            comp = module.computations[c.computation]
            src = _through_moves(comp, c.operands[0])
            gathers.setdefault((c.computation, src, c.groups), []).append(c)
    for (_, src, _), cs in sorted(gathers.items(), key=lambda kv: kv[1][0].name):
        if len(cs) < 2:  # one gather in a loop may gather a new value each iteration
            continue
        runs = [c.executions_per_step for c in cs]
        total = None if None in runs or any(c.bytes is None for c in cs) else \
            sum(c.bytes_per_step for c in cs)
        out.append(Finding(
            "repeated-gather", program, module.program_id, cs[0].name,
            f"{src} is all-gathered {len(cs)} times per step ({', '.join(c.name for c in cs)}): "
            f"{human_bytes(total)} per step; keep the first gathered copy instead of "
            "re-gathering (rematerialization of FSDP parameters)", total,
            instructions=tuple(n for c in cs for n in c.op_names), opcode="all-gather"))
    return out


def _through_moves(comp: Computation, name: str) -> str:
    """The value behind bitcasts and copies (a re-gather of the same parameter)."""
    seen = 0
    inst = comp.instructions.get(name)
    while inst is not None and inst.opcode in ("bitcast", "copy", "reshape") and inst.operands \
            and seen < 16:
        name, inst, seen = inst.operands[0], comp.instructions.get(inst.operands[0]), seen + 1
    return name


def analyze_module(module: Module, schedule: dict[str, list[str]] | None,
                   hosts: HostMap = HostMap()) -> ProgramLens:
    """The static lens of one program."""
    colls = collectives(module, schedule, hosts)
    notes = loop_notes(module) + promotion_notes(colls)
    if any(c.is_async for c in colls) and not schedule:
        notes.append("the module carries no schedule: compute between async starts and dones "
                     "is unknown")
    return ProgramLens(module=module.name, program_id=module.program_id,
                       collectives=tuple(colls), findings=tuple(static_findings(module, colls)),
                       scheduled=bool(schedule), notes=tuple(notes))


def with_exposure(f: Finding, exposed: float | None, note: str = "") -> Finding:
    return replace(f, exposed_ns_per_step=exposed, exposed_note=note)
