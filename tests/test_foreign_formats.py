"""Outputs of other profilers (rocprof v1/v2, --stats tables, Perfetto, OTF2, Nsight) are
named in the error, with what to give instead, not reported as a corrupt XSpace or as "a CSV
that is not rocprofv3 output" (shared/reference/rocprof.md §2.6-2.8)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import tracelens
from tests.conftest import SAMPLES, cli
from tests.test_bad_input import _assert_one_line_error
from tests.test_rocprof_bad_input import _sqlite
from tracelens.core.errors import TraceInputError
from tracelens.loading.formats import sniff_format

V1_CSV = ('"Index","KernelName","gpu-id","queue-id","queue-index","pid","tid","grd","wgr",'
          '"lds","scr","arch_vgpr","accum_vgpr","sgpr","wave_size","sig","obj","DispatchNs",'
          '"BeginNs","EndNs","CompleteNs"\n'
          '0,"Cijk_Alik_Bljk_HHS_BH_MT128x128x32.kd",2,0,0,1234,1234,1048576,256,0,0,64,0,48,'
          '64,"0x0","0x7f",1000000,1001000,1051000,1052000\n')
V2_CSV = ("Dispatch_ID,GPU_ID,Queue_ID,PID,TID,Grid_Size,Workgroup_Size,LDS_Per_Workgroup,"
          "Scratch_Per_Workitem,Arch_VGPR,Accum_VGPR,SGPR,Wave_Size,Kernel_Name,"
          "Start_Timestamp,End_Timestamp,Correlation_ID\n"
          "1,0,0,1,1,256,256,0,0,8,0,8,64,k,100,200,1\n")
STATS_CSV = ('"Name","Calls","TotalDurationNs","AverageNs","Percentage","MinNs","MaxNs",'
             '"StdDev"\n"Cijk_Alik",10,1000,100,50.0,90,110,1.0\n')
V1_JSON = {"traceEvents": [
    {"args": {"name": "CPU HIP API"}, "ph": "M", "pid": 2, "name": "process_name"},
    {"ph": "X", "pid": 2, "tid": 1, "ts": 0, "dur": 3, "name": "hipLaunchKernel"}],
    "otherData": {}}


def _cases(d: Path) -> list[tuple[Path, str]]:
    def text(name: str, body: str) -> Path:
        (d / name).write_text(body)
        return d / name

    def binary(name: str, body: bytes) -> Path:
        (d / name).write_bytes(body)
        return d / name

    # a Perfetto trace starts with the same byte as an XSpace (field 1, length-delimited)
    return [
        (text("results.csv", V1_CSV), "rocprof (v1) results.csv"),
        (text("run.csv", V2_CSV), "rocprofv2 CSV output"),
        (text("pmc_perf.csv", "GPU_ID,Dispatch_ID,Grid_Size,Workgroup_Size,Kernel_Name,"
              "Start_Timestamp,End_Timestamp,Kernel_ID,Counter_Name,Counter_Value\n"
              "0,1,256,64,k,100,200,1,SQ_WAVES,4\n"), "rocprof-compute (Omniperf)"),
        (text("1234_kernel_stats.csv", STATS_CSV), "statistics table"),
        (text("results.json", json.dumps(V1_JSON)), "rocprof (v1) results.json"),
        (binary("1234_results.pftrace", b"\x0a\x05hello"), "a Perfetto trace"),
        (binary("1234_results.otf2", b"\x00\x01"), "an OTF2 archive"),
        (binary("run.nsys-rep", b"\x0a\x01"), "an Nsight Systems report"),
        (binary("run.ncu-rep", b"\x0a\x01"), "an Nsight Compute report"),
        (_sqlite(d / "run.sqlite", "CUPTI_ACTIVITY_KIND_KERNEL", "StringIds"),
         "an Nsight Systems SQLite export"),
        (_sqlite(d / "v1_results.db", "KERN", "OPS", "HIP"), "a rocprof (v1) results.db"),
    ]


def test_other_profilers_outputs_are_named(tmp_path: Path) -> None:
    for path, words in _cases(tmp_path):
        with pytest.raises(TraceInputError) as err:
            tracelens.load(path)
        assert words in str(err.value), (path.name, str(err.value))
        assert str(path) in str(err.value)


def test_one_line_and_exit_2_from_the_cli(tmp_path: Path) -> None:
    path, words = _cases(tmp_path)[0]
    _assert_one_line_error(cli("summarize", str(path)), path, words)


def test_rocprofv3_tables_are_still_rocprofv3(tmp_path: Path) -> None:
    """The guards look at whole headers: rocprofv3's own tables (a counter CSV has Kernel_Name
    and Start_Timestamp too, with Agent_Id) and the real samples keep their formats."""
    counters = tmp_path / "1_counter_collection.csv"
    counters.write_text("Correlation_Id,Dispatch_Id,Agent_Id,Queue_Id,Process_Id,Thread_Id,"
                        "Grid_Size,Kernel_Id,Kernel_Name,Workgroup_Size,LDS_Block_Size,"
                        "Scratch_Size,VGPR_Count,SGPR_Count,Counter_Name,Counter_Value,"
                        "Start_Timestamp,End_Timestamp\n")
    assert sniff_format(counters) == "rocprof-csv"
    assert sniff_format(SAMPLES / "mi300x_8gpu_llama_step.xplane.pb") == "xspace"
    plain = tmp_path / "plain.csv"
    plain.write_text("Name,Calls\nk,1\n")  # two of the stats columns only: not a stats table
    assert sniff_format(plain) == "csv"
