"""Writer for rocprofv3 CSV output in the column layouts of each ROCm generation.

Layouts (shared/reference/rocprof.md §2.3; rocprofiler-sdk ``generateCSV.cpp`` and the rocpd
converter ``csv.cpp``):

- ``"6.2"``: kernel trace without ``Thread_Id``/``Dispatch_Id``; numeric ``Agent_Id`` (node id);
  ROCTx rows in the ``MARKER_CORE_API`` domain; copies without ``Stream_Id``;
- ``"6.3"`` (6.3 and 6.4): adds ``Thread_Id``, ``Dispatch_Id``;
- ``"7"`` (7.x direct output): ``Stream_Id`` columns, ``"Agent N"`` (logical node id),
  ``LDS_Block_Size``/``Scratch_Size``/``VGPR_Count``...; ``MARKER_CORE_RANGE_API`` rows;
- ``"rocpd"`` (``rocpd convert -f csv``): a leading ``Guid`` column, ``Lds_Block_Size``/
  ``Vgpr_Count`` capitalisation (as in ROCm 7.1.1), every process in one set of
  ``out_*.csv`` files told apart by ``Guid``.

Files: ``out_dir/<host>/<pid>_<table>.csv`` for the direct layouts (the rocprofv3 default
``%hostname%/%pid%``), ``out_dir/out_<table>.csv`` for ``rocpd``. Strings are quoted, numbers
bare, headers quoted, as rocprofv3 writes them. CSV has no byte counts for copies.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

from tracelens_dev.writers.rocprof.export import STEP_NAME, export
from parsers.rocprof.records import Process
from tracelens_dev.writers.rocprof.rocpd_write import identity
from tracelens.core.model import Trace

LAYOUTS = ("6.2", "6.3", "7", "rocpd")

AGENT_COLUMNS = (
    "Node_Id", "Logical_Node_Id", "Agent_Type", "Cpu_Cores_Count", "Simd_Count",
    "Cpu_Core_Id_Base", "Simd_Id_Base", "Max_Waves_Per_Simd", "Lds_Size_In_Kb",
    "Gds_Size_In_Kb", "Num_Gws", "Wave_Front_Size", "Num_Xcc", "Cu_Count", "Array_Count",
    "Num_Shader_Banks", "Simd_Arrays_Per_Engine", "Cu_Per_Simd_Array", "Simd_Per_Cu",
    "Max_Slots_Scratch_Cu", "Gfx_Target_Version", "Vendor_Id", "Device_Id", "Location_Id",
    "Domain", "Drm_Render_Minor", "Num_Sdma_Engines", "Num_Sdma_Xgmi_Engines",
    "Num_Sdma_Queues_Per_Engine", "Num_Cp_Queues", "Max_Engine_Clk_Ccompute",
    "Max_Engine_Clk_Fcompute", "Sdma_Fw_Version", "Fw_Version", "Capability", "Cu_Per_Engine",
    "Max_Waves_Per_Cu", "Family_Id", "Workgroup_Max_Size", "Grid_Max_Size", "Local_Mem_Size",
    "Hive_Id", "Gpu_Id", "Workgroup_Max_Dim_X", "Workgroup_Max_Dim_Y", "Workgroup_Max_Dim_Z",
    "Grid_Max_Dim_X", "Grid_Max_Dim_Y", "Grid_Max_Dim_Z", "Name", "Vendor_Name",
    "Product_Name", "Model_Name")
_SIZES = ("Workgroup_Size_X", "Workgroup_Size_Y", "Workgroup_Size_Z", "Grid_Size_X",
          "Grid_Size_Y", "Grid_Size_Z")
_RESOURCES = {"7": ("LDS_Block_Size", "Scratch_Size", "VGPR_Count", "Accum_VGPR_Count",
                    "SGPR_Count"),
              "rocpd": ("Lds_Block_Size", "Scratch_Size", "Vgpr_Count", "Accum_Vgpr_Count",
                        "Sgpr_Count")}

def write(trace: Trace, out_dir: Path, layout: str = "7", step_name: str = STEP_NAME,
          counters: pl.DataFrame | None = None) -> list[Path]:
    if layout not in LAYOUTS:
        raise ValueError(f"unknown CSV layout {layout!r} (one of {', '.join(LAYOUTS)})")
    procs = export(trace, step_name, counters)
    tables: dict[Path, list[pl.DataFrame]] = {}
    for p in procs:
        prefix = out_dir / "out_" if layout == "rocpd" else (
            out_dir / (p.host or "localhost") / f"{p.pid}_")
        guid = identity(p.host or "localhost", int(p.pid or 0))[0]
        for table, df in _tables(p, layout).items():
            if df.height or table in ("agent_info", "kernel_trace"):
                if layout == "rocpd":
                    df = df.select(pl.lit(guid).alias("Guid"), pl.all())
                tables.setdefault(Path(f"{prefix}{table}.csv"), []).append(df)
    for path, dfs in tables.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        pl.concat(dfs).write_csv(path, quote_style="non_numeric")
    return sorted(tables)


def _agent_ref(layout: str, node: pl.Expr, logical: pl.Expr) -> pl.Expr:
    if layout in ("6.2", "6.3"):
        return node
    return pl.format("Agent {}", logical)


def _counter_table(p: Process, d: pl.DataFrame, ref: Any, layout: str) -> pl.DataFrame:
    """``counter_collection.csv``: one row per dispatch and counter, the ROCm 6.2 columns or
    the >= 7.0 ones (with ``Kernel_Id``, ``Accum_VGPR_Count`` and the dispatch's timestamps;
    shared/reference/rocprof.md §2.3)."""
    c = p.counters.join(d.drop("dispatch_id").rename({"Dispatch_Id": "dispatch_id"}),
                        on="dispatch_id", how="left", maintain_order="left")
    cols: list[Any] = [pl.col("corr").alias("Correlation_Id"),
                       pl.col("dispatch_id").alias("Dispatch_Id"), ref("agent").alias("Agent_Id"),
                       pl.col("queue").alias("Queue_Id"),
                       pl.lit(p.pid, pl.Int64).alias("Process_Id"),
                       pl.col("tid").alias("Thread_Id"),
                       (pl.col("grid_x") * pl.col("grid_y") * pl.col("grid_z")).alias(
                           "Grid_Size")]  # sizes here are products (empty when unknown)
    if layout != "6.2":
        cols.append(pl.col("kernel_id").alias("Kernel_Id"))
    cols += [pl.col("name").alias("Kernel_Name"),
             (pl.col("wg_x") * pl.col("wg_y") * pl.col("wg_z")).alias("Workgroup_Size"),
             pl.col("lds").alias("LDS_Block_Size"), pl.lit(0).alias("Scratch_Size"),
             pl.col("vgpr").alias("VGPR_Count")]
    if layout != "6.2":
        cols.append(pl.lit(0).alias("Accum_VGPR_Count"))
    cols += [pl.lit(32).alias("SGPR_Count"), pl.col("counter").alias("Counter_Name"),
             pl.col("value").alias("Counter_Value")]
    if layout != "6.2":
        cols += [pl.col("start").alias("Start_Timestamp"), pl.col("end").alias("End_Timestamp")]
    return c.select(cols)


def _tables(p: Process, layout: str) -> dict[str, pl.DataFrame]:
    a = p.agents
    logical = dict(zip(a["node_id"], a["logical_index"]))
    ref = lambda col: _agent_ref(layout, pl.col(col), pl.col(col).replace_strict(  # noqa: E731
        logical, default=None, return_dtype=pl.Int64))
    gpu = pl.col("type") == "GPU"
    agents = a.select(
        Node_Id="node_id", Logical_Node_Id="logical_index", Agent_Type="type",
        Cpu_Cores_Count=pl.when(gpu).then(0).otherwise(pl.col("cu_count").fill_null(0)),
        Simd_Count=pl.when(gpu).then(4 * pl.col("cu_count").fill_null(0)).otherwise(0),
        Wave_Front_Size=pl.when(gpu).then(64).otherwise(0),
        Num_Xcc=pl.when(gpu).then(8).otherwise(1), Cu_Count=pl.col("cu_count").fill_null(0),
        Gfx_Target_Version=pl.col("gfx_target_version").fill_null(0),
        Vendor_Id=pl.when(gpu).then(4098).otherwise(0),
        Max_Engine_Clk_Fcompute=pl.col("clock_mhz").fill_null(0).cast(pl.Int64),
        Name="name", Vendor_Name="vendor_name", Product_Name="product_name",
        Model_Name=pl.when(gpu).then(pl.lit("ip discovery")).otherwise(pl.lit("")))
    agents = agents.select([pl.col(c) if c in agents.columns else pl.lit(0).alias(c)
                            for c in AGENT_COLUMNS])
    d = p.dispatches.with_row_index("Dispatch_Id", offset=1)
    cols: list[pl.Expr] = [pl.lit("KERNEL_DISPATCH").alias("Kind"),
                           ref("agent").alias("Agent_Id"), pl.col("queue").alias("Queue_Id")]
    if layout in ("7", "rocpd"):
        cols.append(pl.col("stream").alias("Stream_Id"))
    if layout != "6.2":
        cols += [pl.col("tid").alias("Thread_Id"), pl.col("Dispatch_Id")]
    cols += [pl.col("kernel_id").alias("Kernel_Id"), pl.col("name").alias("Kernel_Name"),
             pl.col("corr").alias("Correlation_Id"), pl.col("start").alias("Start_Timestamp"),
             pl.col("end").alias("End_Timestamp")]
    # the launch shape: an unknown part is an empty cell (read back as unknown)
    if layout in ("6.2", "6.3"):
        cols += [pl.lit(0).alias("Private_Segment_Size"),
                 pl.col("lds").alias("Group_Segment_Size")]
    else:
        cols += [e.alias(c) for e, c in zip(
            (pl.col("lds"), pl.lit(0), pl.col("vgpr"), pl.lit(0), pl.lit(32)),
            _RESOURCES[layout])]
    cols += [pl.col(c).alias(n) for c, n in zip(("wg_x", "wg_y", "wg_z", "grid_x", "grid_y",
                                                 "grid_z"), _SIZES)]
    kernels = d.select(cols)
    copy_cols = [pl.lit("MEMORY_COPY").alias("Kind"), pl.col("op").alias("Direction")]
    if layout in ("7", "rocpd"):
        copy_cols.append(pl.col("stream").alias("Stream_Id"))
    copies = p.copies.select(*copy_cols, ref("src_agent").alias("Source_Agent_Id"),
                             ref("dst_agent").alias("Destination_Agent_Id"),
                             Correlation_Id="corr", Start_Timestamp="start",
                             End_Timestamp="end")
    marker_domain = "MARKER_CORE_API" if layout in ("6.2", "6.3") else "MARKER_CORE_RANGE_API"
    api = lambda df, domain: df.select(  # noqa: E731
        Domain=domain, Function="name", Process_Id=pl.lit(p.pid, pl.Int64), Thread_Id="tid",
        Correlation_Id="corr", Start_Timestamp="start", End_Timestamp="end")
    pmc = _counter_table(p, d, ref, layout)
    return {"agent_info": agents, "kernel_trace": kernels, "memory_copy_trace": copies,
            "counter_collection": pmc,
            "rccl_api_trace": api(p.apis, "domain"),
            "marker_api_trace": api(p.markers, pl.lit(marker_domain))}
