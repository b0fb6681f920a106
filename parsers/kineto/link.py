"""Linking device activity to the host side, and steps, for one Kineto rank.

Each kernel, copy and memset carries ``args.correlation``: the id of the runtime call that
launched it (``cudaLaunchKernel``, ``hipExtModuleLaunchKernel``, ``cudaGraphLaunch``, ...).
That call gives the launching thread and time. From there, with time containment on the
thread (CPU ops nest on their thread):

- ``op``: the costed ATen op around the launch (``tracelens.core.model.COSTED_ATEN_OPS``), else the
  CPU op whose ``External id`` the activity (or its launch) carries;
- FLOPs/bytes (``cost_source = "shapes"``): the costed op's recorded shapes go to the core
  (``OpShapes``), which costs the longest kernel it launched; its other kernels carry 0 so
  every op execution counts once. Only *leaf* costed ops count (``aten::matmul`` around
  ``aten::mm`` is a wrapper: the ``mm`` carries the cost);
- collectives (docs/kineto.md has where each PyTorch generation writes what): the op that
  issued an NCCL/RCCL kernel gives its type and its ``op``, before the kernel name: the
  ``record_param_comms`` op around the launch (``Collective name``), else the backend's
  annotation (``nccl:all_to_all``), else the issuing op (``c10d::alltoall_base_``,
  ``_c10d_functional::*``, ...), so an all-to-all run as ``ncclKernel_SendRecv`` is an
  all-to-all (``type_source`` says which). ``msg_bytes``: the larger of record_param_comms'
  in/out element counts × its dtype's size (the nccl-tests size for all-gather and
  reduce-scatter alike), else the annotation's ``Input Dims`` × ``Input type`` size
  (``size_source``); ``group_size`` and ``dtype``; the process group: ``groups`` (``Process
  Group Ranks``, global ranks) and ``group_name`` (``Process Group Description``, else
  ``Name``). The loader keeps an op's type over the rules' reading of the kernel name
  (``tracelens.loading.loader.issued_types``).
"""

from __future__ import annotations

from typing import Any

import polars as pl

from tracelens.core.model import COSTED_ATEN_OPS, STEP_SCHEMA, Notice, OpShapes

COLLECTIVE_KERNEL = r"(?i)nccl|rccl|msccl|cross_device_reduce|all_?reduce|all_?gather|" \
                    r"reduce_?scatter"
_COLLECTIVE_TYPES = {
    "allreduce": "all-reduce", "allgather": "all-gather", "reducescatter": "reduce-scatter",
    "alltoall": "all-to-all", "alltoallv": "all-to-all", "broadcast": "collective-broadcast",
    "send": "send", "recv": "recv", "recvanysource": "recv", "reduce": "reduce",
    "gather": "gather", "scatter": "scatter", "barrier": "barrier",
    "monitoredbarrier": "barrier",
}
_COMM_DTYPES = {  # lowercased dtype names -> (bytes, tracelens dtype): the c10 ScalarType
    # names record_param_comms writes (Float, BFloat16, Char = int8, Byte = uint8), and the
    # C++ names of an annotation's Input type without "c10::" (float, half, long int, ...)
    "float": (4, "fp32"), "double": (8, "fp64"), "half": (2, "fp16"), "bfloat16": (2, "bf16"),
    "byte": (1, "uint8"), "char": (1, "int8"), "short": (2, "int16"), "int": (4, "int32"),
    "long": (8, "int64"), "bool": (1, "bool"), "float8_e4m3fn": (1, "fp8"),
    "float8_e5m2": (1, "fp8"), "float8_e4m3fnuz": (1, "fp8"), "float8_e5m2fnuz": (1, "fp8"),
    "signed char": (1, "int8"), "unsigned char": (1, "uint8"), "short int": (2, "int16"),
    "long int": (8, "int64"), "long long": (8, "int64"), "long long int": (8, "int64"),
}
# the backend's annotation of a collective (nccl:all_reduce, rccl:all_to_all, nccl:send 0->1),
# recorded around the launch with its input tensors' shapes (with record_shapes)
ANNOTATION_PREFIXES = ("nccl:", "rccl:", "gloo:", "ucc:", "mpi:", "xccl:")
# the ops that issue a collective: the c10d dispatcher ops (c10d::allreduce_,
# c10d::alltoall_base_), functional collectives (DTensor, torch.compile), the process
# group's own methods, and FSDP2's communication scopes
ISSUER_PREFIXES = ("c10d::", "_c10d_functional::", "c10d_functional::", "ProcessGroup",
                   "FSDP::")
KERNEL_NAME = "kernel name"  # type_source: no issuing op named a known collective
_STEP = r"^ProfilerStep#(\d+)$"
_THREAD = ["l_pid", "l_tid"]


def _collective_type(name: pl.Expr) -> pl.Expr:
    """The collective an op's name says (``allreduce``, ``c10d::alltoall_base_``,
    ``nccl:all_to_all``, ``nccl:send 0->1``, ``_c10d_functional::all_to_all_single``); null
    for any other name (``wait``, ``FSDP::all_gather_copy_in``)."""
    norm = (name.str.to_lowercase().str.replace(r"\s.*$", "").str.replace(r"^.*:", "")
            .str.replace_all(r"_(?:base|coalesced|into_tensor|tensor|single)", "")
            .str.replace_all("_", ""))
    return norm.replace_strict(_COLLECTIVE_TYPES, default=None, return_dtype=pl.String)


def _starts(name: pl.Expr, prefixes: tuple[str, ...]) -> pl.Expr:
    return pl.any_horizontal(name.str.starts_with(p) for p in prefixes)


def _first_by_key(rows: pl.LazyFrame, key: str, cols: list[str]) -> pl.DataFrame:
    """``key`` and ``cols`` of the earliest row (by ``start_ns``, then ``_row``) of each
    ``key``, in no particular order (for a join). Ids are unique in a well-formed trace:
    then every row is its key's only one, and nothing is sorted."""
    got = rows.select(key, *cols, *{"start_ns", "_row"} - {*cols}).collect()
    if got[key].is_duplicated().any():
        got = got.sort("start_ns", "_row").unique(key, keep="first", maintain_order=True)
    return got.select(key, *cols)


def _enclosing(ev: pl.DataFrame, ops: pl.DataFrame, prefix: str) -> pl.DataFrame:
    """Per ``ev`` row (in order): the latest op of ``ops`` on the launching thread that
    started at or before the launch and is still open at it; columns prefixed ``prefix``."""
    cols = [c for c in ops.columns if c not in ("pid", "tid", "start_ns", "end_ns")]
    # ties in start: the innermost (shortest) last, so the backward as-of join takes it
    right = ops.select(*cols, l_pid="pid", l_tid="tid", _s="start_ns", _e="end_ns").sort(
        ["_s", "_e"], descending=[False, True], maintain_order=True)
    left = ev.select("_i", *_THREAD, "l_ts").filter(pl.col("l_ts").is_not_null()).sort("l_ts")
    j = left.join_asof(right, left_on="l_ts", right_on="_s", by=_THREAD, strategy="backward",
                       check_sortedness=False)
    j = j.filter(pl.col("_e") >= pl.col("l_ts")).select("_i", *cols)
    return ev.select("_i").join(j.rename({c: prefix + c for c in cols}), on="_i", how="left",
                                maintain_order="left").drop("_i")


def _costed_ops(ops: pl.LazyFrame, shapes: dict[int, tuple[Any, Any, Any]]
                ) -> tuple[pl.DataFrame, dict[int, tuple[str, Any, Any, Any]]]:
    """Leaf costed ops (:data:`tracelens.core.model.COSTED_ATEN_OPS`: ``aten::matmul`` around
    ``aten::mm`` is a wrapper), and each one's recorded shapes by its uid, for the core's
    shape costs. ``shapes``: ``Input Dims``, ``Input type`` and ``Concrete Inputs`` by
    ``_row``, for (at least) every row named as a costed op."""
    c = ops.filter(pl.col("name").is_in(list(COSTED_ATEN_OPS))).sort(
        ["pid", "tid", "start_ns", "end_ns", "_row"], descending=[False, False, False, True, False]
    ).select("pid", "tid", "start_ns", "end_ns", "name", "_row").collect()
    if c.is_empty():
        return c.select("pid", "tid", "start_ns", "end_ns", "name").with_columns(
            _uid=pl.lit(0, pl.Int64)), {}
    nxt = pl.col("start_ns").shift(-1).over("pid", "tid")
    c = c.filter(~(nxt < pl.col("end_ns")).fill_null(False))  # contains a costed op: wrapper
    found = {row: (name, *shapes[row]) for name, row in zip(c["name"].to_list(),
                                                            c["_row"].to_list())}
    return c.select("pid", "tid", "start_ns", "end_ns", "name", _uid="_row"), found


NO_FLOPS = {  # why a kernel has no FLOPs, in the profiler's own terms (cost_note)
    "unlinked": "no runtime launch with its correlation id in the trace (no op, no shapes)",
    "graph": "launched by a graph replay: no ATen op or shapes recorded for it",
    "no_op": "no ATen op recorded around its launch",
    "no_rule": "op not in the cost model (shapes give FLOPs for GEMM, attention and "
               "convolution ops only)",
}
"""The reasons :func:`link_activity` writes in ``cost_note`` for a kernel without FLOPs
(kept by :func:`tracelens.cost.events.cost_note` for compute kernels, dropped for the others); a
kernel a costed op launched gets its reason from the core's shape costs
(``tracelens.cost.shapes.cost_shapes``)."""


def _cost_note() -> pl.Expr:
    """Why a kernel has no FLOPs, from what the linking found (null when it has FLOPs)."""
    return (pl.when((pl.col("kind") != "kernel") | pl.col("flops").is_not_null()).then(None)
            .when(pl.col("_has")).then(None)  # the core's shape costs say (tracelens.cost.shapes)
            .when(pl.col("l_ts").is_null()).then(pl.lit(NO_FLOPS["unlinked"]))
            .when(pl.col("op").is_null() & pl.col("launch").str.contains("(?i)graphlaunch")
                  .fill_null(False)).then(pl.lit(NO_FLOPS["graph"]))
            .when(pl.col("op").is_null()).then(pl.lit(NO_FLOPS["no_op"]))
            .otherwise(pl.lit(NO_FLOPS["no_rule"])))


def link_activity(dev: pl.DataFrame, hst: pl.LazyFrame, comm: pl.DataFrame,
                  shapes: dict[int, tuple[Any, Any, Any]]
                  ) -> tuple[pl.DataFrame, pl.DataFrame, list[Notice], dict[str, Any], OpShapes]:
    """EVENT_SCHEMA columns for the device activity, their launches, warnings and counts, and
    the shapes of the costed ops that launched kernels (the core costs those kernels).
    ``comm``: the collective args of the host ``record_param_comms`` rows, by ``_row``."""
    warn: list[Notice] = []
    # lazy (``hst``): only the columns each result uses are filtered and sorted (memory)
    api = _first_by_key(hst.filter(pl.col("cat").is_in(["cuda_runtime", "cuda_driver", "Runtime"])
                                   & pl.col("correlation").is_not_null()),
                        "correlation", ["pid", "tid", "start_ns", "External id", "name"]
                        ).rename({"pid": "l_pid", "tid": "l_tid", "start_ns": "l_ts",
                                  "External id": "l_ext", "name": "launch"})
    ev = dev.sort("device", "start_ns", "_row").with_row_index("_i").join(
        api, on="correlation", how="left", maintain_order="left")
    unlinked = ev["l_ts"].null_count()
    if unlinked:
        warn.append(Notice.of("kineto.unlinked", "{n} of {total} device activities have no "
                              "runtime call with their correlation id: no op, shapes or "
                              "collective arguments for them", n=unlinked, total=ev.height))
    ops = hst.filter(pl.col("cat").is_in(["cpu_op", "Operator"]))
    by_ext = _first_by_key(ops.filter(pl.col("External id").is_not_null()), "External id",
                           ["name"]).rename({"External id": "_ext", "name": "_op"})
    ev = ev.with_columns(_ext=pl.coalesce("External id", "l_ext")).join(
        by_ext, on="_ext", how="left", maintain_order="left")

    costed, op_shapes = _costed_ops(ops, shapes)
    ev = ev.hstack(_enclosing(ev, costed, "c"))
    is_kernel = pl.col("kind") == "kernel"
    # the longest kernel of each costed-op execution carries its cost (ties: the first)
    ev = ev.with_columns(_has=is_kernel & pl.col("c_uid").is_not_null(),
                         _d=pl.col("end_ns") - pl.col("start_ns"))
    best = (ev.filter("_has").sort(["_d", "_i"], descending=[True, False])
            .group_by("c_uid", maintain_order=True).agg(_main_i=pl.col("_i").first()))
    ev = ev.join(best, on="c_uid", how="left", maintain_order="left")
    ev = ev.with_columns(
        flops=pl.lit(None, pl.Float64), cost_source=pl.lit(None, pl.String),
        op=pl.when(pl.col("_has")).then(pl.col("cname")).otherwise(pl.col("_op")),
    )

    comms = ops.filter(pl.col("name") == "record_param_comms").select(
        "pid", "tid", "start_ns", "end_ns", "_row").join(
        comm.lazy(), on="_row", how="left", maintain_order="left").select(
        "pid", "tid", "start_ns", "end_ns", coll="Collective name", inn="In msg nelems",
        out="Out msg nelems", gs="Group size", cdt=pl.col("dtype").str.to_lowercase(),
        pgr="Process Group Ranks",
        pgn=pl.coalesce(pl.col("Process Group Description").replace(["", "undefined"], None),
                        pl.col("Process Group Name"))).collect()
    ev = ev.hstack(_enclosing(ev, comms, "p_"))
    # the backend's annotation (nccl:all_to_all, with its inputs' Input Dims/type) and the
    # op that issued the collective (c10d::alltoall_base_, _c10d_functional::all_reduce, ...)
    marks = hst.filter(pl.col("cat").is_in(["cpu_op", "Operator", "user_annotation"]))
    anns = marks.filter(_starts(pl.col("name"), ANNOTATION_PREFIXES)).select(
        "pid", "tid", "start_ns", "end_ns", "_row", "name").join(
        comm.lazy(), on="_row", how="left", maintain_order="left").select(
        "pid", "tid", "start_ns", "end_ns", name="name", nel="Input nelems",
        adt=pl.col("Input dtype").str.to_lowercase().str.replace(r"^c10::", "")).collect()
    ev = ev.hstack(_enclosing(ev, anns, "a_"))
    issuers = marks.filter(_starts(pl.col("name"), ISSUER_PREFIXES)).select(
        "pid", "tid", "start_ns", "end_ns", "name").collect()
    ev = ev.hstack(_enclosing(ev, issuers, "i_"))
    # the kernel-name regex once, not in each of the expressions that read it
    ev = ev.with_columns(_coll=is_kernel & pl.col("name").str.contains(COLLECTIVE_KERNEL),
                         _tp=_collective_type(pl.col("p_coll")),
                         _ta=_collective_type(pl.col("a_name")),
                         _ti=_collective_type(pl.col("i_name")))
    is_coll = pl.col("_coll")

    def size_of(dt: str) -> pl.Expr:
        return pl.col(dt).replace_strict({k: v[0] for k, v in _COMM_DTYPES.items()},
                                         default=None, return_dtype=pl.Int64)

    def dtype_of(dt: str) -> pl.Expr:
        return pl.col(dt).replace_strict({k: v[1] for k, v in _COMM_DTYPES.items()},
                                         default=None, return_dtype=pl.String)
    kind = pl.coalesce("_tp", "_ta", "_ti")
    by_p = pl.max_horizontal("p_inn", "p_out") * size_of("p_cdt")
    # an annotation records the inputs only: an all-gather's input is one rank's part
    by_a = pl.col("a_nel") * size_of("a_adt") * pl.when(kind == "all-gather").then(
        pl.col("p_gs").cast(pl.Int64)).otherwise(pl.lit(1, pl.Int64))
    ev = ev.with_columns(
        subcategory=pl.when(is_coll).then(kind)
        .when(pl.col("kind") == "memcpy").then(pl.col("name").str.extract(
            r"(?i)([HDP])(?:to|2)([HDP])", 0).str.to_lowercase().str.replace("to", "2")),
        type_source=pl.when(is_coll).then(
            pl.when(pl.col("_tp").is_not_null()).then(pl.lit("record_param_comms"))
            .when(pl.col("_ta").is_not_null()).then(pl.col("a_name"))
            .when(pl.col("_ti").is_not_null()).then(pl.col("i_name"))
            .otherwise(pl.lit(KERNEL_NAME))),
        # the collective that launched the kernel (record_param_comms' allreduce,
        # _allgather_base, ..., else the c10d op or the annotation that names one): what
        # matches its executions across ranks, and what the classifier reads first
        op=pl.when(is_coll & pl.col("p_coll").is_not_null()).then(pl.col("p_coll"))
        .when(is_coll & pl.col("_ti").is_not_null()).then(pl.col("i_name"))
        .when(is_coll & pl.col("_ta").is_not_null()).then(pl.col("a_name"))
        .otherwise(pl.col("op")),
        msg_bytes=pl.when(is_coll).then(pl.coalesce(by_p, by_a)),
        size_source=pl.when(is_coll).then(
            pl.when(by_p.is_not_null()).then(pl.lit("record_param_comms"))
            .when(by_a.is_not_null()).then(pl.col("a_name") + " Input Dims")),
        group_size=pl.when(is_coll).then(pl.col("p_gs")).cast(pl.Int32),
        groups=pl.when(is_coll).then(pl.col("p_pgr")),
        group_name=pl.when(is_coll).then(pl.col("p_pgn")),
        dtype=pl.when(is_coll).then(pl.coalesce(dtype_of("p_cdt"), dtype_of("a_adt"))),
        bytes=pl.when(pl.col("kind") != "kernel").then(pl.col("bytes").cast(pl.Float64)),
        correlation_id="correlation",
    )
    n_coll, typed, sized = ev.select(
        n=is_coll.sum(), typed=(is_coll & pl.col("subcategory").is_not_null()).sum(),
        sized=(is_coll & pl.col("msg_bytes").is_not_null()).sum()).row(0)
    if n_coll and typed < n_coll:
        warn.append(Notice.of("kineto.untyped_collectives", "{n} of {total} collective kernels "
                              "have no op around their launch that names a known collective "
                              "(record_param_comms, c10d::*, nccl:*): type from the kernel "
                              "name only",
                              n=n_coll - typed, total=n_coll))
    if n_coll and sized < n_coll:
        warn.append(Notice.of("kineto.unsized_collectives", "{n} of {total} collective kernels "
                              "have no message size (no record_param_comms sizes or nccl:* "
                              "Input Dims, or an unknown dtype): busbw unknown",
                              n=n_coll - sized, total=n_coll))
    ev = ev.with_columns(cost_note=_cost_note())
    kernels = ev.filter("_has").select(row=pl.col("_i").cast(pl.UInt32), uid="c_uid",
                                       main=pl.col("_i") == pl.col("_main_i"),
                                       collective=is_coll)
    launches = ev.select("_i", "l_pid", "l_tid", "l_ts", "launch", "start_ns", "end_ns",
                         "device")
    extra = {"unlinked_activities": unlinked, "collective_kernels": n_coll,
             "collective_kernels_typed": typed, "collective_kernels_sized": sized}
    events = ev.select("device", "stream", "kind", "name", "start_ns", "end_ns", "subcategory",
                       "op", "correlation_id", "flops", "bytes", "dtype", "cost_source",
                       "msg_bytes", "group_size", "groups", "group_name", "type_source",
                       "size_source", "cost_note",
                       launch=pl.when(is_kernel).then(pl.col("_shape")))
    return events, launches, warn, extra, OpShapes(ops=op_shapes, kernels=kernels)


def steps_frame(hst: pl.LazyFrame, events: pl.DataFrame, launches: pl.DataFrame
                ) -> tuple[pl.DataFrame, str]:
    """Every step source of this rank, as candidates in order of preference (STEP_SCHEMA's
    ``candidate``), and a description of them; :mod:`tracelens.loading.steps` keeps one.

    0. ``ProfilerStep#N`` on the GPU side (``gpu_user_annotation``: what the device ran for
       the step, source ``annotation:gpu``), with the CPU-side window (below) for a step
       that has no GPU-side one;
    1. the CPU-side ``user_annotation`` ``ProfilerStep#N``, whose device window is the span
       of the activity launched during it (``annotation:cpu-launches``; the CPU window
       itself, ``annotation:cpu``, when it launched nothing);
    2. each CUDA/HIP graph replay with device activity (``graph-replay``).

    Only the sources the trace has are given; none: no steps ("none")."""
    # the annotations first (a few rows), then the regex on their names only: in one
    # filter it would run on every host row's name
    marks = hst.filter(pl.col("cat").is_in(["user_annotation", "gpu_user_annotation"])
                       ).collect().filter(pl.col("name").str.contains(_STEP)).with_columns(
        step=pl.col("name").str.extract(_STEP, 1).cast(pl.Int32))
    gpu = marks.filter(pl.col("cat") == "gpu_user_annotation").group_by("step").agg(
        pl.col("start_ns").min(), pl.col("end_ns").max()).with_columns(
        source=pl.lit("annotation:gpu"))
    cpu = _cpu_steps(marks.filter(pl.col("cat") == "user_annotation"), launches)
    graphs = (launches.filter(pl.col("launch").str.contains(r"GraphLaunch"))
              .group_by("l_pid", "l_tid", "l_ts").agg(pl.col("start_ns").min(),
                                                      pl.col("end_ns").max())
              .sort("l_ts", "l_pid", "l_tid"))
    graphs = graphs.select(step=pl.int_range(pl.len(), dtype=pl.Int32), start_ns="start_ns",
                           end_ns="end_ns", source=pl.lit("graph-replay"))
    cols = ["step", "start_ns", "end_ns", "source"]
    cands = []
    if gpu.height:
        cands.append(pl.concat([gpu.select(cols),
                                cpu.join(gpu.select("step"), on="step", how="anti")]))
    cands += [c for c in (cpu, graphs) if c.height]
    if not cands:
        return pl.DataFrame(schema=STEP_SCHEMA), "none"
    steps = pl.concat([c.select(cols).sort("step").with_columns(
        candidate=pl.lit(i, pl.Int32)) for i, c in enumerate(cands)])
    steps = steps.with_columns(rank=pl.lit(0, pl.Int32)).select(list(STEP_SCHEMA))
    described = [", ".join(sorted(set(c["source"].to_list()))) for c in cands]
    return steps.cast(STEP_SCHEMA), " > ".join(described)


def _cpu_steps(cpu: pl.DataFrame, launches: pl.DataFrame) -> pl.DataFrame:
    """The CPU-side ProfilerStep windows: each step's device window is the span of the
    activity launched during it, else (it launched nothing) the CPU window itself."""
    cpu = cpu.sort("start_ns", "_row").unique("step", keep="first", maintain_order=True)
    if cpu.is_empty():
        return pl.DataFrame(schema={"step": pl.Int32, "start_ns": pl.Int64,
                                    "end_ns": pl.Int64, "source": pl.String})
    win = cpu.select("step", c_s="start_ns", c_e="end_ns").sort("c_s")
    launched = (launches.filter(pl.col("l_ts").is_not_null()).sort("l_ts")
                .join_asof(win, left_on="l_ts", right_on="c_s", strategy="backward",
                           check_sortedness=False)
                .filter(pl.col("l_ts") < pl.col("c_e"))
                .group_by("step").agg(d_s=pl.col("start_ns").min(),
                                      d_e=pl.col("end_ns").max()))
    return win.join(launched, on="step", how="left").select(
        "step", start_ns=pl.coalesce("d_s", "c_s"), end_ns=pl.coalesce("d_e", "c_e"),
        source=pl.when(pl.col("d_s").is_not_null()).then(pl.lit("annotation:cpu-launches"))
        .otherwise(pl.lit("annotation:cpu")))
