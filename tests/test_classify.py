"""Tests for the kernel classifier (tracelens.classify, docs/definitions.md#categories)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import polars as pl
import pytest

from tracelens.classify import Match, RuleSet, classify, explain, load_rules
from tracelens.core.errors import TraceInputError
from tracelens.core.model import CATEGORIES, CategoryDtype, KindDtype, Text

SHARED = Path(__file__).resolve().parents[2] / "shared"
ORACLES = SHARED / "oracles"
ROCPROF_908 = SHARED / "traces" / "rocprof" / "mi350x_908_results.json.gz"

# A real 635-character hipBLASLt name from the MI300X conv trace (conv08), shortened in the middle.
CIJK = ("Cijk_Ailk_Bljk_BBS_BH_MT256x128x64_MI16x16x16x1_SN_1LDSB0_APM1_ABV0_ACED0_AF0EM1_AF1EM1"
        "_AMAS3_ASE_ASGT_ASLT_ASM_ASAE01_ASCE01_ASEM1_AAC0_BL1_BS1_CLR1_WG32_8_1_WGM1.kd")
RCCL_GENERIC = "ncclDevKernel_Generic_4(ncclDevKernelArgsStorage<4096ul>)"
_EIGEN_MAP = ("Eigen::TensorMap<Eigen::Tensor<float const, 1, 1, long>, 16, Eigen::MakePointer> "
              "const")
# kernel name -> (category, subcategory, rule id); also the names of tests/test_name_dtype.py's
# written B200 and V100 traces
B6_NAMES: dict[str, tuple[str, str | None, str]] = {
    "bmm_MxE4m3_MxE2m1MxE4m3_Fp32_t128x256x256u2_s3_et128x256_m256x256x32_cga1x1x1_16dp256b_TN_"
    "transOut_schedS_bN_sm100f": ("gemm", None, "gemm.trtllm_gen"),
    "bmm_Bfloat16_MxE2m1MxE4m3_Fp32_Ab32_Bb32_t128x8x512_s3_et128x8_m128x8x32_c1x1x1_rM_TN_"
    "transOut_schedS_bN_sm100f": ("gemm", None, "gemm.trtllm_gen"),
    "bmm_E4m3_E4m3E4m3_Fp32_t128x128x128_s4_et128x128_m128x128x32_cga1x1x1_16dp256b_TN_schedS_"
    "sm100f": ("gemm", None, "gemm.trtllm_gen"),
    "void moe::dev::routing::routingRenormalize::routingIndicesClusterKernel<moe::dev::routing::"
    "routingRenormalize::KernelParams<__nv_bfloat16, __nv_bfloat16, 8, true> >(moe::dev::routing::"
    "routingRenormalize::KernelParams<__nv_bfloat16, __nv_bfloat16, 8, true>)":
        ("reduction", "moe-routing", "reduction.moe_dev_routing"),
    "void moe::dev::routing::routingDeepSeek::routingMainKernel<moe::dev::routing::routingDeepSeek"
    "::KernelParams<float, __nv_bfloat16, 8, true> >(moe::dev::routing::routingDeepSeek::"
    "KernelParams<float, __nv_bfloat16, 8, true>)":
        ("reduction", "moe-routing", "reduction.moe_dev_routing"),
    "void moe::dev::activation::activationKernel<moe::dev::activation::KernelParams<__nv_fp8_e4m3,"
    " 128, true> >(moe::dev::activation::KernelParams<__nv_fp8_e4m3, 128, true>)":
        ("elementwise", "activation", "elementwise.moe_dev"),
    "void moe::dev::permute::permuteKernel<moe::dev::permute::KernelParams<cutlass::bfloat16_t, "
    "true> >(moe::dev::permute::KernelParams<cutlass::bfloat16_t, true>)":
        ("elementwise", "data-movement", "elementwise.moe_dev"),
    "void moe::dev::finalize::finalizeKernel<moe::dev::finalize::KernelParams<cutlass::bfloat16_t, "
    "cutlass::bfloat16_t, 4, true> >(moe::dev::finalize::KernelParams<cutlass::bfloat16_t, "
    "cutlass::bfloat16_t, 4, true>)": ("reduction", "moe-finalize", "reduction.moe_dev_finalize"),
    # a real B200 vLLM DeepSeek trace's names: FlashInfer's CuTe DSL MXFP8 quantization (was
    # gemm.nvidia by its kernel_cutlass_ prefix) and top-k selection kernels (were other)
    "kernel_cutlass_kernel_flashinferquantizationkernelsmxfp8_quantizeMXFP8QuantizeSwizzledKernel_"
    "object_at__tensorptrbf16gmem": ("elementwise", "quantize", "elementwise.cute_quantize"),
    "_dsv4_topk_kernel": ("reduction", "topk", "reduction.topk"),
    "void at::native::mbtopk::computeBlockDigitCounts<float, unsigned int, unsigned int, 2>(at::"
    "cuda::detail::TensorInfo<float const, unsigned int>)": ("reduction", "topk", "reduction.topk"),
    "void vllm::cooperative::cooperative_topk_cs2<512u>(vllm::cooperative::CooperativeTopKParams"
    "<512u>)": ("reduction", "topk", "reduction.topk"),
    "void Eigen::internal::EigenMetaKernel<Eigen::TensorEvaluator<Eigen::TensorAssignOp<Eigen::"
    "TensorMap<Eigen::Tensor<float, 1, 1, long>, 16, Eigen::MakePointer>, Eigen::"
    "TensorCwiseBinaryOp<Eigen::internal::scalar_sum_op<float const, float const>, "
    f"{_EIGEN_MAP}, {_EIGEN_MAP}> const> const, Eigen::GpuDevice>, long>(Eigen::TensorEvaluator"
    "<...>, long)":
        ("elementwise", None, "elementwise.eigen"),
    "void Eigen::internal::EigenMetaKernel<Eigen::TensorEvaluator<Eigen::TensorAssignOp<Eigen::"
    "TensorMap<Eigen::Tensor<float, 1, 1, long>, 16, Eigen::MakePointer>, Eigen::TensorReductionOp<"
    "Eigen::internal::MaxReducer<float>, Eigen::IndexList<Eigen::type2index<1l> > const, "
    f"{_EIGEN_MAP}, Eigen::MakePointer> const> const, Eigen::GpuDevice>, long>(...)":
        ("reduction", None, "reduction.eigen"),
    "void Eigen::internal::FullReductionKernel<256, 128, Eigen::TensorReductionEvaluatorBase<"
    "Eigen::TensorReductionOp<Eigen::internal::SumReducer<float>, Eigen::IndexList<Eigen::"
    "type2index<0l> >"
    f" const, {_EIGEN_MAP}, Eigen::MakePointer> const, Eigen::GpuDevice>, "
    "Eigen::internal::SumReducer<float>, long>(Eigen::internal::SumReducer<float>, ...)":
        ("reduction", None, "reduction.eigen"),
    "void tensorflow::functor::RowReduceKernel<float const*, float*, cub::Sum>(float const*, "
    "float*, int, int, cub::Sum, float)": ("reduction", None, "reduction.tf_reduce"),
    "void tensorflow::BiasNHWCKernel<float>(int, float const*, float const*, float*, int)":
        ("elementwise", None, "elementwise.tf"),
    "void tensorflow::concat_fixed_kernel<float, int>(tensorflow::GpuDeviceArrayStruct<float "
    "const*, 8>, float*, int, int)": ("elementwise", "data-movement", "elementwise.tf"),
    "void tensorflow::BiasGradNHWC_SharedAtomics<float>(int, float const*, float*, int)":
        ("reduction", None, "reduction.tf_bias_grad"),
    "void tensorflow::(anonymous namespace)::GenerateNormalizedProb<float, float>(float const*, "
    "float const*, float const*, float*, int, int, bool)":
        ("reduction", "softmax", "reduction.tf_softmax"),
    "void Eigen::internal::EigenContractionKernel<Eigen::TensorEvaluator<...>, Eigen::GpuDevice>"
    "(...)": ("gemm", None, "gemm.eigen"),
}

# (kernel name, HLO op, category, subcategory, rule id)
CASES = [
    # hipBLASLt / Tensile
    ("Cijk_Ailk_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT64x32x256_MI16x16x1_SN_LDSB1_AFC0_ISA950_"
     "IU1_K1_WG32_8_1.kd", None, "gemm", None, "gemm.tensile"),
    ("Cijk_Alik_Bljk_B_BS_BH_Bias_HA_S_SAV_UserArgs_MT256x128x64_MI16x16x1_SN_LDSB1_ISA942",
     None, "gemm", None, "gemm.tensile"),
    ("Custom_Cijk_Alik_Bljk_F8BS_BH_shortname0", None, "gemm", None, "gemm.tensile"),
    ("Cijk_SB_BiasB_HAS_ScaleAlphaVec_PostGSU16_VW4", None, "gemm", None, "gemm.tensile"),
    ("Dijk_BS_MT32x32_VW4_Reduction", None, "gemm", None, "gemm.tensile"),
    (CIJK, "custom-call.1", "gemm", None, "gemm.tensile"),
    # the conv's Tensile GEMM counts as convolution (op beats name for convolutions)
    (CIJK, "cudnn-conv.1", "convolution", "fwd", "convolution.hlo_conv_kernel"),
    ("Im3d2Col.kd", "cudnn-conv.1", "convolution", "fwd", "convolution.hlo_conv_kernel"),
    ("Im3d2Col.kd", None, "convolution", None, "convolution.miopen"),
    # CK / aiter
    ("void ck_tile::kentry<ck_tile::gfx950_t, 2, ck_tile::FmhaFwdKernel<ck_tile::"
     "BlockFmhaPipelineQRKSVSAsync<ck_tile::BlockFmhaPipelineProblem<std::bfloat16_t, float>>>>()",
     None, "attention", "fwd", "attention.ck_fmha"),
    ("void ck_tile::kentry<256, 1, ck_tile::FmhaBwdDQDKDVKernel<ck_tile::BlockFmhaBwdPipeline>>()",
     None, "attention", "bwd", "attention.ck_fmha"),
    ("void ck_tile::kentry<ck_tile::gfx950_t, 1, ck_tile::FmhaBwdOGradDotOKernel<float>>()",
     None, "attention", "bwd", "attention.ck_fmha"),
    ("_ZN7ck_tile6kentryILi1ENS_13FmhaFwdKernelEEEvv", None, "attention", "fwd",
     "attention.ck_fmha"),
    ("void ck_tile::kentry<1, ck_tile::Rmsnorm2dFwd<ck_tile::Rmsnorm2dFwdPipelineOnePass<float>>>"
     "()", None, "reduction", "norm", "reduction.norm"),
    ("void ck_tile::kentry<1, ck_tile::GroupedGemmKernel<ck_tile::GemmSpatiallyLocalTilePartitioner"
     "<ck_tile::GemmShape>>>()", None, "gemm", None, "gemm.ck"),
    ("void ck::kernel_gemm_xdl_cshuffle_v3<ck::GridwiseGemmMultiD_ABScale_xdl_cshuffle_v3<ck::"
     "tensor_layout::gemm::RowMajor>>()", None, "gemm", None, "gemm.ck"),
    ("_ZN5aiter19fmha_fwd_hd128_bf16E", None, "attention", "fwd", "attention.aiter"),
    # SGLang's Triton attention backend (extend and split-KV decode); other _fwd names are not
    ("_fwd_kernel", None, "attention", "fwd", "attention.triton_lightllm"),
    ("_fwd_grouped_kernel_stage1", None, "attention", "fwd", "attention.triton_lightllm"),
    ("_fwd_kernel_stage2", None, "attention", "fwd", "attention.triton_lightllm"),
    ("_layer_norm_fwd_fused", None, "reduction", "norm", "reduction.norm"),
    # PyTorch memory-efficient attention (F/B) and FlashAttention-3 on Hopper
    ("fmha_cutlassF_bf16_aligned_64x128_rf_sm80(PyTorchMemEffAttention::AttentionKernel<cutlass::"
     "bfloat16_t, cutlass::arch::Sm80, true, 64, 128, 128, true, true>::Params)", None,
     "attention", "fwd", "attention.flash"),
    ("fmha_cutlassB_bf16_aligned_128x64_k128_sm80(PyTorchMemEffAttention::AttentionBackwardKernel"
     "<cutlass::arch::Sm80, cutlass::bfloat16_t, true, false, true, 128, 64, 128, false>::Params)",
     None, "attention", "bwd", "attention.flash"),
    ("void cutlass::device_kernel<flash::enable_sm90_or_later<flash::FlashAttnFwdSm90<flash::"
     "CollectiveMainloopFwdSm90<2, cute::tuple<cute::C<1>>>>>>(flash::FlashAttnFwdSm90::Params)",
     None, "attention", "fwd", "attention.flash"),
    ("void cutlass::device_kernel<flash::enable_sm90_or_later<flash::FlashAttnBwdSm90<flash::"
     "CollectiveMainloopBwdSm90<2>>>>(flash::FlashAttnBwdSm90::Params)", None, "attention",
     "bwd", "attention.flash"),
    ("aiter::fmha_bwd_hd128_bf16_causal_a16_psskddv", None, "attention", "bwd", "attention.aiter"),
    ("_ZN5aiter42pa_bf16_pertokenFp8_gqa10_1tg_4w_mtp3_msk1E", None, "attention", "fwd",
     "attention.aiter"),
    ("_ZN5aiter59fmoe_stage1_bf16_pertokenFp8_blockscale_g1u1_32x128_3tg_pf3E", None, "gemm",
     None, "gemm.aiter"),
    ("_ZN5aiter42fp8gemm_bf16_blockscale_BpreShuffle_32x128E", None, "gemm", None, "gemm.aiter"),
    ("_ZN5aiter24add_rmsnorm_quant_kernelIDF16bDF16bLi256ELi16ELb1ELb0ELb1ELi1EEEvPT0_", None,
     "reduction", "norm", "reduction.norm"),
    ("bf16gemm_fp32bf16_tn_32x64_splitk_clean", None, "gemm", None, "gemm.name"),
    # other attention
    ("attn_fwd", None, "attention", "fwd", "attention.aotriton"),
    ("bwd_kernel_fuse.kd", None, "attention", "bwd", "attention.aotriton"),
    ("_bwd_kernel_dk_dv", None, "attention", "bwd", "attention.aotriton"),
    ("flash_fwd_kernel", None, "attention", "fwd", "attention.flash"),
    ("cudnn_generated_fort_native_sdpa_sm90_flash_bprop_wgmma", None, "attention", "bwd",
     "attention.flash"),
    ("paged_attention_ll4mi_QKV_mfma16_kernel", None, "attention", "fwd", "attention.flash"),
    ("some_te_kernel", "te_fused_attn_forward_ffi.3", "attention", "fwd", "attention.hlo"),
    ("some_te_kernel", "te_fused_attn_backward_ffi", "attention", "bwd", "attention.hlo"),
    # collectives
    (RCCL_GENERIC, None, "collective", None, "collective.rccl_generic"),
    ("_Z23ncclDevKernel_Generic_424ncclDevKernelArgsStorageILm4096EE", None, "collective", None,
     "collective.rccl_generic"),
    (RCCL_GENERIC, "all-gather-start.2", "collective", "all-gather", "collective.rccl_generic"),
    ("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", None, "collective", "all-reduce",
     "collective.nccl"),
    ("ncclKernel_AllGather_RING_LL_Sum_float", None, "collective", "all-gather", "collective.nccl"),
    ("ncclSymkDevKernel_ReduceScatter_RailA2A_LsaLD_sum_bf16", None, "collective",
     "reduce-scatter", "collective.nccl"),
    ("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)", None,
     "collective", "send-recv", "collective.nccl"),
    ("mscclKernel_Sum_half_Simple_false(ncclDevComm*, mscclAlgo*, mscclWork*)", None,
     "collective", None, "collective.nccl"),
    ("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", "reduce-scatter.1", "collective",
     "reduce-scatter", "collective.nccl"),
    ("void vllm::cross_device_reduce_1stage<__half, 2>(vllm::RankData*, int)", None, "collective",
     "all-reduce", "collective.custom_allreduce"),
    ("void primus_turbo::deep_ep::intranode::cached_notify_combine<8>(void**, int*)", None,
     "collective", "all-to-all", "collective.deep_ep"),
    # communication other than NCCL/RCCL (issue 25 B5): these were other.fallback
    ("void dpsk::ep::internode::dispatch<true, 8, 4>(int4*, float*, int*, void*)", None,
     "collective", "all-to-all", "collective.ep_all_to_all"),
    ("void dpsk::ep::internode::cached_notify<8>(int, int*, int*, void**, int)", None,
     "collective", "all-to-all", "collective.ep_all_to_all"),
    ("void mori::moe::EpCombineInterNodeKernel<__hip_bfloat16>(mori::moe::EpDispatchCombineArgs"
     "<__hip_bfloat16>)", None, "collective", "all-to-all", "collective.ep_all_to_all"),
    ("void pplx::dispatchKernel<unsigned int, 8>(int, pplx::DispatchArgs)", None, "collective",
     "all-to-all", "collective.ep_all_to_all"),
    ("void nvshmemi_proxy_progress_kernel()", None, "collective", None, "collective.shmem"),
    ("void userbuffers_fp16_sum_inplace_gpu_rr_rs(int, int, int, int, int, int, void**, int)",
     None, "collective", None, "collective.userbuffers"),
    ("some_kernel", "collective-permute-done.1", "collective", "collective-permute",
     "collective.hlo"),
    # memory (runtime blits)
    ("__amd_rocclr_copyBuffer.kd", None, "memory", "copy", "memory.rocclr_copy"),
    ("__amd_rocclr_copyBuffer.kd", "copy.1", "memory", "copy", "memory.rocclr_copy"),
    ("__amd_rocclr_fillBufferAligned.kd", None, "memory", "fill", "memory.rocclr_fill"),
    ("__amd_rocclr_initHeap", None, "memory", "init-heap", "memory.rocclr_misc"),
    ("__amd_rocclr_streamOpsWait", None, "memory", "stream-wait", "memory.rocclr_misc"),
    ("__amd_rocclr_batchMemOp", None, "memory", "batch-mem-op", "memory.rocclr_misc"),
    ("MEMORY_COPY_DEVICE_TO_DEVICE", None, "memory", "d2d", "memory.kineto_copy"),
    # PyTorch
    ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, std::array"
     "<char*, 1ul> >(int, at::native::FillFunctor<float>, std::array<char*, 1ul>)", None,
     "elementwise", None, "elementwise.torch"),
    ("void at::native::elementwise_kernel_manual_unroll<128, 8, at::native::gpu_kernel_impl_nocast<"
     "at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)>>(int)", None, "elementwise",
     None, "elementwise.torch"),
    ("void at::native::reduce_kernel<128, 4, at::native::ReduceOp<c10::BFloat16, at::native::"
     "func_wrapper_t<c10::BFloat16, at::native::sum_functor<c10::BFloat16, float>>>>()", None,
     "reduction", None, "reduction.torch"),
    ("void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float, float, false>"
     "(int, float, float const*)", None, "reduction", "norm", "reduction.norm"),
    ("layer_norm_grad_input_kernel", None, "reduction", "norm", "reduction.norm"),
    ("void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous "
     "namespace)::TensorListMetadata<1>, at::native::LpNormFunctor<float>, float*, int>()", None,
     "reduction", None, "reduction.torch"),
    ("void at::native::(anonymous namespace)::CatArrayBatchedCopy_contig<at::native::(anonymous "
     "namespace)::OpaqueType<4u>, unsigned int, 1, 128, 1>()", None, "elementwise", None,
     "elementwise.torch"),
    ("void at::native::(anonymous namespace)::softmax_warp_forward<float, float, float, 10>()",
     None, "reduction", "softmax", "reduction.softmax"),
    ("void rocprim::ROCPRIM_400001_NS::detail::radix_sort_block_sort_kernel<rocprim::"
     "ROCPRIM_400001_NS::detail::lookback_scan_state<long>>()", None, "reduction", "sort",
     "reduction.sort"),
    # Triton / Inductor
    ("triton_poi_fused_add_mul_silu_0", None, "elementwise", None, "elementwise.triton_inductor"),
    ("triton_poi_fused_convolution_relu_1", None, "elementwise", None,
     "elementwise.triton_inductor"),
    ("triton_red_fused__to_copy_add_mul_native_dropout_backward_0", None, "reduction", None,
     "reduction.triton_inductor"),
    ("triton_per_fused_native_layer_norm_0", None, "reduction", None, "reduction.triton_inductor"),
    ("matmul_kernel", None, "gemm", None, "gemm.triton"),
    ("_gemm_a8w8_blockscale_kernel_GROUP_K_128_GROUP_N_128", None, "gemm", None, "gemm.triton"),
    ("wvSplitK_hf_sml_", None, "gemm", None, "gemm.vllm"),
    # NVIDIA
    ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64", None, "gemm", None,
     "gemm.nvidia"),
    ("nvjet_tst_128x256_64x4_2x1_v_bz_coopA_NNT", None, "gemm", None, "gemm.nvidia"),
    ("ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_32x5_nn", None, "gemm", None,
     "gemm.nvidia"),
    ("implicit_convolve_sgemm", None, "convolution", None, "convolution.name"),
    ("sm80_xmma_fprop_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc", None, "convolution",
     "fwd", "convolution.name"),
    # MIOpen
    ("igemm_fwd_gtcx3_nhwc_fp16_bx0_ex0_bt128x128x32_wt32x32x8_ws1x1_wr2x2_ta1x8x2x1_1x4x1x64",
     None, "convolution", "fwd", "convolution.miopen"),
    ("igemm_wrw_gtcx3_nhwc_fp16_bx0_ex0_bt128x128x32", None, "convolution", "bwd-filter",
     "convolution.miopen"),
    ("miopenSp3AsmConv_v30_3_1_gfx9_fp32_f2x3_stride1", None, "convolution", None,
     "convolution.miopen"),
    ("naive_conv_fwd_nchw_half_double_half", None, "convolution", "fwd", "convolution.miopen"),
    ("MIOpenBatchNormFwdTrainSpatial", None, "reduction", "norm", "reduction.norm"),
    # XLA on ROCm (kernel symbols)
    ("loop_add_fusion.kd", "loop_add_fusion", "elementwise", None, "elementwise.xla_fusion"),
    ("loop_convert_fusion_2.kd", None, "elementwise", None, "elementwise.xla_fusion"),
    ("wrapped_convert.kd", "wrapped_convert", "elementwise", None, "elementwise.xla_fusion"),
    ("input_reduce_fusion_1.kd", None, "reduction", None, "reduction.xla"),
    ("loop_reduce_fusion.kd", "loop_reduce_fusion", "reduction", None, "reduction.xla"),
    ("gemm_fusion_dot.kd", "gemm_fusion_dot", "gemm", None, "gemm.xla"),
    ("gemm_fusion_dot_general_1.kd", "gemm_fusion_dot_general.1", "gemm", None, "gemm.xla"),
    ("input_transpose_fusion.kd", "input_transpose_fusion", "elementwise", "data-movement",
     "elementwise.xla_data_movement"),
    ("input_transpose_fusion_1.kd", None, "elementwise", "data-movement",
     "elementwise.xla_data_movement"),
    ("loop_transpose_fusion.kd", None, "elementwise", "data-movement",
     "elementwise.xla_data_movement"),
    ("wrapped_transpose.kd", None, "elementwise", "data-movement", "elementwise.xla_data_movement"),
    ("input_concatenate_fusion.kd", None, "elementwise", "data-movement",
     "elementwise.xla_data_movement"),
    # XLA:CPU (name == op)
    ("dot.3", "dot.3", "gemm", None, "gemm.xla"),
    ("all-reduce.3", "all-reduce.3", "collective", "all-reduce", "collective.hlo"),
    ("all-gather-start.1", "all-gather-start.1", "collective", "all-gather", "collective.hlo"),
    ("wrapped_tanh", "wrapped_tanh", "elementwise", None, "elementwise.xla_fusion"),
    ("broadcast_multiply_fusion", "broadcast_multiply_fusion", "elementwise", None,
     "elementwise.xla_fusion"),
    ("copy_subtract_fusion.1", "copy_subtract_fusion.1", "elementwise", None,
     "elementwise.xla_fusion"),
    ("multiply_add_fusion", "multiply_add_fusion", "elementwise", None, "elementwise.xla_fusion"),
    ("tanh.2", "tanh.2", "elementwise", None, "elementwise.xla_op"),
    ("reduce.4", "reduce.4", "reduction", None, "reduction.xla"),
    ("add_reduce_fusion.1", "add_reduce_fusion.1", "reduction", None, "reduction.xla"),
    ("convolution.2", "convolution.2", "convolution", None, "convolution.hlo_conv_kernel"),
    ("ynn_fusion.1", "ynn_fusion.1", "other", None, "other.opaque_xla"),
    ("fusion.12", "fusion.12", "other", None, "other.opaque_xla"),
    # ---- real names from ../shared/traces (Kineto JSON, rocprofv3 counter CSVs of llama.cpp) ----
    ("sage_fwd", None, "attention", "fwd", "attention.sage"),
    ("void gated_delta_net_cuda<128, false, false>(float const*, float const*, float const*, "
     "float const*, float const*, float const*, float*, float*, long, long, long, long, long, "
     "long, long, long, long, long, long, long, HIP_vector_type<unsigned int, 3u>, "
     "HIP_vector_type<unsigned int, 3u>, float, long, int)",
     None, "attention", None, "attention.linear"),
    ("void flash_attn_tile<256, 256, 8, 4, false>(char const*, char const*, char const*, "
     "char const*, char const*, int const*, float*, HIP_vector_type<float, 2u>*, float, "
     "float, float, float, unsigned int, float, int, HIP_vector_type<unsigned int, 3u>, int, "
     "int, int, int, int, int, int, int, int, int, int, long, int, int, long, int, int, int, "
     "int, int, long)",
     None, "attention", None, "attention.flash"),
    ("void flash_attn_combine_results<256>(float const*, HIP_vector_type<float, 2u> const*, "
     "float*, int)",
     None, "attention", None, "attention.flash"),
    ("Im2d2Col_v2", None, "convolution", None, "convolution.miopen"),
    ("cudnn_infer_ampere_scudnn_128x64_relu_xregs_large_nn_v1",
     None, "convolution", None, "convolution.name"),
    ("void cudnn::cnn::reduce_wgrad_nchw_helper<float, float>(void*, void const*, float, int, "
     "int)",
     None, "convolution", "bwd-filter", "convolution.name"),
    ("void mul_mat_q<(ggml_type)14, 64, false>(char const*, int const*, int const*, "
     "int const*, float*, float*, HIP_vector_type<unsigned int, 3u>, int, int, int, int, int, "
     "HIP_vector_type<unsigned int, 3u>, HIP_vector_type<unsigned int, 3u>, int, int, int, "
     "HIP_vector_type<unsigned int, 3u>, HIP_vector_type<unsigned int, 3u>, int, int, int, "
     "HIP_vector_type<unsigned int, 3u>)",
     None, "gemm", None, "gemm.ggml"),
    ("void mul_mat_vec_q<(ggml_type)13, 1, false, false>(void const*, void const*, "
     "int const*, ggml_cuda_mm_fusion_args_device, float*, unsigned int, "
     "HIP_vector_type<unsigned int, 3u>, unsigned int, unsigned int, unsigned int, "
     "HIP_vector_type<unsigned int, 3u>, unsigned int, unsigned int, unsigned int, "
     "HIP_vector_type<unsigned int, 3u>, unsigned int, unsigned int, unsigned int, "
     "unsigned int)",
     None, "gemm", None, "gemm.ggml"),
    ("void mul_mat_vec_dq_q6_K<32, 1>(void const*, float const*, float*, int, int)",
     None, "gemm", None, "gemm.ggml"),
    ("_matmul_ogs_NNT_bf16xbf16xmxfp4_128x128x128x1_swiglu", None, "gemm", None, "gemm.triton"),
    ("_finalize_matmul_scatter_bf16", None, "gemm", None, "gemm.triton"),
    ("void fbgemm_gpu::permute_2D_lengths_kernel<int>(int, int, int const*, int const*, int*)",
     None, "elementwise", None, "elementwise.torch"),
    ("void split_embedding_codegen_forward_unweighted_kernel<c10::Half, c10::Half, float, "
     "false, long, 2ul, 32ul>(at::GenericPackedTensorAccessor<c10::Half, 1ul, "
     "at::RestrictPtrTraits, long>, at::GenericPackedTensorAccessor<c10::Half, 1ul, "
     "at::RestrictPtrTraits, long>, at::GenericPackedTensorAccessor<c10::Half, 2ul, "
     "at::RestrictPtrTraits, long>, at::GenericPackedTensorAccessor<int, 1ul, "
     "at::RestrictPtrTraits, int>, at::GenericPackedTensorAccessor<long, 1ul, "
     "at::RestrictPtrTraits, int>, at::GenericPackedTensorAccessor<int, 1ul, "
     "at::RestrictPtrTraits, int>, fbgemm_gpu::FixedDivisor, "
     "at::GenericPackedTensorAccessor<long, 1ul, at::RestrictPtrTraits, int>, "
     "at::GenericPackedTensorAccessor<long, 1ul, at::RestrictPtrTraits, int>, long, "
     "at::GenericPackedTensorAccessor<int, 1ul, at::RestrictPtrTraits, int>, "
     "at::GenericPackedTensorAccessor<float, 2ul, at::RestrictPtrTraits, long>)",
     None, "reduction", None, "reduction.segment"),
    ("void split_embedding_backward_codegen_rowwise_adagrad_unweighted_kernel_warp_per_row_1<c"
     "10::Half, float, c10::Half, 2ul, 32>(at::GenericPackedTensorAccessor<float, 2ul, "
     "at::RestrictPtrTraits, long>, at::GenericPackedTensorAccessor<c10::Half, 1ul, "
     "at::RestrictPtrTraits, long>, at::GenericPackedTensorAccessor<c10::Half, 1ul, "
     "at::RestrictPtrTraits, long>, at::GenericPackedTensorAccessor<c10::Half, 2ul, "
     "at::RestrictPtrTraits, long>, at::GenericPackedTensorAccessor<int, 1ul, "
     "at::RestrictPtrTraits, int>, at::GenericPackedTensorAccessor<long, 1ul, "
     "at::RestrictPtrTraits, int>, at::GenericPackedTensorAccessor<int, 1ul, "
     "at::RestrictPtrTraits, int>, at::GenericPackedTensorAccessor<long, 1ul, "
     "at::RestrictPtrTraits, int>, at::GenericPackedTensorAccessor<long, 1ul, "
     "at::RestrictPtrTraits, int>, at::GenericPackedTensorAccessor<int, 1ul, "
     "at::RestrictPtrTraits, int>, at::GenericPackedTensorAccessor<int, 1ul, "
     "at::RestrictPtrTraits, int>, at::GenericPackedTensorAccessor<int, 1ul, "
     "at::RestrictPtrTraits, int>, at::GenericPackedTensorAccessor<int, 1ul, "
     "at::RestrictPtrTraits, int>, int, bool, at::PhiloxCudaState, fbgemm_gpu::FixedDivisor, "
     "at::GenericPackedTensorAccessor<at::AccumulateType<c10::Half, true>::type, 1ul, "
     "at::RestrictPtrTraits, long>, "
     "at::GenericPackedTensorAccessor<at::AccumulateType<c10::Half, true>::type, 1ul, "
     "at::RestrictPtrTraits, long>, at::GenericPackedTensorAccessor<int, 1ul, "
     "at::RestrictPtrTraits, int>, at::GenericPackedTensorAccessor<long, 1ul, "
     "at::RestrictPtrTraits, int>, float, float, float, long)",
     None, "reduction", None, "reduction.segment"),
    ("void cudnn::bn_fw_tr_1C11_singleread<float, 512, true, 1, 2, "
     "0>(cudnn::bn_fw_tr_1C11_args<float>)",
     None, "reduction", "norm", "reduction.norm"),
    ("void cudnn::bn_bw_1C11_singleread<float, 512, true, 1, 2, "
     "0>(cudnn::bn_bw_1C11_args<float>)",
     None, "reduction", "norm", "reduction.norm"),
    ("void at::native::(anonymous namespace)::ComputeInternalGradientsCUDAKernel<float>(long, "
     "float const*, float const*, at::AccumulateType<float, true>::type*, "
     "at::AccumulateType<float, true>::type*)",
     None, "reduction", "norm", "reduction.norm"),
    ("void at::native::(anonymous namespace)::ComputeFusedParamsCUDAKernel<float>(long, long, "
     "long, float const*, float const*, float const*, float const*, at::AccumulateType<float, "
     "true>::type*, at::AccumulateType<float, true>::type*)",
     None, "reduction", "norm", "reduction.norm"),
    ("void l2_norm_f32<32>(float const*, float*, int, long, long, long, float)",
     None, "reduction", "norm", "reduction.norm"),
    ("void rms_norm_f32<1024, true, false>(float const*, float*, int, long, long, long, "
     "float, float const*, long, long, long, HIP_vector_type<unsigned int, 3u>, "
     "HIP_vector_type<unsigned int, 3u>, HIP_vector_type<unsigned int, 3u>, "
     "HIP_vector_type<unsigned int, 3u>, float const*, long, long, long, "
     "HIP_vector_type<unsigned int, 3u>, HIP_vector_type<unsigned int, 3u>, "
     "HIP_vector_type<unsigned int, 3u>, HIP_vector_type<unsigned int, 3u>)",
     None, "reduction", "norm", "reduction.norm"),
    ("void at::native::(anonymous namespace)::max_pool_backward_nchw<float, "
     "float>(float const*, long const*, int, long, long, long, int, int, int, int, int, int, "
     "int, int, int, int, float*)",
     None, "reduction", "pool", "reduction.pool"),
    ("void at::native::(anonymous namespace)::max_pool_forward_nchw<float, float>(int, "
     "float const*, long, long, long, int, int, int, int, int, int, int, int, int, int, "
     "float*, long*)",
     None, "reduction", "pool", "reduction.pool"),
    ("_topk_forward", None, "reduction", "moe-routing", "reduction.moe_routing"),
    ("_sum_bitmatrix_rows", None, "reduction", "moe-routing", "reduction.moe_routing"),
    ("_combined_routing_compute", None, "reduction", "moe-routing", "reduction.moe_routing"),
    ("_combined_routing_memset", None, "reduction", "moe-routing", "reduction.moe_routing"),
    ("reduce_segments", None, "reduction", "moe-routing", "reduction.moe_routing"),
    ("void k_bin_bcast<&(op_add(float, float)), float, float, float, "
     "float const*>(float const*, float const*, float*, unsigned int, unsigned int, "
     "unsigned int, HIP_vector_type<unsigned int, 3u>, HIP_vector_type<unsigned int, 3u>, "
     "HIP_vector_type<unsigned int, 3u>, HIP_vector_type<unsigned int, 3u>, "
     "HIP_vector_type<unsigned int, 3u>, unsigned int, unsigned int, unsigned int, "
     "unsigned int, unsigned int, unsigned int, unsigned int, unsigned int, unsigned int, "
     "unsigned int, unsigned int, float const*)",
     None, "elementwise", None, "elementwise.ggml"),
    ("void unary_op_kernel<&(op_sigmoid(float)), float>(float const*, float*, int)",
     None, "elementwise", None, "elementwise.ggml"),
    ("void unary_gated_op_kernel<&(op_silu(float)), float>(float const*, float const*, "
     "float*, long, long, long, long)",
     None, "elementwise", None, "elementwise.ggml"),
    ("scale_f32(float const*, float*, float, float, long)",
     None, "elementwise", None, "elementwise.ggml"),
    ("void k_get_rows_float<float, float>(float const*, int const*, float*, long, long, "
     "HIP_vector_type<unsigned int, 3u>, unsigned long, unsigned long, unsigned long, "
     "unsigned long, unsigned long, unsigned long, unsigned long, unsigned long, "
     "unsigned long)",
     None, "elementwise", None, "elementwise.ggml"),
    ("void k_set_rows<float, long, __half>(float const*, long const*, __half*, long, long, "
     "long, long, long, long, long, long, long, long, long, long, long, long, "
     "HIP_vector_type<unsigned int, 3u>, HIP_vector_type<unsigned int, 3u>, "
     "HIP_vector_type<unsigned int, 3u>, HIP_vector_type<unsigned int, 3u>, "
     "HIP_vector_type<unsigned int, 3u>)",
     None, "elementwise", None, "elementwise.ggml"),
    ("void cpy_scalar<&(void cpy_1_scalar<float, float>(char const*, char*))>(char const*, "
     "char*, long, long, long, long, long, long, long, long, long, long, long, long, long, "
     "long, long)",
     None, "elementwise", None, "elementwise.ggml"),
    ("void concat_cont<unsigned int, 1>(unsigned int const*, unsigned int const*, "
     "unsigned int*, long, long, long, long, long, long)",
     None, "elementwise", None, "elementwise.ggml"),
    ("void rotary_embedding_kernel<c10::BFloat16, true>(long const*, c10::BFloat16*, "
     "c10::BFloat16*, c10::BFloat16 const*, int, long, long, long, int, int, int)",
     None, "elementwise", "rotary", "elementwise.rotary"),
    ("void vllm::rotary_embedding_kernel<c10::BFloat16, true>(long const*, c10::BFloat16*, "
     "c10::BFloat16*, c10::BFloat16 const*, int, long, long, long, int, int, int)",
     None, "elementwise", "rotary", "elementwise.rotary"),
    ("void rope_multi<true, false, float>(float const*, float*, int, int, int, int, int, int, "
     "int, int, int, int, int const*, float, float, float, rope_corr_dims, float, "
     "float const*, mrope_sections, bool)",
     None, "elementwise", "rotary", "elementwise.rotary"),
    ("void (anonymous namespace)::store_kvcache<2048l, 4, false, "
     "long>((anonymous namespace)::StoreKVCacheParams)",
     None, "elementwise", "data-movement", "elementwise.kv_cache"),
    ("void vllm::reshape_and_cache_flash_kernel<__hip_bfloat16, __hip_bfloat16, "
     "(vllm::Fp8KVCacheDataType)0>(__hip_bfloat16 const*, __hip_bfloat16 const*, "
     "__hip_bfloat16*, __hip_bfloat16*, long const*, long, long, long, long, long, int, int, "
     "int, float const*, float const*, int)",
     None, "elementwise", "data-movement", "elementwise.kv_cache"),
    ("quantize_q8_1(float const*, void*, long, long, long, long, long, unsigned int, "
     "HIP_vector_type<unsigned int, 3u>)",
     None, "elementwise", "quantize", "elementwise.quantize"),
    ("void quantize_mmq_q8_1<(mmq_q8_1_ds_layout)1>(float const*, int const*, void*, long, "
     "long, long, long, long, int, int)",
     None, "elementwise", "quantize", "elementwise.quantize"),
    ("sage_quant_kernel", None, "elementwise", "quantize", "elementwise.quantize"),
    ("void fbgemm_gpu::(anonymous namespace)::_compute_FP8_quantize_cuda_kernel<float>(float c"
     "onst*, float const*, int, int, unsigned char*, bool)",
     None, "elementwise", "quantize", "elementwise.quantize"),
    ("void at::native::vectorized_elementwise_kernel<4, "
     "fbgemm_gpu::_hfp8_to_float_gpu(at::Tensor const&, long, "
     "long)::{lambda(unsigned char)#1}, at::detail::Array<char*, 2> >(int, "
     "fbgemm_gpu::_hfp8_to_float_gpu(at::Tensor const&, long, "
     "long)::{lambda(unsigned char)#1}, at::detail::Array<char*, 2>)",
     None, "elementwise", "quantize", "elementwise.quantize"),
    ("void cudnn::ops::nchwToNhwcKernel<float, float, float, false, true, "
     "(cudnnKernelDataType_t)2>(cudnn::ops::nchw2nhwc_params_t<float>, float const*, float*)",
     None, "elementwise", None, "elementwise.torch"),
    ("void at::native::(anonymous namespace)::upsample_nearest2d_out_frame<c10::BFloat16, "
     "&at::native::nearest_neighbor_compute_source_index>(c10::BFloat16 const*, "
     "c10::BFloat16*, unsigned long, unsigned long, unsigned long, unsigned long, "
     "unsigned long, float, float)",
     None, "elementwise", None, "elementwise.torch"),
    # the first 180 of its 5,096 characters (names arrive truncated too)
    ("void at::native::(anonymous namespace)::distribution_elementwise_grid_stride_kernel<float, "
     "4, at::native::templates::cuda::normal_and_transform<float, float, at::CUDAGeneratorImpl*, ",
     None, "elementwise", None, "elementwise.torch"),
    ("void bounds_check_indices_kernel<long, false>(at::GenericPackedTensorAccessor<long, "
     "1ul, at::RestrictPtrTraits, int>, at::GenericPackedTensorAccessor<long, 1ul, "
     "at::RestrictPtrTraits, int>, at::GenericPackedTensorAccessor<long, 1ul, "
     "at::RestrictPtrTraits, int>, int const*, long, at::GenericPackedTensorAccessor<long, "
     "1ul, at::RestrictPtrTraits, int>, fbgemm_gpu::FixedDivisor)",
     None, "elementwise", None, "elementwise.torch"),
    ("void linearize_index_kernel<long>(at::GenericPackedTensorAccessor<long, 1ul, "
     "at::RestrictPtrTraits, int>, at::GenericPackedTensorAccessor<long, 1ul, "
     "at::RestrictPtrTraits, int>, at::GenericPackedTensorAccessor<long, 1ul, "
     "at::RestrictPtrTraits, int>, at::GenericPackedTensorAccessor<int, 1ul, "
     "at::RestrictPtrTraits, int>, at::GenericPackedTensorAccessor<long, 1ul, "
     "at::RestrictPtrTraits, int>)",
     None, "elementwise", None, "elementwise.torch"),
    ("void fbgemm_gpu::_offsets_range_cuda_kernel<int>(long, long, int const*, int*)",
     None, "elementwise", None, "elementwise.torch"),
    ("ncclKernel_Broadcast_RING_LL_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)",
     None, "collective", "collective-broadcast", "collective.nccl"),
    ("ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)",
     None, "collective", "all-reduce", "collective.nccl"),
    ("_ZN7ck_tile6kentryILi2ENS_38FmhaBatchPrefillWithPagedKVCacheKernelINS_40BlockFmhaBatchPr"
     "efillPipelineQRKSVSAsyncINS_36BlockFmhaBatchPrefillPipelineProblemIDF16bDF16bDF16bffDF16"
     "bhfDF16bfDF16bNS_13TileFmhaShapeINS_8sequenceIJLi128ELi128ELi32ELi128ELi32ELi128EEEENS5_"
     "IJLi4ELi1ELi1EEEENS5_IJLi32ELi32ELi16EEEES7_S8_Lb1EEELb1ENS_17ComposedAttentionILj0ELb1E"
     "EENS_30SimplifiedGenericAttentionMaskILb1EEELb0ELi1ENS_26TileFmhaBatchPrefillTraitsILb1E"
     "Lb1ELb1ELb1ELb0ELNS_22BlockAttentionBiasEnumE0ELb0ELb0ELb0ELNS_28BlockAttentionQuantScal"
     "eEnumE0ELin1ELb0ELb0ELi1ELNS_37BlockAttentionKVCacheMemoryLayoutEnumE1ELNS_36BlockAttent"
     "ionKVCacheLookupTableEnumE1ELNS_33BlockAttentionKVCacheLoadModeEnumE0EEEEENS_53BlockFmha"
     "BatchPrefillPipelineQRKSVSAsyncDefaultPolicyEEENS_17Default2DEpilogueINS_24Default2DEpil"
     "ogueProblemIfDF16bLb1ELb1ELb1EEEvEEEEJNSS_21FmhaFwdGroupModeKargsEEEEvDpT1_",
     None, "attention", "fwd", "attention.ck_fmha"),
    ("_ZN7sgl_hip10activation18act_and_mul_kernelI14__hip_bfloat16TnPFT_RKS3_EXadL_Z4siluIS2_E"
     "S3_S5_EEEEvPS3_PS4_i",
     None, "elementwise", None, "elementwise.torch"),
    # llama.cpp softmax (the ggml-cuda kernel name; the shared gfx1151 rows have no softmax)
    ("soft_max_f32", None, "reduction", "softmax", "reduction.softmax"),
    ("totally_unknown_kernel", None, "other", None, "other.fallback"),
    ("stopKernel", None, "other", None, "other.fallback"),
    # cuDNN's CUTLASS convolution kernels of the real A100 trace (were gemm.nvidia by 'cutlass')
    ("void cutlass_cudnn_infer::Kernel<cutlass_tensorop_s1688dgrad_optimized_tf32_64x256_32x4_"
     "nhwc_align4>(cutlass_tensorop_s1688dgrad_optimized_tf32_64x256_32x4_nhwc_align4::Params)",
     None, "convolution", "bwd-data", "convolution.name"),
    ("void cutlass_cudnn_train::Kernel<cutlass_cudnn_train::reduction::kernel::ReduceSplitK<"
     "cutlass_cudnn_train::MatrixShape<4, 128>, float> >(Params)", None, "convolution", None,
     "convolution.name"),  # 'topK' inside a word is not top-k
    # issue 25 B6: MoE and low-precision GEMMs (B200 TRT-LLM/FlashInfer), TensorFlow's Eigen
    # kernels (all were other.fallback, the finalize one gemm.nvidia by its cutlass:: argument)
    *[(n, None, *want) for n, want in B6_NAMES.items()],
]


@pytest.mark.parametrize(("name", "op", "category", "subcategory", "rule_id"), CASES,
                         ids=[f"{c[0][:40]}|{c[1]}" for c in CASES])
def test_reference_names(name: str, op: str | None, category: str, subcategory: str | None,
                         rule_id: str) -> None:
    m = explain(name, op)
    assert (m.category, m.subcategory, m.rule_id) == (category, subcategory, rule_id)


def test_builtin_rules_are_well_formed() -> None:
    rules = load_rules()
    ids = [r.id for r in rules]
    assert len(ids) == len(set(ids))
    assert ids[0] == "memory.kind" and ids[-1] == "other.fallback"
    for rule in rules:
        assert rule.category in CATEGORIES
        assert rule.description and rule.description.endswith(".")
        assert rule.id.split(".")[0] == rule.category
    assert load_rules() is rules  # parsed once, cached
    assert load_rules([]) is rules


# ---- the shared real traces -------------------------------------------------------------------

def _gviz_rows(path: Path) -> list[dict]:
    table = json.loads(path.read_text())
    if isinstance(table, list):
        table = table[0]
    cols = [c["id"] for c in table["cols"]]
    return [dict(zip(cols, [cell["v"] if cell else None for cell in row["c"]]))
            for row in table["rows"]]


def _oracle_files(name: str) -> list[Path]:
    files = sorted(ORACLES.glob(f"*/{name}"))
    if not files:
        pytest.skip(f"no {name} under {ORACLES} (shared oracles absent)")
    return files


def test_xprof_oracle_kernel_names_are_not_other() -> None:
    seen = {}
    for path in _oracle_files("xprof_kernel_stats.json"):
        for row in _gviz_rows(path):
            seen[row["kernel_name"]] = explain(row["kernel_name"])  # op_name is a JAX op, not HLO
    assert len(seen) >= 15
    others = {n: m.rule_id for n, m in seen.items() if m.category == "other"}
    assert others == {}
    expected = {"loop_convert_fusion.kd": "elementwise", "wrapped_broadcast.kd": "elementwise",
                "__amd_rocclr_copyBuffer.kd": "memory", "gemm_fusion_dot_general_1.kd": "gemm",
                "Im3d2Col.kd": "convolution", "input_reduce_fusion.kd": "reduction",
                "input_transpose_fusion.kd": "elementwise"}
    for name, category in expected.items():
        assert seen[name].category == category, name
    assert all(m.category == "gemm" for n, m in seen.items() if n.startswith("Cijk_"))


def test_xprof_oracle_hlo_ops_alone() -> None:
    """With an uninformative kernel name, the HLO op of every GPU op in the oracles decides."""
    expected = {"copy.1": "elementwise", "custom-call.1": "other",
                "wrapped_broadcast": "elementwise",
                "gemm_fusion_dot_general.1": "gemm", "input_reduce_fusion": "reduction",
                "loop_convert_fusion": "elementwise", "loop_reduce_fusion": "reduction",
                "loop_sqrt_fusion": "elementwise", "wrapped_convert": "elementwise",
                "wrapped_transpose": "elementwise", "cudnn-conv.1": "convolution",
                "input_transpose_fusion": "elementwise", "input_transpose_fusion.1": "elementwise",
                "loop_transpose_fusion": "elementwise"}
    ops = {row["hlo_op_name"] for path in _oracle_files("xprof_hlo_stats.json")
           for row in _gviz_rows(path)}
    assert ops == set(expected)
    for op in ops:
        assert explain("anonymous_kernel", op).category == expected[op], op


def test_rocprof_908_dispatched_kernels() -> None:
    if not ROCPROF_908.exists():
        pytest.skip(f"{ROCPROF_908} absent")
    tool = json.load(gzip.open(ROCPROF_908))["rocprofiler-sdk-tool"][0]
    symbols = {k["kernel_id"]: k["formatted_kernel_name"] for k in tool["kernel_symbols"]}
    names = {symbols[d["dispatch_info"]["kernel_id"]]
             for d in tool["buffer_records"]["kernel_dispatch"]}
    assert len(names) == 80
    events = pl.DataFrame({"kind": pl.Series(["kernel"] * len(names), dtype=KindDtype),
                           "name": sorted(names),
                           "op": pl.Series([None] * len(names), dtype=pl.String),
                           "subcategory": pl.Series([None] * len(names), dtype=pl.String)})
    out = classify(events)
    # rocPRIM sort/merge/partition were the only `other` (other.sort): now reduction sort
    assert out.filter(pl.col("category") == "other").height == 0
    assert out.filter(pl.col("subcategory") == "sort")["rule"].unique().to_list() == [
        "reduction.sort"]
    by_rule = dict(out.group_by("rule").len().iter_rows())
    assert by_rule["gemm.tensile"] == 14
    assert by_rule["collective.rccl_generic"] == 1
    assert {"attention.aotriton", "reduction.norm", "memory.rocclr_fill"} <= set(by_rule)


# ---- precedence -------------------------------------------------------------------------------

def _events(rows: list[tuple]) -> pl.DataFrame:
    kinds, names, ops, subs = zip(*rows)
    return pl.DataFrame({
        "kind": pl.Series(kinds, dtype=KindDtype), "name": pl.Series(names, dtype=pl.String),
        "op": pl.Series(ops, dtype=pl.String), "subcategory": pl.Series(subs, dtype=pl.String)})


def test_kind_beats_name_and_keeps_subcategory() -> None:
    out = classify(_events([
        ("memcpy", "Cijk_Ailk_Bljk_BBS_BH_MT64x64", None, "h2d"),
        ("memset", "ncclDevKernel_AllReduce_Sum_bf16_RING_LL", "all-reduce.1", None),
        ("memcpy", "MemcpyD2D", None, "d2d"),
    ]))
    assert out["category"].to_list() == ["memory"] * 3
    assert out["rule"].to_list() == ["memory.kind"] * 3
    assert out["subcategory"].to_list() == ["h2d", None, "d2d"]


def test_collective_type_op_beats_name_and_generic_is_never_guessed() -> None:
    out = classify(_events([
        ("kernel", RCCL_GENERIC, "all-gather-start.2", None),
        ("kernel", RCCL_GENERIC, None, None),
        ("kernel", RCCL_GENERIC, None, "reduce-scatter"),  # from the parser's --rccl-trace rows
        ("kernel", RCCL_GENERIC, "fusion.3", None),
        ("kernel", "ncclDevKernel_AllReduce_Sum_bf16_RING_LL", "all-to-all.4", None),
    ]))
    assert out["category"].to_list() == ["collective"] * 5
    assert out["subcategory"].to_list() == [
        "all-gather", None, "reduce-scatter", None, "all-to-all"]


def test_rule_subcategory_overrides_existing() -> None:
    out = classify(_events([("kernel", "__amd_rocclr_copyBuffer.kd", None, "stale")]))
    assert out["subcategory"].to_list() == ["copy"]


# ---- user rule files and validation -----------------------------------------------------------

def test_user_rules_take_precedence(tmp_path: Path) -> None:
    first = tmp_path / "first.toml"
    first.write_text(
        '[[rule]]\nid = "site.tensile_is_other"\ncategory = "other"\nname = \'^Cijk_\'\n'
        'description = "Pretend we do not trust Tensile."\n')
    second = tmp_path / "second.toml"
    second.write_text(
        '[maps.dir]\n\'fwd\' = "fwd"\n\n'
        '[[rule]]\nid = "site.my_attn"\ncategory = "attention"\nname = \'^my_attn\'\n'
        'subcategory_from = "name"\nsubcategory_map = "dir"\n\n'
        '[[rule]]\nid = "site.my_coll"\ncategory = "collective"\nname = \'^my_coll\'\n'
        'subcategory_from = ["op"]\nsubcategory_map = "collective_type"\n')
    rules = load_rules([first, str(second)])
    assert isinstance(rules, RuleSet)
    assert rules.rules[0].id == "site.tensile_is_other"
    assert explain(CIJK, rules=rules).rule_id == "site.tensile_is_other"
    m = explain("my_attn_fwd", rules=rules)
    assert (m.category, m.subcategory) == ("attention", "fwd")
    assert m.description == "user rule from second.toml"
    assert explain("my_coll", "all-gather.1", rules=rules).subcategory == "all-gather"
    assert explain(CIJK).rule_id == "gemm.tensile"  # the cached built-in set is untouched
    assert explain("loop_add_fusion.kd", rules=rules).rule_id == "elementwise.xla_fusion"


BAD_FILES = {
    "invalid_toml": ("[[rule]\nid = 'x'\n", "invalid TOML"),
    "unknown_category": ('[[rule]]\nid = "a.b"\ncategory = "matmul"\nname = "x"\n',
                         "unknown category"),
    "missing_id": ('[[rule]]\ncategory = "gemm"\nname = "x"\n', "missing id"),
    "duplicate_id": ('[[rule]]\nid = "a.b"\ncategory = "gemm"\nname = "x"\n'
                     '[[rule]]\nid = "a.b"\ncategory = "gemm"\nname = "y"\n', "duplicate rule id"),
    "duplicate_builtin_id": ('[[rule]]\nid = "gemm.tensile"\ncategory = "gemm"\nname = "x"\n',
                             "duplicate rule id"),
    "bad_regex": ('[[rule]]\nid = "a.b"\ncategory = "gemm"\nname = "(unclosed"\n', "bad regex"),
    "bad_op_regex": ('[[rule]]\nid = "a.b"\ncategory = "gemm"\nop = "x)"\n', "bad regex"),
    "no_condition": ('[[rule]]\nid = "a.b"\ncategory = "gemm"\n', "no condition"),
    "bad_kind": ('[[rule]]\nid = "a.b"\ncategory = "gemm"\nkind = ["dma"]\n', "kind"),
    "unknown_key": ('[[rule]]\nid = "a.b"\ncategory = "gemm"\nnmae = "x"\n', "unknown key"),
    "unknown_map": ('[[rule]]\nid = "a.b"\ncategory = "gemm"\nname = "x"\n'
                    'subcategory_from = "op"\nsubcategory_map = "nope"\n',
                    "unknown subcategory_map"),
    "bad_map_regex": ('[[rule]]\nid = "a.b"\ncategory = "gemm"\nname = "x"\n'
                      'subcategory_from = "op"\nsubcategory_map = { \'[\' = "y" }\n', "bad regex"),
    "no_rules": ('title = "x"\n', "unknown top-level key"),
    # rules run as Rust regex (polars), which has no look-around and no backreferences
    "lookahead": ('[[rule]]\nid = "a.b"\ncategory = "gemm"\nname = \'^gemm(?!_fusion)\'\n',
                  "look-around"),
    "lookbehind_op": ('[[rule]]\nid = "a.b"\ncategory = "gemm"\nop = \'(?<!cu)dnn\'\n',
                      "look-around"),
    "backreference": ('[[rule]]\nid = "a.b"\ncategory = "gemm"\nname = \'(ab)\\1\'\n',
                      "backreferences"),
    "lookahead_in_map": ('[[rule]]\nid = "a.b"\ncategory = "gemm"\nname = "x"\n'
                         'subcategory_from = "op"\nsubcategory_map = { \'a(?=b)\' = "y" }\n',
                         "look-around"),
    "bad_not_name": ('[[rule]]\nid = "a.b"\ncategory = "gemm"\nname = "x"\nnot_name = "(x"\n',
                     "not_name: bad regex"),
    "only_exclusion": ('[[rule]]\nid = "a.b"\ncategory = "gemm"\nnot_name = "x"\n',
                       "no condition"),
    "empty": ("", "no [[rule]] entries"),
}


@pytest.mark.parametrize("case", sorted(BAD_FILES))
def test_validation_errors_name_the_file(tmp_path: Path, case: str) -> None:
    text, problem = BAD_FILES[case]
    path = tmp_path / f"{case}.toml"
    path.write_text(text)
    with pytest.raises(TraceInputError) as info:
        load_rules([path])
    assert info.value.path == str(path)
    assert problem in info.value.problem
    assert "\n" not in str(info.value)


def test_builtin_rules_pass_the_rust_regex_check(tmp_path: Path) -> None:
    """The packaged rules skip the regex check at start-up (it costs ~35 ms of Rust regex
    compilation); here they get it, as a user's copy of the file would."""
    from importlib import resources

    from tracelens.classify import loading as rules_mod

    text = resources.files("tracelens.classify").joinpath("rules.toml").read_text()
    copy = tmp_path / "copy.toml"
    copy.write_text(text.replace('id = "', 'id = "copy.'))  # ids may not repeat built-in ones
    checked: list[str] = []
    real = rules_mod._regex_problem

    def check(pattern: str) -> str | None:
        checked.append(pattern)
        return real(pattern)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(rules_mod, "_regex_problem", check)
        user = load_rules([copy])
    assert len(user) == 2 * len(load_rules())
    assert len(set(checked)) > 100  # every pattern of the copy went through the check


def test_lookaround_error_names_the_rule_and_the_way_out(tmp_path: Path) -> None:
    path = tmp_path / "site.toml"
    path.write_text('[[rule]]\nid = "site.gemm"\ncategory = "gemm"\nname = \'^gemm(?!_fusion)\'\n')
    with pytest.raises(TraceInputError) as info:
        load_rules([path])
    assert "rule 'site.gemm' name: bad regex" in info.value.problem
    assert "not_name" in info.value.problem and "\n" not in str(info.value)


def test_not_conditions_exclude_and_missing_values_do_not(tmp_path: Path) -> None:
    path = tmp_path / "site.toml"
    path.write_text(
        '[[rule]]\nid = "site.gemm"\ncategory = "gemm"\nname = \'^my_gemm\'\n'
        'not_name = \'_epilogue\'\nnot_op = \'^conv\'\n')
    rules = load_rules([path])
    assert explain("my_gemm_1", rules=rules).rule_id == "site.gemm"  # op missing: no exclusion
    assert explain("my_gemm_1", "dot.2", rules=rules).rule_id == "site.gemm"
    assert explain("my_gemm_1_epilogue", rules=rules).rule_id != "site.gemm"
    assert explain("my_gemm_1", "conv.3", rules=rules).rule_id != "site.gemm"
    assert rules["site.gemm"].conditions == {
        "name": "^my_gemm", "not_name": "_epilogue", "not_op": "^conv"}


def test_subcategory_from_the_hlo_kind(tmp_path: Path) -> None:
    path = tmp_path / "site.toml"
    path.write_text(
        '[[rule]]\nid = "site.coll"\ncategory = "collective"\nhlo = \'^collective:\'\n'
        'subcategory_from = ["hlo"]\n'
        'subcategory_map = { \'^collective:all-gather$\' = "all-gather" }\n')
    rules = load_rules([path])
    m = explain("psum.13", "psum.13", hlo="collective:all-gather", rules=rules)
    assert (m.rule_id, m.subcategory) == ("site.coll", "all-gather")
    events = pl.DataFrame({"kind": ["kernel"] * 40, "name": [f"k{i}" for i in range(40)],
                           "op": [f"psum.{i}" for i in range(40)],
                           "hlo": ["collective:all-gather", "collective:all-reduce"] * 20},
                          schema_overrides={"kind": KindDtype})
    assert classify(events, rules)["subcategory"].to_list() == ["all-gather", None] * 20


# Built-in rules that used look-around before the Rust-regex engine, rewritten without it
# (alternation, or a not_name / not_op exclusion); the answers are those of the old rules.
LOOKAROUND_REWRITES = [
    ("reduce-precision.1", "reduce-precision.1", "elementwise.xla_op", None),
    ("loop_reduce_precision_fusion.kd", None, "elementwise.xla_fusion", None),
    ("reduce_scatter_fusion", None, "elementwise.xla_fusion", None),
    ("reduce-window.2", "reduce-window.2", "reduction.xla", None),
    ("anonymous_kernel", "reduce_precision_fusion", "elementwise.hlo", None),
    ("anonymous_kernel", "reduce_window_fusion.2", "reduction.hlo", None),
    ("custom_add_fusion", "custom_add_fusion", "other.fallback", None),
    ("anonymous_kernel", "block_add_fusion", "other.fallback", None),
    ("anonymous_kernel", "add_fusion.3", "elementwise.hlo", None),
    ("send.1", "send.1", "collective.hlo", "send"),
    ("anonymous_kernel", "recv-done.2", "collective.hlo", "recv"),
    ("anonymous_kernel", "send-foo", "other.fallback", None),
    ("anonymous_kernel", "all-reducex", "other.fallback", None),
    ("conv2d_kernel", None, "convolution.name", None),
    ("myconv_x", None, "other.fallback", None),
]


@pytest.mark.parametrize(("name", "op", "rule_id", "subcategory"), LOOKAROUND_REWRITES)
def test_lookaround_rewrites(name: str, op: str | None, rule_id: str,
                             subcategory: str | None) -> None:
    m = explain(name, op)
    assert (m.rule_id, m.subcategory) == (rule_id, subcategory)


def test_unreadable_rules_file(tmp_path: Path) -> None:
    missing = tmp_path / "missing.toml"
    with pytest.raises(TraceInputError) as info:
        load_rules([missing])
    assert info.value.path == str(missing)
    binary = tmp_path / "binary.toml"
    binary.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(TraceInputError, match="binary.toml"):
        load_rules([binary])


# ---- the frame API ----------------------------------------------------------------------------

def test_classify_preserves_rows_and_columns() -> None:
    base = _events([
        ("kernel", "loop_add_fusion.kd", "loop_add_fusion", None),
        ("memcpy", "MemcpyH2D", None, "h2d"),
        ("kernel", CIJK, "cudnn-conv.1", None),
        ("kernel", "loop_add_fusion.kd", "loop_add_fusion", None),
        ("kernel", RCCL_GENERIC, None, None),
    ])
    events = base.with_columns(
        pl.Series("start_ns", [50, 10, 40, 20, 30]),
        pl.lit(None, dtype=CategoryDtype).alias("category"),
        pl.lit("stale", dtype=pl.String).alias("rule"),
        pl.Series("device", [3, 1, 4, 1, 5], dtype=pl.Int32))
    out = classify(events)
    assert out.columns == events.columns
    assert out.schema["category"] == CategoryDtype
    assert out.schema["rule"] == Text and out.schema["subcategory"] == Text
    assert out.drop("category", "rule", "subcategory").equals(
        events.drop("category", "rule", "subcategory"))
    assert out["category"].to_list() == [
        "elementwise", "memory", "convolution", "elementwise", "collective"]
    assert out["rule"].null_count() == 0 and out["category"].null_count() == 0


def test_classify_without_op_or_subcategory_columns_and_empty() -> None:
    events = pl.DataFrame({"kind": pl.Series(["kernel"], dtype=KindDtype), "name": ["attn_fwd"]})
    out = classify(events)
    assert out.row(0, named=True) == {
        "kind": "kernel", "name": "attn_fwd", "category": "attention", "subcategory": "fwd",
        "rule": "attention.aotriton"}
    empty = classify(_events([("kernel", "x", None, None)]).clear())
    assert empty.height == 0 and empty.schema["category"] == CategoryDtype


def test_classify_matches_once_per_distinct_combination(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[pl.DataFrame] = []
    original = RuleSet.decide

    def recording(self: RuleSet, keys: pl.DataFrame):  # type: ignore[no-untyped-def]
        calls.append(keys)
        return original(self, keys)

    monkeypatch.setattr(RuleSet, "decide", recording)
    names = [f"loop_add_fusion_{i}.kd" for i in range(25)] + [f"Cijk_Ailk_{i}" for i in range(25)]
    n = 200_000
    events = pl.DataFrame({
        "kind": pl.Series(["kernel"] * n, dtype=KindDtype),
        "name": [names[i % 50] for i in range(n)],
        "op": pl.Series([None if i % 3 else "cudnn-conv.1" for i in range(n)], dtype=pl.String),
        "subcategory": pl.Series([None] * n, dtype=pl.String),
    })
    distinct = events.select("kind", "name", "op").unique().height
    out = classify(events)
    assert len(calls) == 1 and calls[0].height == distinct == 100
    # first-seen order, so the rules read the names in memory order (and deterministically)
    first_seen = events.select("kind", "name", "op").unique(maintain_order=True)
    assert calls[0].select("name", "op").equals(first_seen.select("name", "op"))
    assert out.height == n
    assert out["name"].equals(events["name"])
    expected = events.with_columns(
        pl.when(pl.col("op").is_not_null()).then(pl.lit("convolution"))
        .when(pl.col("name").str.starts_with("Cijk")).then(pl.lit("gemm"))
        .otherwise(pl.lit("elementwise")).alias("category"))["category"]
    assert out["category"].cast(pl.String).equals(expected)


def test_hash_collision_falls_back_to_exact_join(monkeypatch: pytest.MonkeyPatch) -> None:
    events = _events([("kernel", n, o, None) for n, o in
                      [("attn_fwd", None), ("reduce.1", "reduce.1"), ("attn_fwd", None),
                       (RCCL_GENERIC, "all-reduce-start"), ("dot.2", "dot.2")]])
    expected = classify(events)
    import tracelens.core.signatures as signatures_mod

    real_hash = signatures_mod.combo_hash

    def colliding(keys: pl.DataFrame, seed: int) -> pl.Series:
        if seed == 0:
            return pl.Series("h", [7] * keys.height, dtype=pl.UInt64)
        return real_hash(keys, seed)

    monkeypatch.setattr(signatures_mod, "combo_hash", colliding)
    assert classify(events).equals(expected)
    assert expected["rule"].to_list() == [
        "attention.aotriton", "reduction.xla", "attention.aotriton", "collective.rccl_generic",
        "gemm.xla"]


def test_explain_returns_rule_and_reason() -> None:
    m = explain(CIJK, "cudnn-conv.1")
    assert isinstance(m, Match)
    assert m.rule_id == "convolution.hlo_conv_kernel"
    assert "Tensile" in m.description
    assert m.conditions == {"kind": ["kernel"], "op": "^(?:cudnn-conv|convolution)"}
    mem = explain("whatever", kind="memcpy")
    assert (mem.category, mem.rule_id, mem.subcategory) == ("memory", "memory.kind", None)
    with pytest.raises(AttributeError):
        m.category = "gemm"  # type: ignore[misc]


def test_hlo_structure_beats_an_opaque_name() -> None:
    """XLA:CPU ynn_fusion.N hides a dot: with its HLO known, it is gemm; without, other."""
    assert explain("ynn_fusion.3", op="ynn_fusion.3").category == "other"
    m = explain("ynn_fusion.3", op="ynn_fusion.3", hlo="gemm")
    assert (m.category, m.rule_id) == ("gemm", "gemm.hlo_structure")
    assert explain("fusion.7", op="fusion.7", hlo="conv").category == "convolution"
    # a vendor name still decides first
    assert explain("__amd_rocclr_copyBuffer.kd", op="copy.1", hlo="gemm").category == "memory"


def test_hlo_column_is_used_by_classify() -> None:
    ev = pl.DataFrame({"kind": ["kernel", "kernel"], "name": ["ynn_fusion.3", "ynn_fusion"],
                       "op": ["ynn_fusion.3", "ynn_fusion"], "hlo": ["gemm", "fusion"]},
                      schema_overrides={"kind": KindDtype})
    out = classify(ev)
    assert out["category"].to_list() == ["gemm", "other"]


def test_hand_built_set_without_fallback_on_both_paths() -> None:
    """A RuleSet without other.fallback still labels every row, on the one-query path (few
    rows, explain) and on the rule-by-rule path (many rows) alike."""
    rules = RuleSet(tuple(r for r in load_rules() if r.id != "other.fallback"))
    names = [f"unknown_{i}" for i in range(40)] + ["attn_fwd", CIJK]
    events = pl.DataFrame({"kind": pl.Series(["kernel"] * len(names), dtype=KindDtype),
                           "name": names})
    many = classify(events, rules)
    few = classify(events.tail(5), rules)
    assert many["rule"].to_list() == ["other.fallback"] * 40 + ["attention.aotriton",
                                                                "gemm.tensile"]
    assert few["rule"].equals(many["rule"].tail(5))
    assert explain("unknown_1", rules=rules).rule_id == "other.fallback"


def _name_rows(names: list[str], ops: list[str | None]) -> pl.DataFrame:
    return pl.DataFrame({"kind": ["kernel"] * len(names), "name": names, "op": ops,
                         "hlo": [None] * len(names)}, schema_overrides={"kind": KindDtype})


def test_answers_kept_across_calls_equal_fresh_ones(monkeypatch) -> None:
    """A RuleSet keeps its answers (the hosts of one job name the same kernels): a second
    host's rows already seen are not run through the rules again, new ones are, and every
    answer equals that of a rule set that never saw the first host."""
    first = _name_rows([f"ncclDevKernel_AllReduce_{i}" for i in range(40)] +
                    [f"loop_add_fusion_{i}.kd" for i in range(40)],
                    [None] * 40 + [f"add.{i}" for i in range(40)])
    second = _name_rows([f"loop_add_fusion_{i}.kd" for i in range(40)] +
                     [f"Cijk_Ailk_gemm_{i}.kd" for i in range(40)] +
                     [f"loop_add_fusion_{i}.kd" for i in range(40)],
                     [f"add.{i}" for i in range(40)] + [None] * 40 +
                     [f"add.{i}" for i in range(40)])
    kept = RuleSet(load_rules().rules)
    classify(first, kept)
    ran: list[int] = []
    real = RuleSet._decide_rows

    def counting(self, keys):
        ran.append(keys.height)
        return real(self, keys)
    monkeypatch.setattr(RuleSet, "_decide_rows", counting)
    got = classify(second, kept)
    assert ran == [40]  # only the 40 GEMM names were new
    fresh = classify(second, RuleSet(load_rules().rules))
    assert got.equals(fresh)
    assert got["category"].cast(pl.String).to_list() == \
        ["elementwise"] * 40 + ["gemm"] * 40 + ["elementwise"] * 40
    ran.clear()
    again = classify(first, kept)  # everything known: no rule runs
    assert ran == [] and again.equals(classify(first, RuleSet(load_rules().rules)))


def test_ep_kernels_count_as_exposed_communication(tmp_path: Path) -> None:
    """Issue 25 B5: a trace whose communication is DeepEP's (``dpsk::ep::``) said "exposed
    communication 0.0%" (the kernels were ``other``). The real A100 trace with its NCCL
    kernels renamed to DeepEP's spelling keeps exactly the exposed share of the original."""
    import gzip
    import json

    from tests.conftest import SHARED, cli

    src = SHARED / "traces" / "kineto" / "a100_nccl_2rank_rank0.json.gz"
    if not src.exists():
        pytest.skip(f"{src} not present")
    doc = json.loads(gzip.decompress(src.read_bytes()))
    renamed = 0
    for e in doc["traceEvents"]:
        if e.get("cat") == "kernel" and str(e.get("name", "")).startswith("ncclKernel"):
            e["name"] = "void dpsk::ep::internode::dispatch<true, 8, 4>(int4*, float*)"
            renamed += 1
    assert renamed
    copy = tmp_path / src.name
    copy.write_bytes(gzip.compress(json.dumps(doc).encode(), compresslevel=1))
    want, got = (json.loads(cli("summarize", str(p), "--format", "json", "--quiet").stdout)
                 ["headline"] for p in (src, copy))
    assert want["exposed_comm_pct"] > 0
    assert got["exposed_comm_pct"] == want["exposed_comm_pct"]


def test_many_rows_path_answers_like_explain_for_every_reference_name() -> None:
    """The rule-by-rule path (many rows: each run of name rules behind one combined pattern,
    :func:`tracelens.classify.rules._name_runs`) gives every reference name the rule and
    subcategory the one-query path (explain) gives it."""
    from tracelens.classify.rules import _FEW_ROWS, _name_runs

    rules = RuleSet(load_rules().rules)
    runs = _name_runs(rules.rules)
    assert any(p is not None for _, _, _, p in runs)  # runs are combined
    assert {c for _, _, c, p in runs if p is not None} == {"name", "__words_name", "__words_op"}
    events = pl.DataFrame({"kind": pl.Series(["kernel"] * len(CASES), dtype=KindDtype),
                           "name": [c[0] for c in CASES], "op": [c[1] for c in CASES]})
    assert events.unique().height > _FEW_ROWS
    got = classify(events, rules)
    want = [explain(c[0], c[1]) for c in CASES]
    assert got["rule"].cast(pl.String).to_list() == [m.rule_id for m in want]
    assert got["subcategory"].cast(pl.String).to_list() == [m.subcategory for m in want]
