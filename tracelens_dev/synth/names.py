"""Kernel, op and host-API names as the real stacks emit them (shared/reference/rocprof.md §4,
xprof.md §2.4), and a plausible launch geometry for each kernel.

AMD: hipBLASLt/Tensile ``Cijk_*`` GEMMs (gfx942 and gfx950 token sets as seen in real traces),
Composable Kernel tile FMHA forward/backward, XLA fusion symbols (``loop_add_fusion_3.kd``: the HLO
name with ``.`` replaced by ``_`` plus ``.kd``), RCCL ``ncclDevKernel_Generic_N`` (the name does not
say which collective), HIP runtime blits ``__amd_rocclr_copyBuffer.kd``.
NVIDIA: cuBLAS ``nvjet_*`` / ``sm90_xmma_gemm_*`` and CUTLASS GEMMs, cuDNN flash SDPA, typed NCCL
``ncclDevKernel_<Coll>_..._RING_LL(...)`` kernels, XLA fusion symbols without ``.kd``, and
``MemcpyH2D``/``MemcpyD2D`` activity records.
"""

from __future__ import annotations

from dataclasses import dataclass

from tracelens_dev.synth.devices import DeviceModel

_TENSILE_942 = (
    "Cijk_{a}_{b}_BBS_BH_MT{m}x{n}x{k}_MI16x16x16x1_SN_1LDSB{l}_APM1_ABV0_ACED0_AF0EM1_AF1EM1_"
    "AMAS3_ASE_ASGT_ASLT_ASM_ASAE01_ASCE01_ASEM1_AAC0_BL1_BS1_CLR1_DTLA0_DTLB0_DTVA1_DTVB0_DVO0_"
    "ETSP_EPS1_ELFLRn20_EMLL0_FSSC10_FL0_GLVWA2_GLVWB4_GRCGA1_GRCGB1_GRPM1_GRVWn1_GSU1_GSUASB_"
    "GLS0_ISA942_IU1_K1_KLA_LBSPPA0_LBSPPB128_LPA0_LPB4_LDL1_LRVW4_LWPMn1_LDW0_FMA_MIAV0_MDA2_"
    "MO40_MMFSC_MKFGSU256_NTA0_NTB0_NTC3_NTD3_NEPBS0_NLCA2_NLCB1_ONLL1_OPLV0_PK0_PAP0_PGR2_PLR1_"
    "PKA0_SIA3_SLW1_SS1_SU0_SUM0_SUS0_SCIUI1_SPO1_SRVW0_SSO0_SVW2_SNLL0_TSGRA0_TSGRB0_TT4_{n}_"
    "TLDS1_UMLDSA0_UMLDSB1_U64SL1_USFGROn1_VAW1_VSn1_VW2_VWB2_VFLRP1_WSGRA0_WSGRB0_WS64_"
    "WG64_4_1_WGM{w}.kd")
_TENSILE_950 = (
    "Cijk_{a}_{b}_BBS_BH_Bias_HA_S_SAV_UserArgs_MT{m}x{n}x{k}_MI16x16x1_SN_LDSB{l}_AFC0_AFEM1_"
    "AFEM1_ASEM1_CLR1_CADS0_DTLA0_DTLB0_DTVA0_DTVB0_EPS0_FDSI0_GRPM1_GRVWA8_GRVWB8_GSU0_GSUAMB_"
    "GLS0_ISA950_IU1_K1_LDSTI0_LBSPPA1024_LBSPPB512_LBSPPM0_LPA32_LPB16_LPM0_LRVW8_LWPMn1_MIAV0_"
    "MIWT2_1_MO40_NTn1_NTA0_NTB0_NTC0_NTD0_NTM0_NEPBS0_NLCA1_NLCB1_ONLL1_PGR2_PLR1_PKA1_SIA3_SS1_"
    "SPO0_SRVW0_SSO0_SVW2_SK3_SKFTR0_SKXCCM0_TLDS1_ULSGRO0_USL1_UIOFGRO0_USFGRO0_VSn1_VWA2_VWB1_"
    "WSGRA0_WSGRB0_WS64_WG32_8_1_WGM{w}.kd")
# (A layout, B layout, macro tile) per GEMM use: forward, input gradient, weight gradient.
_TENSILE_USE = {"fwd": ("Ailk", "Bljk"), "dgrad": ("Ailk", "Bjlk"), "wgrad": ("Alik", "Bljk")}

_CK_PROBLEM = ("ck_tile::BlockFmhaPipelineProblem<ck_tile::bf16_t, ck_tile::bf16_t, "
               "ck_tile::bf16_t, float, float, ck_tile::bf16_t, unsigned char, float, "
               "ck_tile::bf16_t, ck_tile::bf16_t, ck_tile::bf16_t, ck_tile::TileFmhaShape<"
               "ck_tile::sequence<128, 128, 32, 128, 32, 128>, ck_tile::sequence<4, 1, 1>, "
               "ck_tile::sequence<32, 32, 16>, true>, true, "
               "ck_tile::SimplifiedGenericAttentionMask<true>>")
_CK_BWD_PROBLEM = ("ck_tile::BlockFmhaBwdPipelineProblem<ck_tile::bf16_t, ck_tile::bf16_t, "
                   "ck_tile::bf16_t, float, float, ck_tile::bf16_t, float, ck_tile::bf16_t, "
                   "ck_tile::bf16_t, ck_tile::bf16_t, ck_tile::bf16_t, ck_tile::bf16_t, "
                   "ck_tile::TileFmhaBwdShape<ck_tile::sequence<64, 128, 32, 128, 32, 32, 128, "
                   "128, 128>, true>, false, ck_tile::SimplifiedGenericAttentionMask<true>>")
_CK_KERNELS = {
    "fwd": f"ck_tile::FmhaFwdKernel<ck_tile::BlockFmhaPipelineQRKSVSAsync<{_CK_PROBLEM}>, "
           "ck_tile::Default2DEpilogue<ck_tile::Default2DEpilogueProblem<float, "
           "ck_tile::bf16_t, true, true>>>",
    "bwd_dot_do_o": "ck_tile::FmhaBwdOGradDotOKernel<ck_tile::BlockFmhaBwdOGradDotO<"
                    "ck_tile::BlockFmhaBwdOGradDotOPipelineProblem<ck_tile::bf16_t, float, "
                    "true, ck_tile::sequence<64, 1, 1>, true, false>>>",
    "bwd_dq_dk_dv": f"ck_tile::FmhaBwdDQDKDVKernel<ck_tile::BlockFmhaBwdDQDKDVPipelineKRKTRVR<"
                    f"{_CK_BWD_PROBLEM}>, ck_tile::Default2DEpilogue<ck_tile::"
                    "Default2DEpilogueProblem<float, ck_tile::bf16_t, true, true>>>",
    "bwd_convert_dq": "ck_tile::FmhaBwdConvertQGradKernel<ck_tile::BlockFmhaBwdConvertQGrad<"
                      "ck_tile::BlockFmhaBwdConvertQGradPipelineProblem<float, ck_tile::bf16_t, "
                      "ck_tile::sequence<64, 128>, true, false>>>",
}
_CUDNN_SDPA = {
    "fwd": "cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x128_"
           "4x1x1_kernel0_0",
    "bwd_dq_dk_dv": "cudnn_generated_fort_native_sdpa_sm90_flash_bprop_wgmma_f16_knob_5_"
                    "64x128x128_4x1x1_kernel0_0",
}
_NCCL_ARGS = "(ncclDevKernelArgsStorage<4096ul>)"
_NCCL_TYPED = {
    "all-gather": "ncclDevKernel_AllGather_RING_LL",
    "reduce-scatter": "ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL",
    "all-reduce": "ncclDevKernel_AllReduce_Sum_f32_RING_LL",
    "all-to-all": "ncclDevKernel_SendRecv",
}
# HLO op base names of asynchronous collectives (XLA GPU's async forms). Synchronous ones (an
# MoE all-to-all, a tiny all-reduce) are named by the plain opcode: all-to-all.3, all-reduce.1.
COLLECTIVE_OPS = {"all-gather": "all-gather-start", "reduce-scatter": "reduce-scatter",
                  "all-reduce": "all-reduce-start", "all-to-all": "all-to-all"}


@dataclass(frozen=True)
class Geometry:
    """Launch geometry of one kernel (grid in workgroups, block in threads)."""

    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    registers: int = 0
    shared_bytes: int = 0

    def as_dict(self) -> dict:
        return {"grid": list(self.grid), "block": list(self.block),
                "registers": self.registers, "shared_bytes": self.shared_bytes}


class OpNamer:
    """HLO instruction names, unique within one program, numbered the way XLA numbers them."""

    def __init__(self) -> None:
        self._counts: dict[str, int] = {}

    def __call__(self, base: str, bare_first: bool = False) -> str:
        n = self._counts.get(base, 0)
        self._counts[base] = n + 1
        if bare_first:
            return base if n == 0 else f"{base}.{n}"
        return f"{base}.{n + 1}"


class Names:
    """Names of one device family's kernels, host launch APIs and copies."""

    def __init__(self, model: DeviceModel) -> None:
        self.model = model
        self.amd = model.family == "amd"

    # -- GEMM --------------------------------------------------------------------------------
    def gemm(self, use: str, tile: tuple[int, int, int], wgm: int = 8) -> str:
        m, n, k = tile
        if self.amd:
            a, b = _TENSILE_USE[use]
            tpl = _TENSILE_950 if self.model.isa == "ISA950" else _TENSILE_942
            return tpl.format(a=a, b=b, m=m, n=n, k=k, l=1 if m >= 256 else 0, w=wgm)
        layout = {"fwd": "tn", "dgrad": "nn", "wgrad": "nt"}[use]
        if use == "fwd":
            return f"nvjet_tst_{m}x{n}_{k}x4_2x1_v_bz_coopA_{layout.upper()}N"
        return (f"sm90_xmma_gemm_bf16bf16_bf16f32_f32_{layout}_n_tilesize{m}x{n}x{k}_"
                "warpgroupsize2x1x1_execute_segment_k_off_kernel__5x_cublas")

    def small_gemm(self) -> str:
        """A small GEMM (MoE router): CUTLASS on NVIDIA, a small-tile Tensile kernel on AMD."""
        if self.amd:
            return self.gemm("fwd", (64, 32, 256), wgm=1)
        k = "cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_16x16_128x2_tn_align8"
        return f"void cutlass::Kernel2<{k}>({k}::Params)"

    def gemm_op(self, ops: OpNamer, use: str = "fwd") -> str:
        """HLO name of a GEMM custom call: ``custom-call.N`` on ROCm; XLA:GPU on NVIDIA names
        cuBLASLt calls ``cublas-lt-matmul.N`` (forward here) and cuBLAS ones ``cublas-gemm.N``."""
        if self.amd:
            return ops("custom-call")
        return ops("cublas-lt-matmul" if use == "fwd" else "cublas-gemm")

    def gemm_target(self, use: str = "fwd") -> str:
        """Custom-call target: ``__cublas$gemm`` (hipBLASLt on ROCm, cuBLAS on NVIDIA) or
        ``__cublas$lt$matmul`` (NVIDIA forward GEMMs)."""
        return "__cublas$lt$matmul" if not self.amd and use == "fwd" else "__cublas$gemm"

    @property
    def gemm_workspace(self) -> int:
        """Bytes of the s8 scratch a GEMM custom call returns (hipBLASLt 32 MiB, cuBLAS 4 MiB)."""
        return 32 << 20 if self.amd else 4 << 20

    @property
    def attention_workspace(self) -> int:
        """Bytes of the u8 scratch of a cuDNN attention call (TE calls return none here)."""
        return 0 if self.amd else 1 << 20

    # -- attention ---------------------------------------------------------------------------
    def attention(self, part: str) -> str:
        if self.amd:
            head = (f"ck_tile::{self.model.ck_arch}, 2" if self.model.isa == "ISA950"
                    else "256, 1")
            return f"void ck_tile::kentry<{head}, {_CK_KERNELS[part]}>"
        return _CUDNN_SDPA[part]

    def attention_parts(self, direction: str) -> list[str]:
        if direction == "fwd":
            return ["fwd"]
        if self.amd:
            return ["bwd_dot_do_o", "bwd_dq_dk_dv", "bwd_convert_dq"]
        return ["bwd_dq_dk_dv"]

    # -- XLA symbols ---------------------------------------------------------------------------
    def xla_kernel(self, op: str) -> str:
        sym = op.replace(".", "_")
        return f"{sym}.kd" if self.amd else sym

    # -- collectives ---------------------------------------------------------------------------
    def collective(self, ctype: str) -> str:
        if self.amd:
            return f"ncclDevKernel_Generic_{1 if ctype == 'all-to-all' else 4}{_NCCL_ARGS}"
        return _NCCL_TYPED[ctype] + _NCCL_ARGS

    # -- copies ----------------------------------------------------------------------------------
    def copy(self, direction: str) -> tuple[str, str]:
        """(kind, name) of a copy: a HIP blit kernel on AMD, a memcpy record on NVIDIA."""
        if self.amd:
            return "kernel", "__amd_rocclr_copyBuffer.kd"
        return "memcpy", {"h2d": "MemcpyH2D", "d2d": "MemcpyD2D", "d2h": "MemcpyD2H"}[direction]

    # -- host APIs -------------------------------------------------------------------------------
    def launch_api(self, what: str) -> str:
        """Host API that launches ``what`` (gemm, xla, attention, collective, copy_h2d, ...)."""
        if self.amd:
            return {"gemm": "hipExtModuleLaunchKernel", "collective": "hipExtLaunchKernel",
                    "attention": "hipLaunchKernel", "copy_h2d": "hipMemcpyHtoDAsync",
                    "copy_d2d": "hipMemcpyDtoDAsync"}.get(what, "hipModuleLaunchKernel")
        return {"gemm": "cudaLaunchKernel", "collective": "cuLaunchKernelEx",
                "attention": "cuLaunchKernel", "copy_h2d": "cuMemcpyHtoDAsync_v2",
                "copy_d2d": "cuMemcpyDtoDAsync_v2"}.get(what, "cuLaunchKernel")

    # -- geometry ---------------------------------------------------------------------------------
    def geometry(self, what: str, work: int) -> Geometry:
        """A plausible launch geometry: ``work`` is the output elements the kernel produces."""
        wg = 256 if self.amd else 128
        regs = 0 if self.model.kernel_details == "rocprofiler-sdk" else 128
        if what == "gemm":
            tiles = max(1, work // (256 * 256))
            return Geometry((tiles, 1, 1), (256 if self.amd else 384, 1, 1), regs,
                            65536 if self.amd else 213_248)
        if what == "attention":
            return Geometry((max(1, work // (128 * 128)), 32, 1), (256 if self.amd else 384, 1, 1),
                            regs, 32768 if self.amd else 180_224)
        if what == "collective":
            return Geometry((16, 1, 1), (256 if self.amd else 640, 1, 1), regs // 2, 0)
        if what == "copy":
            return Geometry((max(1, min(work // (512 * 16), 65535)), 1, 1), (512, 1, 1), 0, 0)
        return Geometry((max(1, min(work // (wg * 8), 2**20)), 1, 1), (wg, 1, 1), regs // 4, 0)
