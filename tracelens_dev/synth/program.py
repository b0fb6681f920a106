"""The step program: every device activity one training step launches, in order, as blocks.

A :class:`Block` is a stretch of the compute stream (kernels, and synchronous collectives such as
an MoE all-to-all) plus what is issued with it: asynchronous collectives on the collective
stream (placed so that ``overlap`` of them runs under the block's compute; the next block waits
for them, as FSDP waits for the next layer's parameters), copies the block waits for
(``pre_copies``, the input batch), and copies that run beside it (``side_copies``).

Each :class:`Spec` is one distinct activity of the program: its kernel name, HLO op (unique in
the program, numbered as XLA numbers instructions), intended category, launch API, geometry and
base duration on the device model (from FLOPs or bytes and the device's peaks). An op's
:class:`~tracelens_dev.synth.recipes.Recipe` says what it computes (shapes from the model config,
bf16): the program's HloProto is built from the recipes and the truth's costs come from them,
and the durations follow from the same FLOPs, bytes and message sizes.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from tracelens_dev.synth import recipes as rc
from tracelens_dev.synth.devices import DeviceModel
from tracelens_dev.synth.names import COLLECTIVE_OPS, Geometry, Names, OpNamer
from tracelens_dev.synth.recipes import Arr, Recipe, bf16
from tracelens_dev.synth.scenario import Scenario

COMPUTE, COLLECTIVE, COPY = 0, 1, 2  # stream roles
_MIN_NS = 2_000


@dataclass
class Spec:
    kind: str  # kernel | memcpy
    name: str
    op: str | None
    category: str  # the category the construction means (truth only; traces stay unclassified)
    role: int  # COMPUTE, COLLECTIVE or COPY stream
    api: str  # host launch API
    base_ns: int  # duration on the device model before jitter and straggler slowdown
    geometry: Geometry
    in_program: bool = True  # launched by the XLA program (carries op/module/program_id)
    subcategory: str | None = None  # what a reader knows: memcpy direction, collective type
    collective: str | None = None
    msg_bytes: int | None = None
    group: str | None = None  # "job" (every device) or "host" (the GPUs of one host)
    copy_bytes: int | None = None
    recipe: Recipe | None = None  # what the op computes (shared by the kernels of one op)
    main: bool = True  # the op's main kernel: it carries the op's FLOPs and bytes


@dataclass
class Block:
    label: str
    items: list[int] = field(default_factory=list)
    colls: list[int] = field(default_factory=list)
    issue: str = "overlap"  # "overlap": under the block's compute; "start": at block start
    wait: bool = True
    pre_copies: list[int] = field(default_factory=list)
    side_copies: list[int] = field(default_factory=list)


@dataclass
class Program:
    specs: list[Spec]
    blocks: list[Block]

    @property
    def events_per_step(self) -> int:
        return len(self.specs)

    def recipes(self) -> list[Recipe]:
        """Each op's recipe once, in program order."""
        seen: dict[str, Recipe] = {}
        for s in self.specs:
            if s.recipe is not None:
                seen.setdefault(s.recipe.op, s.recipe)
        return list(seen.values())


def _flops_bytes(r: Recipe) -> tuple[float, float]:
    c = r.cost()
    return float(c.flops or 0), float(c.bytes or 0)


class _Builder:
    def __init__(self, sc: Scenario, model: DeviceModel) -> None:
        self.sc, self.model = sc, model
        self.names, self.ops = Names(model), OpNamer()
        self.specs: list[Spec] = []
        hd = sc.hidden // sc.heads
        self.tokens = sc.batch * sc.seq
        self.qkv_n = sc.hidden + 2 * sc.kv_heads * hd
        self.expert_ffn = max(1, sc.ffn // 4)
        self.head_dim = hd
        h, f = sc.hidden, sc.ffn
        mlp = (h * sc.experts + sc.experts * 3 * h * self.expert_ffn) if sc.moe else 3 * h * f
        self.layer_params = h * self.qkv_n + h * h + mlp
        self.n_devices = sc.hosts * sc.gpus
        self.routed = self.tokens * sc.top_k  # MoE: token-expert assignments per device
        self.capacity = -(-self.routed // sc.experts)  # tokens per expert (padded)

    # -- durations ------------------------------------------------------------------------------
    def _gemm_ns(self, flops: float, nbytes: float) -> int:
        """On the roofline: FLOPs at ``gemm_efficiency`` of the bf16 peak or bytes at 75% of
        HBM bandwidth, whichever takes longer (skinny GEMMs such as the MoE router are
        memory-bound), plus a launch overhead."""
        compute = flops / (self.model.peak_tflops * self.sc.gemm_efficiency * 1e3)
        memory = nbytes / (self.model.hbm_tbps * 0.75 * 1e3)
        return max(_MIN_NS, round(max(compute, memory)) + 3_000)

    def _mem_ns(self, nbytes: float, efficiency: float = 0.75) -> int:
        return max(_MIN_NS, round(nbytes / (self.model.hbm_tbps * efficiency * 1e3)) + 2_000)

    def _coll_ns(self, ctype: str, nbytes: int, n: int, cross_node: bool) -> int:
        factor = {"all-reduce": 2.0 * (n - 1) / n}.get(ctype, (n - 1) / n)
        bw = self.model.network_gbps if cross_node else self.model.link_gbps
        latency = 8_000 + (15_000 if cross_node else 0)
        return latency + round(nbytes * factor / bw)

    # -- specs ------------------------------------------------------------------------------------
    def _add(self, spec: Spec) -> int:
        self.specs.append(spec)
        return len(self.specs) - 1

    def gemm(self, use: str, m: int, n: int, k: int, tile: tuple[int, int, int],
             small: bool = False, batch: int = 1, triton: bool = False) -> int:
        """A GEMM: a hipBLASLt/cuBLAS custom call, or a Triton GEMM fusion (``triton``, and the
        small router GEMMs on AMD); ``small`` on NVIDIA is cuBLAS running a CUTLASS kernel."""
        triton = triton or (small and self.names.amd)
        if triton:
            op = self.ops("gemm_fusion_dot")
            nm = self.names.xla_kernel(op)
        else:
            op = self.names.gemm_op(self.ops, use)
            nm = self.names.small_gemm() if small else self.names.gemm(use, tile)
        recipe = rc.Gemm(op, use, m, n, k, batch, target=self.names.gemm_target(use),
                         triton=triton, workspace=self.names.gemm_workspace)
        return self._add(Spec("kernel", nm, op, "gemm", COMPUTE,
                              self.names.launch_api("xla" if triton else "gemm"),
                              self._gemm_ns(*_flops_bytes(recipe)),
                              self.names.geometry("gemm", batch * m * n), recipe=recipe))

    def fusion(self, base: str, category: str, make, *args) -> int:
        """A loop/input fusion ``base``; ``make(op, *args)`` gives its recipe (body, FLOPs);
        it runs at 75% of HBM bandwidth on its operands + result."""
        op = self.ops(base, bare_first=True)
        recipe = make(op, *args)
        nbytes = recipe.cost().bytes
        return self._add(Spec("kernel", self.names.xla_kernel(op), op, category, COMPUTE,
                              self.names.launch_api("xla"), self._mem_ns(nbytes),
                              self.names.geometry("xla", int(nbytes // 6)), recipe=recipe))

    def sort(self) -> int:
        op = self.ops("sort")
        recipe = rc.Sort(op, bf16(self.tokens, self.sc.experts))
        return self._add(Spec("kernel", self.names.xla_kernel(op), op, "reduction", COMPUTE,
                              self.names.launch_api("xla"),
                              self._mem_ns(recipe.cost().bytes, 0.3),
                              self.names.geometry("xla", self.tokens * self.sc.experts),
                              recipe=recipe))

    def attention(self, direction: str) -> list[int]:
        """Flash attention: one custom call, one kernel (forward; cuDNN backward) or three CK
        kernels (AMD backward; the dQ/dK/dV kernel is the main one and is kept more than 3×
        longer than each helper, so it stays the longest under any jitter < 50%)."""
        sc = self.sc
        fwd_flops = 2.0 * sc.batch * sc.seq * sc.seq * sc.hidden  # causal: half of 4·b·s²·h
        peak = self.model.peak_tflops * sc.attention_efficiency * 1e3
        op = self.ops("custom-call")
        recipe = rc.Attention(op, backward=direction != "fwd", cudnn=not self.names.amd,
                              b=sc.batch, s=sc.seq, heads=sc.heads, kv_heads=sc.kv_heads,
                              hd=self.head_dim, workspace=self.names.attention_workspace,
                              te_full=sc.te_attributes == "full")
        parts = self.names.attention_parts(direction)
        ns = {}
        for part in parts:
            if part == "fwd":
                ns[part] = max(_MIN_NS, round(fwd_flops / peak))
            elif part != "bwd_dq_dk_dv":
                ns[part] = self._mem_ns(self.tokens * sc.hidden * 4)
        if "bwd_dq_dk_dv" in parts:
            helpers = max(ns.values(), default=0)
            ns["bwd_dq_dk_dv"] = max(_MIN_NS, round(2.5 * fwd_flops / peak),
                                     -(-helpers * 31 // 10))
        main = "fwd" if direction == "fwd" else "bwd_dq_dk_dv"
        return [self._add(Spec(
            "kernel", self.names.attention(part), op, "attention", COMPUTE,
            self.names.launch_api("attention"), ns[part],
            self.names.geometry("attention", self.tokens * sc.heads), recipe=recipe,
            main=part == main)) for part in parts]

    def collective(self, ctype: str, operand: Arr, out: Arr, group: str = "job",
                   sync: bool = False) -> int:
        """A collective; ``sync`` ones run on the compute stream (XLA's synchronous form).
        Replica groups are written in a different encoding per kind of collective, so that
        every encoding the readers support is exercised."""
        n = self.sc.gpus if group == "host" else self.n_devices
        cross = group == "job" and self.sc.hosts > 1
        op = self.ops(ctype if sync else COLLECTIVE_OPS[ctype])
        role = COMPUTE if sync else COLLECTIVE
        encoding = {"all-gather": "iota", "reduce-scatter": "list", "all-to-all": "mesh",
                    "all-reduce": "iota_transposed" if sync else "explicit"}[ctype]
        recipe = rc.Collective(op, ctype, operand, out, sync, group, self.sc.hosts,
                               self.sc.gpus, encoding)
        nbytes = recipe.cost().msg_bytes
        return self._add(Spec("kernel", self.names.collective(ctype), op, "collective", role,
                              self.names.launch_api("collective"),
                              self._coll_ns(ctype, nbytes, n, cross),
                              self.names.geometry("collective", 0), subcategory=ctype,
                              collective=ctype, msg_bytes=nbytes, group=group, recipe=recipe))

    def copy(self, direction: str, nbytes: int) -> int:
        """An H2D copy of ``nbytes`` before the program (no op), or a D2D ``copy.N`` of
        ``nbytes`` (rounded down to whole bf16 elements)."""
        kind, name = self.names.copy(direction)
        recipe = None
        if direction == "h2d":
            ns, op = 5_000 + nbytes // 50, None  # ~50 GB/s over PCIe, before the program runs
        else:
            op = self.ops("copy")
            recipe = rc.Copy(op, bf16(max(1, nbytes // 2)))
            nbytes = recipe.arr.nbytes
            ns = self._mem_ns(2 * nbytes, 0.6)
        return self._add(Spec(kind, name, op, "memory", COPY,
                              self.names.launch_api(f"copy_{direction}"), ns,
                              self.names.geometry("copy", nbytes), in_program=op is not None,
                              subcategory=direction if kind == "memcpy" else None,
                              copy_bytes=nbytes, recipe=recipe))

    # -- layers -----------------------------------------------------------------------------------
    def role(self, role: str, direction: str) -> list[int]:
        sc, t, h = self.sc, self.tokens, self.sc.hidden
        fwd = direction == "fwd"

        def gemm_pair(m: int, n: int, k: int, tile: tuple[int, int, int], small: bool = False,
                      batch: int = 1, triton_wgrad: bool = False) -> list[int]:
            """Forward x[M,K]·W[K,N]; backward dx = dy·Wᵀ (M×K×N) and dW = xᵀ·dy (K×N×M)."""
            if fwd:
                return [self.gemm("fwd", m, n, k, tile, small, batch)]
            return [self.gemm("dgrad", m, k, n, (256, 256, 64), small, batch),
                    self.gemm("wgrad", k, n, m, (128, 128, 64), small, batch,
                              triton=triton_wgrad)]

        if role == "norm":
            return [self.fusion("input_reduce_fusion", "reduction",
                                rc.rmsnorm_fwd if fwd else rc.rmsnorm_bwd, t, h)]
        if role == "qkv":
            return gemm_pair(t, self.qkv_n, h, (256, 224, 64))
        if role == "rope":
            return [self.fusion("loop_multiply_fusion", "elementwise", rc.rope, sc.batch,
                                sc.seq, self.qkv_n // self.head_dim, self.head_dim)]
        if role == "attn":
            return self.attention(direction)
        if role == "out":  # its weight gradient runs as a Triton GEMM fusion
            return gemm_pair(t, h, h, (256, 128, 64), triton_wgrad=True)
        if role == "residual":
            return [self.fusion("loop_add_fusion", "elementwise", rc.residual_add, t, h)]
        if role == "gate_up":
            return gemm_pair(t, 2 * sc.ffn, h, (256, 256, 64))
        if role == "swiglu":
            return [self.fusion("loop_multiply_fusion", "elementwise",
                                rc.swiglu_fwd if fwd else rc.swiglu_bwd, (t,), sc.ffn)]
        if role == "down":
            return gemm_pair(t, h, sc.ffn, (256, 128, 64))
        assert role == "moe", role
        # Router GEMM and top-k sort; tokens go to the experts of the host's GPUs and back
        # (all-to-all of [gpus, tokens per GPU, h]); the experts run batched GEMMs on
        # [experts, capacity, ·].
        fe, e, cap, g = self.expert_ffn, sc.experts, self.capacity, sc.gpus
        a2a = bf16(g, -(-self.routed // g), h)
        if fwd:
            return [*gemm_pair(t, e, h, (64, 32, 256), small=True), self.sort(),
                    self.collective("all-to-all", a2a, a2a, "host", sync=True),
                    *gemm_pair(cap, 2 * fe, h, (256, 256, 64), batch=e),
                    self.fusion("loop_multiply_fusion", "elementwise", rc.swiglu_fwd,
                                (e, cap), fe),
                    *gemm_pair(cap, h, fe, (256, 128, 64), batch=e),
                    self.collective("all-to-all", a2a, a2a, "host", sync=True)]
        return [self.collective("all-to-all", a2a, a2a, "host", sync=True),
                *gemm_pair(cap, h, fe, (256, 128, 64), batch=e),
                self.fusion("loop_multiply_fusion", "elementwise", rc.swiglu_bwd, (e, cap), fe),
                *gemm_pair(cap, 2 * fe, h, (256, 256, 64), batch=e),
                self.collective("all-to-all", a2a, a2a, "host", sync=True),
                *gemm_pair(t, e, h, (64, 32, 256), small=True)]

    def layer(self, direction: str) -> list[int]:
        roles = self.sc.roles()
        out: list[int] = []
        for role in (roles if direction == "fwd" else reversed(roles)):
            out.extend(self.role(role, direction))
        return out


def build_program(sc: Scenario, model: DeviceModel) -> Program:
    """The step program of ``sc`` on ``model`` (identical for every step and device)."""
    b = _Builder(sc, model)
    L, P, n = sc.layers, b.layer_params, b.n_devices
    shard = -(-P // n)  # FSDP: a layer's parameters per device (padded to n equal shards)
    local = shard * L if sc.fsdp else P * L  # gradient/optimizer elements per device
    blocks: list[Block] = []

    def ag() -> int:
        return b.collective("all-gather", bf16(shard), bf16(shard * n))

    def grad_sync() -> int:
        if sc.fsdp:
            return b.collective("reduce-scatter", bf16(shard * n), bf16(shard))
        return b.collective("all-reduce", bf16(P), bf16(P))

    first = Block("input", pre_copies=[b.copy("h2d", sc.input_bytes)], issue="start")
    if sc.fsdp:
        first.colls.append(ag())
    blocks.append(first)
    for layer in range(L):
        blk = Block(f"fwd.{layer}", items=b.layer("fwd"))
        if sc.fsdp and layer + 1 < L:
            blk.colls.append(ag())
        blocks.append(blk)
    blocks.append(Block("loss", items=[b.fusion("input_reduce_fusion", "reduction", rc.loss,
                                                b.tokens, sc.hidden)]))
    for layer in reversed(range(L)):
        blk = Block(f"bwd.{layer}", items=b.layer("bwd"))
        if sc.fsdp and layer >= 1:
            blk.colls.append(ag())
        if layer + 1 < L:
            blk.colls.append(grad_sync())
        if layer == L // 2:
            blk.side_copies.append(b.copy("d2d", P // 2))  # a quarter of the layer's bf16
        blocks.append(blk)
    tail = Block("grad_norm", items=[b.fusion("input_reduce_fusion", "reduction",
                                              rc.sum_of_squares, local)])
    tail.colls.append(grad_sync())
    if sc.grad_norm:
        tail.items.append(b.collective("all-reduce", rc.f32(), rc.f32(), sync=True))
    blocks.append(tail)
    if sc.optimizer:
        blocks.append(Block("optimizer", items=[
            b.fusion("loop_multiply_fusion", "elementwise", rc.adam_moment, local),
            b.fusion("loop_add_fusion", "elementwise", rc.adam_second_moment, local),
            b.fusion("loop_subtract_fusion", "elementwise", rc.adam_update, local)]))
    used = sorted(i for blk in blocks
                  for i in (*blk.items, *blk.colls, *blk.pre_copies, *blk.side_copies))
    assert used == list(range(len(b.specs))), "every spec runs exactly once per step"
    return Program(specs=b.specs, blocks=blocks)


def events_per_device_per_step(sc: Scenario) -> int:
    """Device activities one device runs per step (exact; the scale knob sizes runs with it)."""
    from tracelens_dev.synth.devices import device_model
    return build_program(sc, device_model(sc.device)).events_per_step


def scaled(sc: Scenario, events_per_device: int) -> Scenario:
    """The scale knob: ``sc`` with as many steps as it takes to reach ``events_per_device``
    activities on each device (at least one step). Host launch events are switched off, since
    benchmarks time the device stream; set ``host_launches`` back with ``dataclasses.replace``.
    """
    per_step = events_per_device_per_step(sc)
    steps = max(1, -(-events_per_device // per_step))
    return replace(sc, steps=steps, host_launches=False)
