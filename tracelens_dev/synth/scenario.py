"""The scenario: what job a synthetic trace pretends to profile (pure data, no behaviour)."""

from __future__ import annotations

from dataclasses import dataclass

LLAMA_LAYER: tuple[str, ...] = ("norm", "qkv", "rope", "attn", "out", "residual", "norm",
                                "gate_up", "swiglu", "down", "residual")
"""One Llama-style decoder layer, forward: RMSNorm, QKV projection, RoPE, flash attention, output
projection, residual add, RMSNorm, gate/up projection, SwiGLU, down projection, residual add."""

MOE_LAYER: tuple[str, ...] = ("norm", "qkv", "rope", "attn", "out", "residual", "norm", "moe",
                              "residual")
"""The same layer with a mixture-of-experts MLP ("moe": router GEMM, top-k sort, all-to-all
dispatch, expert GEMMs with SwiGLU, all-to-all combine)."""

COLLECTIVE_TYPES = frozenset({"all-gather", "reduce-scatter", "all-reduce", "all-to-all"})
"""The collective types a scenario's program runs."""

ROLES = frozenset({"norm", "qkv", "rope", "attn", "out", "residual", "gate_up", "swiglu",
                   "down", "moe"})


@dataclass(frozen=True)
class Straggler:
    """One device computes ``slowdown`` times slower; its peers wait for it inside collectives."""

    host: int = 0
    device: int = 0
    slowdown: float = 1.15


@dataclass(frozen=True)
class Scenario:
    """A data-parallel (FSDP or DDP) training job; every field has a sensible default.

    Layout: ``hosts`` × ``gpus`` devices of model ``device`` (a key of ``DEVICE_MODELS``).
    Model: ``layers`` decoder layers of ``layer_roles`` (default Llama, or the MoE layer when
    ``moe``) with ``hidden``/``ffn``/``heads``/``kv_heads`` on ``batch`` × ``seq`` tokens per
    device; kernel durations follow from the device model's peaks (GEMM and attention at
    ``gemm_efficiency``/``attention_efficiency``, fusions at 75% of HBM bandwidth).
    Communication: FSDP (all-gather of each layer's parameters before its forward and backward,
    reduce-scatter of its gradients) or DDP (an all-reduce of each layer's gradients), a grad-norm
    all-reduce, and with ``moe`` an all-to-all dispatch and combine per layer among the GPUs of a
    host. Asynchronous collectives run on their own stream and are placed so that ``overlap``
    of their duration runs under the compute they were issued with; the next layer waits for them.
    Timing: per-kernel jitter (``jitter``, uniform ±), launch gaps (``launch_gap_ns``), host time
    between steps (``step_gap_ns``); ``step_marker_ns`` fixes the length of every step marker;
    ``async_markers`` ends each marker when the host has dispatched the step, before the device
    finishes (so kernels straddle step boundaries). ``seed`` makes it all deterministic.
    ``te_attributes``: the attribute dictionary of the AMD (Transformer Engine) attention calls:
    ``"full"`` as TE writes it (batch, heads, sequence lengths, head dims: the cost model knows
    the FLOPs; the bundled AMD samples), ``"minimal"`` without the shape attributes (FLOPs null).
    ``hidden_collectives``: a counterfactual knob (:mod:`tracelens_dev.synth.counterfactual`):
    the collectives of these types are perfectly overlapped: nothing ever waits for them (their
    kernels take no time and no member waits for the last arrival), every random draw is made
    as without the knob, so the rest of the scenario is the same.
    """

    name: str = "synthetic"
    device: str = "mi355x"
    hosts: int = 1
    gpus: int = 8
    steps: int = 3
    layers: int = 4
    hidden: int = 4096
    ffn: int = 14336
    heads: int = 32
    kv_heads: int = 8
    experts: int = 8
    top_k: int = 2
    seq: int = 4096
    batch: int = 1
    layer_roles: tuple[str, ...] | None = None
    fsdp: bool = True
    moe: bool = False
    grad_norm: bool = True
    optimizer: bool = True
    overlap: float = 0.8
    gemm_efficiency: float = 0.7
    attention_efficiency: float = 0.45
    input_bytes: int = 16 << 20
    straggler: Straggler | None = None
    jitter: float = 0.03
    launch_gap_ns: tuple[int, int] = (2_000, 9_000)
    step_gap_ns: int = 250_000
    step_marker_ns: int | None = None
    async_markers: bool = False
    host_launches: bool = True
    hostnames: tuple[str, ...] | None = None
    host_offsets_ns: tuple[int, ...] | None = None
    profile_start_ns: int = 1_795_000_000_000_000_000
    program_id: int = 17
    te_attributes: str = "minimal"
    module: str = "jit_train_step"
    seed: int = 0
    hidden_collectives: tuple[str, ...] = ()

    def roles(self) -> tuple[str, ...]:
        if self.layer_roles is not None:
            return self.layer_roles
        return MOE_LAYER if self.moe else LLAMA_LAYER

    def check(self) -> None:
        """Raise ValueError for a scenario that cannot be built."""
        problems = []
        if self.hosts < 1 or self.gpus < 1 or self.steps < 1 or self.layers < 1:
            problems.append("hosts, gpus, steps and layers must be >= 1")
        if not 0.0 <= self.overlap <= 1.0:
            problems.append("overlap must be in [0, 1]")
        if not 0.0 <= self.jitter < 0.5:
            problems.append("jitter must be in [0, 0.5)")
        if self.hidden < 1 or self.heads < 1 or self.kv_heads < 1 or \
                self.hidden % self.heads or self.heads % self.kv_heads:
            problems.append("hidden must be a multiple of heads, heads a multiple of kv_heads")
        if self.seq < 1 or self.batch < 1 or self.ffn < 4 or self.experts < 1 or self.top_k < 1:
            problems.append("seq, batch, experts and top_k must be >= 1 and ffn >= 4")
        bad = set(self.roles()) - ROLES
        if bad:
            problems.append(f"unknown layer roles {sorted(bad)}")
        if self.straggler is not None:
            s = self.straggler
            if not (0 <= s.host < self.hosts and 0 <= s.device < self.gpus):
                problems.append("straggler is not a device of the job")
            if s.slowdown < 1.0:
                problems.append("straggler slowdown must be >= 1")
        lo, hi = self.launch_gap_ns
        if lo < 1 or hi < lo:
            problems.append("launch_gap_ns must be (lo, hi) with 1 <= lo <= hi")
        if self.hostnames is not None and len(self.hostnames) != self.hosts:
            problems.append("hostnames needs one name per host")
        if self.host_offsets_ns is not None and (len(self.host_offsets_ns) != self.hosts
                                                 or min(self.host_offsets_ns) < 0):
            problems.append("host_offsets_ns needs one offset >= 0 per host")
        bad = set(self.hidden_collectives) - COLLECTIVE_TYPES
        if bad:
            problems.append(f"unknown collective types {sorted(bad)} to hide")
        if problems:
            raise ValueError("invalid scenario: " + "; ".join(problems))
