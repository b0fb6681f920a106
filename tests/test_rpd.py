"""rocmProfileData (RPD) files, as ``rpd_tracer`` writes them (issue 25 item A2).

The files are our writer's (:func:`tracelens_dev.writers.rocprof.write_rpd`) from the MI300X
sample, with some kernels turned into memory copies of each direction, the GEMMs replayed
from a HIP graph (``Task`` ops under one ``hipGraphLaunch`` per run), op types the reader
does not read, and ROCTx ranges (``ProfilerStep#N`` and an ``aten::mm`` annotation) as
``UserMarker`` API rows. Before this reader, every such file was refused as "an RPD
database".
"""

from __future__ import annotations

import gzip
import json
import sqlite3
from pathlib import Path

import polars as pl
import pytest

import tracelens
from tests.conftest import SAMPLES, cli
from parsers.rocprof.facts import rocprof_facts
from tracelens.loading.formats import sniff_format
from tracelens.core.model import HOST_EVENT_SCHEMA, HostClockFacts, conform
from tracelens_dev.writers.rocprof import write_rocpd, write_rpd

STEP_NAME = "ProfilerStep#{step}"
STEP = r"ProfilerStep#(\d+)"
TASKS = r"^Cijk_"  # the GEMMs: replayed from a graph
OTHER = {"FillBuffer": 3, "Marker": 2}
COPIES = {"loop_add_fusion.kd": "h2d", "loop_add_fusion_1.kd": "d2h",
          "loop_add_fusion_2.kd": "d2d"}
EVENT_COLS = ["device", "kind", "name", "start_ns", "end_ns", "subcategory", "bytes"]
# a copy op has no name in RPD (its type is its direction): it reads back named as rocprofv3
# names copies; kernel bytes came from the sample's HLO, which RPD does not carry
COPY_NAMES = {"h2d": "MEMORY_COPY_HOST_TO_DEVICE", "d2h": "MEMORY_COPY_DEVICE_TO_HOST",
              "d2d": "MEMORY_COPY_DEVICE_TO_DEVICE"}


def _source() -> tracelens.Trace:
    """The sample with memcpys of each direction and an ``aten::mm`` annotation."""
    trace = tracelens.load(SAMPLES / "mi300x_8gpu_llama_step.xplane.pb")
    ev = trace.events
    copy = pl.col("name").is_in(list(COPIES))
    trace.events = ev.with_columns(
        kind=pl.when(copy).then(pl.lit("memcpy")).otherwise(pl.col("kind").cast(pl.String))
        .cast(ev["kind"].dtype),
        subcategory=pl.when(copy).then(pl.col("name").replace_strict(COPIES, default=None))
        .otherwise("subcategory"),
        bytes=pl.when(copy).then(pl.int_range(1, pl.len() + 1).cast(pl.Float64) * 4096)
        .otherwise("bytes"),
        launch=pl.when(copy).then(None).otherwise("launch"))
    first = trace.events.sort("start_ns").row(0, named=True)
    mark = pl.DataFrame({"host": [first["host"]], "rank": [0], "tid": [1], "name": ["aten::mm"],
                         "start_ns": [first["start_ns"]], "end_ns": [first["end_ns"] + 50],
                         "kind": ["marker"]})
    trace.host_events = conform(pl.concat([trace.host_events, mark], how="diagonal_relaxed"),
                                HOST_EVENT_SCHEMA)
    return trace


def sample_files(d: Path) -> dict[str, object]:
    """The source trace, its RPD (with Task rows and other op types) and its rocpd file."""
    source = _source()
    write_rpd(source, d / "trace.rpd", step_name=STEP_NAME, task_kernels=TASKS,
              extra_ops=OTHER)
    write_rocpd(source, d / "1_results.db", step_name=STEP_NAME)
    return {"source": source, "rpd": d / "trace.rpd", "db": d / "1_results.db"}


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    return sample_files(tmp_path_factory.mktemp("rpd"))


def _op_types(path: Path) -> dict[str, int]:
    con = sqlite3.connect(path)
    rows = con.execute("SELECT T.string, count(*) FROM rocpd_op O JOIN rocpd_string T ON "
                       "T.id = O.opType_id GROUP BY 1").fetchall()
    con.close()
    return dict(rows)


def _events(trace: tracelens.Trace) -> pl.DataFrame:
    copy = pl.col("kind") == "memcpy"
    return trace.events.select(*EVENT_COLS).with_columns(
        pl.col("kind").cast(pl.String),
        name=pl.when(copy).then(pl.col("subcategory").replace_strict(COPY_NAMES, default=None))
        .otherwise("name"),
        bytes=pl.when(copy).then("bytes")).sort("device", "start_ns", "name")


def test_sniffed_as_rpd_plain_and_gzipped(files, tmp_path: Path) -> None:
    packed = tmp_path / "trace.rpd.gz"
    packed.write_bytes(gzip.compress(files["rpd"].read_bytes()))
    assert sniff_format(files["rpd"]) == sniff_format(packed) == "rpd"
    assert sniff_format(files["db"]) == "sqlite"  # rocprofv3's rocpd is not RPD
    assert tracelens.load(packed).events.height == tracelens.load(files["rpd"]).events.height


def test_round_trip_equals_the_trace_it_came_from(files) -> None:
    """Same kernels and copies (names, devices, times, directions, bytes), the same streams
    as the rocpd writer's queues, launch shapes where one call launched one kernel."""
    source, back = files["source"], tracelens.load(files["rpd"], step_marker=STEP)
    assert [s["format"] for s in back.meta.sources] == ["rpd"]
    # rpd_tracer's clocktime_ns
    assert [f.clock for f in back.meta.facts(HostClockFacts)] == ["CLOCK_MONOTONIC"]
    assert _events(back).equals(_events(source))
    rocpd = tracelens.load(files["db"], step_marker=STEP)
    keys = ["device", "start_ns", "name"]
    assert back.events.select(*keys, "stream").sort(keys).equals(
        rocpd.events.select(*keys, "stream").sort(keys))
    got = back.events.sort(keys)
    want = source.events.sort(keys)
    graph = got["name"].cast(pl.String).str.contains(TASKS)
    assert graph.sum() > 0 and got.filter(graph)["launch"].null_count() == graph.sum()
    assert got.filter(~graph)["launch"].equals(want.filter(~graph)["launch"])
    assert back.steps.select("step", "start_ns", "end_ns").equals(
        source.steps.select("step", "start_ns", "end_ns"))


def test_host_calls_link_to_their_device_work(files) -> None:
    """Every kernel and copy carries the id of the API call that enqueued it (through
    ``rocpd_api_ops``), ending before it starts; collectives keep
    their RCCL call (so their type), graph kernels share one ``hipGraphLaunch``."""
    back = tracelens.load(files["rpd"])
    api = back.host_events.filter(pl.col("kind") == "api").select(
        correlation_id="correlation_id", api="name", api_end="end_ns")
    j = back.events.join(api, on="correlation_id", how="left")
    assert j["api"].null_count() == 0
    assert (j["api_end"] <= j["start_ns"]).all()
    names = j.group_by("api").len()
    assert set(names["api"]) == {"hipLaunchKernel", "hipGraphLaunch", "hipMemcpyAsync",
                                 "ncclAllGather", "ncclReduceScatter"}
    src = files["source"].events
    assert back.events.filter(pl.col("category") == "collective")["subcategory"].sort().equals(
        src.filter(pl.col("category") == "collective")["subcategory"].sort())
    graph = j.filter(pl.col("api") == "hipGraphLaunch")
    assert graph["correlation_id"].n_unique() < graph.height


def test_task_rows_are_kernels(files) -> None:
    types = _op_types(files["rpd"])
    assert types["Task"] > 0 and types["KernelExecution"] > 0
    back = tracelens.load(files["rpd"])
    kernels = back.events.filter(pl.col("kind") != "memcpy")
    assert kernels.height == types["Task"] + types["KernelExecution"]
    names = kernels["name"].cast(pl.String)
    assert kernels.filter(names.str.contains(TASKS)).height == types["Task"]
    assert kernels["name"].cast(pl.String).str.starts_with("<unknown kernel").sum() == 0


def test_other_op_types_are_counted_in_one_warning(files) -> None:
    back = tracelens.load(files["rpd"])
    hits = [w for w in back.meta.warnings if "other op types" in w]
    assert hits == [f"{files['rpd'].name}: 5 rocpd_op rows of other op types are not read "
                    "(FillBuffer 3, Marker 2)"]


def test_user_markers_are_annotations_and_steps(files) -> None:
    back = tracelens.load(files["rpd"], step_marker=STEP)
    marks = back.host_events.filter(pl.col("kind") == "marker")["name"].to_list()
    assert "aten::mm" in marks
    assert sorted(m for m in marks if m.startswith("ProfilerStep#")) == [
        STEP_NAME.format(step=s) for s in sorted(files["source"].steps["step"].to_list())]
    assert back.steps["source"].unique().to_list() == ["marker"]
    assert back.steps.height == files["source"].steps.height


def _copy(src: Path, tmp: Path) -> Path:
    out = tmp / src.name
    out.write_bytes(src.read_bytes())
    return out


def test_input_is_not_modified(files) -> None:
    before = files["rpd"].read_bytes()
    tracelens.load(files["rpd"])
    assert files["rpd"].read_bytes() == before
    assert sorted(p.name for p in files["rpd"].parent.iterdir()) == ["1_results.db",
                                                                     "trace.rpd"]


def test_summarize_end_to_end(files) -> None:
    res = cli("summarize", str(files["rpd"]), "--format", "json", "--top", "1000",
              "--step-marker", STEP)
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    types = _op_types(files["rpd"])
    kernels = sum(k["count"] for k in doc["top_kernels"]
                  if k["name"] not in COPY_NAMES.values())
    assert kernels == types["KernelExecution"] + types["Task"]
    assert doc["inputs"][0]["format"] == "rpd"
    assert doc["headline"]["steps"] == files["source"].steps.height


def test_rocpd_reader_hands_an_rpd_file_over(files) -> None:
    """Before, the rocprofv3 rocpd reader refused an RPD file ("an RPD database"); called
    directly (or on a gzipped file the sniffer could not tell), it now reads it as RPD."""
    from parsers.rocprof import read_rocpd
    trace = read_rocpd(files["rpd"])
    assert [s["format"] for s in trace.meta.sources] == ["rpd"]
    assert trace.events.height == tracelens.load(files["rpd"]).events.height


def test_a_gzipped_rpd_read_by_the_rocpd_reader_is_inflated_once(
        files, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The hand-over reads the RPD tables on the connection already open: the ``.db.gz``
    is inflated once, not once per reader."""
    import gzip

    from parsers.rocprof import read_rocpd, sqlite_db
    gz = tmp_path / "trace.db.gz"
    gz.write_bytes(gzip.compress(files["rpd"].read_bytes()))
    calls = []
    inflate = sqlite_db.inflate_to

    def counted(*args: object) -> int:
        calls.append(1)
        return inflate(*args)
    monkeypatch.setattr(sqlite_db, "inflate_to", counted)
    trace = read_rocpd(gz)
    assert [s["format"] for s in trace.meta.sources] == ["rpd"] and len(calls) == 1
    assert trace.events.height == tracelens.load(files["rpd"]).events.height


def test_a_directory_holding_an_rpd_file_is_read(files, tmp_path: Path) -> None:
    """Before, a directory holding only ``trace.rpd`` held "no trace files"."""
    (tmp_path / "run").mkdir()
    _copy(files["rpd"], tmp_path / "run")
    trace = tracelens.load(tmp_path / "run")
    assert trace.events.height == tracelens.load(files["rpd"]).events.height


def test_each_pid_is_a_rank(files, tmp_path: Path) -> None:
    """rpd_tracer writes every process of a run into one file: each ``rocpd_api.pid`` is a
    rank, its device work found through the calls that enqueued it."""
    one = files["source"]
    two = tracelens.load(SAMPLES / "mi300x_8gpu_llama_step.xplane.pb")
    two.events = pl.concat([one.events, one.events.with_columns(rank=pl.lit(1, pl.Int32))])
    two.devices = pl.concat([one.devices, one.devices.with_columns(rank=pl.lit(1, pl.Int32))])
    two.steps = pl.concat([one.steps, one.steps.with_columns(rank=pl.lit(1, pl.Int32))])
    write_rpd(two, tmp_path / "two.rpd", step_name=STEP_NAME)
    back = tracelens.load(tmp_path / "two.rpd", step_marker=STEP)
    assert back.events.group_by("rank").len().sort("rank")["len"].to_list() == [
        one.events.height] * 2
    pids = [p.pid for p in back.meta.facts(HostClockFacts)[0].processes]
    assert len(set(pids)) == 2 and pids == sorted(pids)
    assert back.steps.group_by("rank").len()["len"].to_list() == [one.steps.height] * 2


def _edit(src: Path, tmp: Path, *sql: str) -> Path:
    path = _copy(src, tmp)
    con = sqlite3.connect(path)
    for q in sql:
        con.execute(q)
    con.commit()
    con.close()
    return path


def test_rocprofiler_sdk_copy_types_and_kernel_names_from_the_launch(files,
                                                                     tmp_path: Path) -> None:
    """rpd_tracer's rocprofiler-sdk source names copy ops ``MEMORY_COPY_*``; a kernel op
    with an empty description is named by its launch call's kernelapi row."""
    path = _edit(files["rpd"], tmp_path,
                 "UPDATE rocpd_string SET string = 'MEMORY_COPY_HOST_TO_DEVICE' "
                 "WHERE string = 'CopyHostToDevice'",
                 "UPDATE rocpd_op SET description_id = 1 WHERE opType_id = (SELECT id FROM "
                 "rocpd_string WHERE string = 'KernelExecution')")
    back, base = tracelens.load(path), tracelens.load(files["rpd"])
    keys = ["device", "start_ns", "kind"]
    assert back.events.select(*keys, "subcategory", "name").sort(keys).equals(
        base.events.select(*keys, "subcategory", "name").sort(keys))


def test_idle_analysis_follows_the_linked_calls(files) -> None:
    """With every op linked to its launch call, no idle time is "no host data" (the rocpd
    writer keeps only RCCL calls: there 1.7 ms of device 0's idle time has none)."""
    summary = tracelens.summarize(tracelens.load(files["rpd"], step_marker=STEP))
    for d in summary["devices"]:
        idle = d["timeline"]["idle_breakdown"]
        assert idle["no_host_data_ns"] == 0 and idle["host_launch_ns"] > 0, idle


def test_newer_files_keep_marker_text_in_rocpd_ustring(files, tmp_path: Path) -> None:
    """Newer rpd_tracer builds write ``args`` into ``rocpd_ustring``; the messages are read
    from there (the same ids in ``rocpd_string`` are other strings)."""
    marker = "(SELECT id FROM rocpd_string WHERE string = 'UserMarker')"
    path = _edit(files["rpd"], tmp_path,
                 "CREATE TABLE rocpd_ustring (id INTEGER PRIMARY KEY, string TEXT)",
                 "INSERT INTO rocpd_ustring (id, string) SELECT A.id, S.string FROM rocpd_api A "
                 f"JOIN rocpd_string S ON S.id = A.args_id WHERE A.apiName_id = {marker}",
                 f"UPDATE rocpd_api SET args_id = id WHERE apiName_id = {marker}",
                 "UPDATE rocpd_string SET string = 'stale' WHERE string LIKE 'ProfilerStep#%' "
                 "OR string = 'aten::mm'")
    names = lambda t: sorted(t.host_events.filter(pl.col("kind") == "marker")["name"])  # noqa
    assert names(tracelens.load(path)) == names(tracelens.load(files["rpd"]))


def test_older_launch_and_copy_rows_keyed_by_op(files, tmp_path: Path) -> None:
    """Older files keep launch shapes in ``rocpd_kernelop`` and copy sizes in
    ``rocpd_copyop``, keyed by op id: the file, rewritten so, reads the same."""
    kernel = "(SELECT id FROM rocpd_string WHERE string = 'KernelExecution')"
    path = _edit(
        files["rpd"], tmp_path,
        'CREATE TABLE rocpd_kernelop AS SELECT L.op_id AS op_ptr_id, K.gridX, K.gridY, '
        "K.gridZ AS gridz, K.workgroupX, K.workgroupY, K.workgroupZ, K.groupSegmentSize, "
        "K.privateSegmentSize, K.codeObject_id, K.kernelName_id FROM rocpd_kernelapi K "
        "JOIN rocpd_api_ops L ON L.api_id = K.api_ptr_id JOIN rocpd_op O ON O.id = L.op_id "
        f"WHERE O.opType_id = {kernel}",
        "CREATE TABLE rocpd_copyop AS SELECT L.op_id AS op_ptr_id, C.size FROM rocpd_copyapi "
        "C JOIN rocpd_api_ops L ON L.api_id = C.api_ptr_id",
        "DROP TABLE rocpd_kernelapi", "DROP TABLE rocpd_copyapi",
        "UPDATE rocpd_metadata SET value = '1' WHERE tag = 'schema_version'")
    keys = ["device", "start_ns", "name"]
    cols = [*keys, "launch", "bytes", "kind"]
    back, base = tracelens.load(path), tracelens.load(files["rpd"])
    assert back.events.select(cols).sort(keys).equals(base.events.select(cols).sort(keys))
    assert back.events["launch"].null_count() < back.events.height
    assert not [w for w in back.meta.warnings if "schema version" in w]
    assert [f.schema_version for f in rocprof_facts(back.meta)] == ["1"]
    assert [f.schema_version for f in rocprof_facts(base.meta)] == ["2"]
