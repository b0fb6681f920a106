"""The step program: every device activity one training step launches, in order, as blocks.

A :class:`Block` is a stretch of the compute stream (kernels, and synchronous collectives such as
an MoE all-to-all) plus what is issued with it: asynchronous collectives on the collective
stream (placed so that ``overlap`` of them runs under the block's compute; the next block waits
for them, as FSDP waits for the next layer's parameters), copies the block waits for
(``pre_copies``, the input batch), and copies that run beside it (``side_copies``).

Each :class:`Spec` is one distinct activity of the program: its kernel name, HLO op (unique in
the program, numbered as XLA numbers instructions), intended category, launch API, geometry and
base duration on the device model (from FLOPs or bytes and the device's peaks).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tracelens.synth.devices import DeviceModel
from tracelens.synth.names import COLLECTIVE_OPS, Geometry, Names, OpNamer
from tracelens.synth.scenario import Scenario

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


class _Builder:
    def __init__(self, sc: Scenario, model: DeviceModel) -> None:
        self.sc, self.model = sc, model
        self.names, self.ops = Names(model), OpNamer()
        self.specs: list[Spec] = []
        hd = sc.hidden // sc.heads
        self.tokens = sc.batch * sc.seq
        self.qkv_n = sc.hidden + 2 * sc.kv_heads * hd
        self.expert_ffn = max(1, sc.ffn // 4)
        h, f = sc.hidden, sc.ffn
        mlp = (h * sc.experts + sc.experts * 3 * h * self.expert_ffn) if sc.moe else 3 * h * f
        self.layer_params = h * self.qkv_n + h * h + mlp
        self.n_devices = sc.hosts * sc.gpus

    # -- durations ------------------------------------------------------------------------------
    def _gemm_ns(self, m: int, n: int, k: int) -> int:
        flops = 2.0 * m * n * k
        return max(_MIN_NS, round(flops / (self.model.peak_tflops * self.sc.gemm_efficiency
                                           * 1e3)) + 3_000)

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
             small: bool = False) -> int:
        nm = self.names.small_gemm() if small else self.names.gemm(use, tile)
        return self._add(Spec("kernel", nm, self.names.gemm_op(self.ops), "gemm", COMPUTE,
                              self.names.launch_api("gemm"), self._gemm_ns(m, n, k),
                              self.names.geometry("gemm", m * n)))

    def fusion(self, base: str, category: str, nbytes: float) -> int:
        op = self.ops(base, bare_first=True)
        return self._add(Spec("kernel", self.names.xla_kernel(op), op, category, COMPUTE,
                              self.names.launch_api("xla"), self._mem_ns(nbytes),
                              self.names.geometry("xla", int(nbytes // 6))))

    def sort(self) -> int:
        op = self.ops("sort")
        n = self.tokens * self.sc.top_k
        return self._add(Spec("kernel", self.names.xla_kernel(op), op, "other", COMPUTE,
                              self.names.launch_api("xla"), self._mem_ns(n * 64, 0.3),
                              self.names.geometry("xla", n)))

    def attention(self, direction: str) -> list[int]:
        sc = self.sc
        fwd_flops = 2.0 * sc.batch * sc.seq * sc.seq * sc.hidden  # causal: half of 4·b·s²·h
        peak = self.model.peak_tflops * sc.attention_efficiency * 1e3
        out = []
        op = self.ops("custom-call")
        for part in self.names.attention_parts(direction):
            if part == "fwd":
                ns = round(fwd_flops / peak)
            elif part == "bwd_dq_dk_dv":
                ns = round(2.5 * fwd_flops / peak)
            else:
                ns = self._mem_ns(self.tokens * sc.hidden * 4)
            out.append(self._add(Spec(
                "kernel", self.names.attention(part), op, "attention", COMPUTE,
                self.names.launch_api("attention"), max(_MIN_NS, ns),
                self.names.geometry("attention", self.tokens * sc.heads))))
        return out

    def collective(self, ctype: str, nbytes: int, group: str = "job",
                   sync: bool = False) -> int:
        """A collective; ``sync`` ones run on the compute stream (XLA's synchronous form)."""
        n = self.sc.gpus if group == "host" else self.n_devices
        cross = group == "job" and self.sc.hosts > 1
        op = self.ops(ctype if sync else COLLECTIVE_OPS[ctype])
        role = COMPUTE if sync else COLLECTIVE
        return self._add(Spec("kernel", self.names.collective(ctype), op, "collective", role,
                              self.names.launch_api("collective"),
                              self._coll_ns(ctype, nbytes, n, cross),
                              self.names.geometry("collective", 0), subcategory=ctype,
                              collective=ctype, msg_bytes=nbytes, group=group))

    def copy(self, direction: str, nbytes: int) -> int:
        kind, name = self.names.copy(direction)
        if direction == "h2d":
            ns, op = 5_000 + nbytes // 50, None  # ~50 GB/s over PCIe, before the program runs
        else:
            ns, op = self._mem_ns(2 * nbytes, 0.6), self.ops("copy")
        return self._add(Spec(kind, name, op, "memory", COPY,
                              self.names.launch_api(f"copy_{direction}"), ns,
                              self.names.geometry("copy", nbytes), in_program=op is not None,
                              subcategory=direction if kind == "memcpy" else None,
                              copy_bytes=nbytes))

    # -- layers -----------------------------------------------------------------------------------
    def role(self, role: str, direction: str) -> list[int]:
        sc, t, h = self.sc, self.tokens, self.sc.hidden
        fwd = direction == "fwd"

        def gemm_pair(m: int, n: int, k: int, tile: tuple[int, int, int],
                      small: bool = False) -> list[int]:
            if fwd:
                return [self.gemm("fwd", m, n, k, tile, small)]
            return [self.gemm("dgrad", m, k, n, (256, 256, 64), small),
                    self.gemm("wgrad", k, n, m, (128, 128, 64), small)]

        if role == "norm":
            return [self.fusion("input_reduce_fusion", "reduction", t * h * (4 if fwd else 6))]
        if role == "qkv":
            return gemm_pair(t, self.qkv_n, h, (256, 224, 64))
        if role == "rope":
            return [self.fusion("loop_multiply_fusion", "elementwise", t * self.qkv_n * 4)]
        if role == "attn":
            return self.attention(direction)
        if role == "out":
            return gemm_pair(t, h, h, (256, 128, 64))
        if role == "residual":
            return [self.fusion("loop_add_fusion", "elementwise", t * h * 6)]
        if role == "gate_up":
            return gemm_pair(t, 2 * sc.ffn, h, (256, 256, 64))
        if role == "swiglu":
            return [self.fusion("loop_multiply_fusion", "elementwise", t * sc.ffn * 6)]
        if role == "down":
            return gemm_pair(t, h, sc.ffn, (256, 128, 64))
        assert role == "moe", role
        routed, fe = t * sc.top_k, self.expert_ffn
        a2a = routed * h * 2
        router = gemm_pair(t, sc.experts, h, (64, 32, 256), small=True)
        if fwd:
            return [*router, self.sort(), self.collective("all-to-all", a2a, "host", sync=True),
                    *gemm_pair(routed, 2 * fe, h, (256, 256, 64)),
                    self.fusion("loop_multiply_fusion", "elementwise", routed * fe * 6),
                    *gemm_pair(routed, h, fe, (256, 128, 64)),
                    self.collective("all-to-all", a2a, "host", sync=True)]
        return [self.collective("all-to-all", a2a, "host", sync=True),
                *gemm_pair(routed, h, fe, (256, 128, 64)),
                self.fusion("loop_multiply_fusion", "elementwise", routed * fe * 6),
                *gemm_pair(routed, 2 * fe, h, (256, 256, 64)),
                self.collective("all-to-all", a2a, "host", sync=True), *router]

    def layer(self, direction: str) -> list[int]:
        roles = self.sc.roles()
        out: list[int] = []
        for role in (roles if direction == "fwd" else reversed(roles)):
            out.extend(self.role(role, direction))
        return out


def build_program(sc: Scenario, model: DeviceModel) -> Program:
    """The step program of ``sc`` on ``model`` (identical for every step and device)."""
    b = _Builder(sc, model)
    L, pbytes = sc.layers, b.layer_params * 2  # bf16 parameters / gradients
    shard = max(1, b.layer_params * L // b.n_devices) if sc.fsdp else b.layer_params * L
    blocks: list[Block] = []

    def ag() -> int:
        return b.collective("all-gather", pbytes)

    first = Block("input", pre_copies=[b.copy("h2d", sc.input_bytes)], issue="start")
    if sc.fsdp:
        first.colls.append(ag())
    blocks.append(first)
    for layer in range(L):
        blk = Block(f"fwd.{layer}", items=b.layer("fwd"))
        if sc.fsdp and layer + 1 < L:
            blk.colls.append(ag())
        blocks.append(blk)
    blocks.append(Block("loss", items=[b.fusion("input_reduce_fusion", "reduction",
                                                b.tokens * sc.hidden * 8)]))
    for layer in reversed(range(L)):
        blk = Block(f"bwd.{layer}", items=b.layer("bwd"))
        if sc.fsdp and layer >= 1:
            blk.colls.append(ag())
        if layer + 1 < L:
            blk.colls.append(b.collective("reduce-scatter" if sc.fsdp else "all-reduce",
                                          pbytes))
        if layer == L // 2:
            blk.side_copies.append(b.copy("d2d", pbytes // 4))
        blocks.append(blk)
    tail = Block("grad_norm", items=[b.fusion("input_reduce_fusion", "reduction", shard * 2)])
    tail.colls.append(b.collective("reduce-scatter" if sc.fsdp else "all-reduce", pbytes))
    if sc.grad_norm:
        tail.items.append(b.collective("all-reduce", 4, sync=True))
    blocks.append(tail)
    if sc.optimizer:
        blocks.append(Block("optimizer", items=[
            b.fusion(base, "elementwise", shard * 2 * 4)
            for base in ("loop_multiply_fusion", "loop_add_fusion", "loop_subtract_fusion")]))
    return Program(specs=b.specs, blocks=blocks)
