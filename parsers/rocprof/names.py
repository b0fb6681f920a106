"""Kind and operation names rocprofv3 writes, for the writers.

The buffer-tracing kinds in the order of ROCm 7.x (rocprofiler-sdk 1.x), as in the real MI350X
JSON (shared/traces/rocprof); readers never rely on these ids, they resolve names through the
file's own ``strings`` table. Operation lists are given for the kinds the writers emit.
"""

from __future__ import annotations

BUFFER_KINDS: tuple[str, ...] = (
    "NONE", "HSA_CORE_API", "HSA_AMD_EXT_API", "HSA_IMAGE_EXT_API", "HSA_FINALIZE_EXT_API",
    "HIP_RUNTIME_API", "HIP_COMPILER_API", "MARKER_CORE_API", "MARKER_CONTROL_API",
    "MARKER_NAME_API", "MEMORY_COPY", "KERNEL_DISPATCH", "SCRATCH_MEMORY",
    "CORRELATION_ID_RETIREMENT", "RCCL_API", "OMPT", "MEMORY_ALLOCATION",
    "RUNTIME_INITIALIZATION", "ROCDECODE_API", "ROCJPEG_API", "HIP_STREAM",
    "HIP_RUNTIME_API_EXT", "HIP_COMPILER_API_EXT", "ROCDECODE_API_EXT",
    "KFD_EVENT_PAGE_MIGRATE", "KFD_EVENT_PAGE_FAULT", "KFD_EVENT_QUEUE",
    "KFD_EVENT_UNMAP_FROM_GPU", "KFD_EVENT_DROPPED_EVENTS", "KFD_PAGE_MIGRATE",
    "KFD_PAGE_FAULT", "KFD_QUEUE", "MARKER_CORE_RANGE_API")

CALLBACK_KINDS: tuple[str, ...] = (
    "NONE", "HSA_CORE_API", "HSA_AMD_EXT_API", "HSA_IMAGE_EXT_API", "HSA_FINALIZE_EXT_API",
    "HIP_RUNTIME_API", "HIP_COMPILER_API", "MARKER_CORE_API", "MARKER_CONTROL_API",
    "MARKER_NAME_API", "CODE_OBJECT", "SCRATCH_MEMORY", "KERNEL_DISPATCH", "MEMORY_COPY",
    "RCCL_API", "OMPT", "MEMORY_ALLOCATION", "RUNTIME_INITIALIZATION", "ROCDECODE_API",
    "ROCJPEG_API", "HIP_STREAM", "MARKER_CORE_RANGE_API")

OPERATIONS: dict[str, tuple[str, ...]] = {
    "KERNEL_DISPATCH": ("KERNEL_DISPATCH_NONE", "KERNEL_DISPATCH_ENQUEUE",
                        "KERNEL_DISPATCH_COMPLETE"),
    "MEMORY_COPY": ("MEMORY_COPY_NONE", "MEMORY_COPY_HOST_TO_HOST",
                    "MEMORY_COPY_HOST_TO_DEVICE", "MEMORY_COPY_DEVICE_TO_HOST",
                    "MEMORY_COPY_DEVICE_TO_DEVICE"),
    "RCCL_API": (
        "ncclAllGather", "ncclAllReduce", "ncclAllToAll", "ncclAllToAllv", "ncclBroadcast",
        "ncclGather", "ncclReduce", "ncclReduceScatter", "ncclScatter", "ncclSend", "ncclRecv",
        "ncclRedOpCreatePreMulSum", "ncclRedOpDestroy", "ncclGroupStart", "ncclGroupEnd",
        "ncclGetVersion", "ncclGetUniqueId", "ncclCommInitRank", "ncclCommInitAll",
        "ncclCommInitRankConfig", "ncclCommFinalize", "ncclCommDestroy", "ncclCommAbort",
        "ncclCommSplit", "ncclGetErrorString", "ncclGetLastError", "ncclCommGetAsyncError",
        "ncclCommCount", "ncclCommCuDevice", "ncclCommUserRank", "ncclMemAlloc", "ncclMemFree",
        "mscclLoadAlgo", "mscclRunAlgo", "mscclUnloadAlgo", "ncclCommRegister",
        "ncclCommDeregister"),
    "MARKER_CORE_API": ("roctxMarkA", "roctxRangePushA", "roctxRangePop", "roctxRangeStartA",
                        "roctxRangeStop", "roctxGetThreadId"),
    "MARKER_CONTROL_API": ("roctxProfilerPause", "roctxProfilerResume"),
    "MARKER_NAME_API": ("roctxNameOsThread", "roctxNameHsaAgent", "roctxNameHipDevice",
                        "roctxNameHipStream"),
    "MARKER_CORE_RANGE_API": ("roctxMarkA", "roctxThreadRangeA", "roctxProcessRangeA",
                              "roctxGetThreadId"),
}

MARKER_RANGE_OP = "roctxThreadRangeA"
MARKER_MARK_OP = "roctxMarkA"


def strings_table(kinds: tuple[str, ...]) -> list[dict[str, object]]:
    """``strings.buffer_records`` / ``callback_records`` of the JSON output."""
    return [{"kind": k, "operations": list(OPERATIONS.get(k, ()))} for k in kinds]


def kind_id(name: str) -> int:
    return BUFFER_KINDS.index(name)


def op_id(kind: str, op: str) -> int:
    return OPERATIONS[kind].index(op)
