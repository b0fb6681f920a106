"""One JAX program on two vendors' hardware (issue 48): the shared real MI300X trace of an eager
transformer block (``../shared/traces/xprof/mi300x_jax08_attention.xplane.pb``) and the same
program run on a TPU v5e (``sample_traces/tpu/eager_block.xplane.pb``, made by
``make_eager_block.py``, its program read back from the GPU trace's HLO). ``compare`` matches
their ops by the JAX op each came from, and the JAX op we read from the HLO is the one XProf's
own ``tf_op`` stat gives every TPU op."""

from __future__ import annotations

import json
import re
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner

import tracelens
from parsers.xplane_schema import xspace_class
from parsers.xspace.planes import stat_value
from tracelens.analyze.runs.match import fingerprints
from tracelens.analyze.runs.kernels import program_key
from tracelens.cli.commands import main
from tracelens.hlo.jax_ops import jax_op_table

ROOT = Path(__file__).resolve().parent.parent
TPU = ROOT / "sample_traces" / "tpu"
EAGER = TPU / "eager_block.xplane.pb"
GPU = ROOT.parent / "shared" / "traces" / "xprof" / "mi300x_jax08_attention.xplane.pb"
needs_gpu = pytest.mark.skipif(not GPU.exists(), reason=f"{GPU} not present (../shared)")


def _tf_ops(path: Path) -> pl.DataFrame:
    """(program_id, op, tf_op) of every op XProf's TPU plane names a ``tf_op`` for, read from
    the protobuf here (the reader keeps no tf_op column), the ``:type`` suffix cut."""
    xs = xspace_class()()
    xs.ParseFromString(path.read_bytes())
    (plane,) = [p for p in xs.planes if p.name == "/device:TPU:0"]
    refs = {k: v.name for k, v in plane.stat_metadata.items()}
    rows = []
    for md in plane.event_metadata.values():
        st = {refs.get(s.metadata_id): stat_value(s, refs) for s in md.stats}
        m = re.match(r"^%?([^\s=]+)\s*=", md.name)
        if m and "tf_op" in st and "program_id" in st:
            pid = int(st["program_id"])
            rows.append((pid - (1 << 64) if pid >= 1 << 63 else pid, m.group(1),
                         re.sub(r":[^/]*$", "", str(st["tf_op"]))))
    return pl.DataFrame(rows, schema=["program_id", "op", "tf_op"], orient="row")


@pytest.mark.parametrize("name", ["eager_block", "remat", "flash", "sync", "multi"])
def test_the_jax_op_read_from_the_hlo_is_xprofs_tf_op(name: str) -> None:
    path = TPU / f"{name}.xplane.pb"
    theirs = _tf_ops(path)
    ours = jax_op_table(tracelens.load(path).modules)
    joined = theirs.join(ours, on=["program_id", "op"], how="left")
    assert theirs.height > 20
    assert joined.filter(pl.col("jax_op") != pl.col("tf_op")).height == 0
    assert joined["jax_op"].null_count() == 0


@needs_gpu
def test_a_gpu_fusion_without_metadata_takes_the_op_named_in_its_body() -> None:
    """XLA:GPU's ``loop_convert_fusion`` of a bf16 add has empty metadata and a ``convert``
    root; the ``add`` under it is ``jit(add)/add``. Its GEMM custom call is named itself."""
    t = tracelens.load(GPU)
    tab = jax_op_table(t.modules)
    ops = {(r["module"], r["op"]): r["jax_op"] for r in tab.iter_rows(named=True)}
    assert ops[("jit_add", "loop_convert_fusion")] == "jit(add)/add"
    assert ops[("jit_matmul", "custom-call.1")] == "jit(matmul)/dot_general"
    assert ops[("jit_true_divide", "loop_convert_fusion")] == "jit(true_divide)/div"
    assert ops[("jit__reduce_max", "input_reduce_fusion")] == "jit(_reduce_max)/reduce_max"


def test_programs_of_one_name_are_numbered_in_the_order_they_first_ran() -> None:
    """TPU program ids are fingerprints: a larger id may run first. ``#k`` follows the runs."""
    part = pl.DataFrame({"module": ["jit_add", "jit_add", "jit_dot"],
                         "program_id": [9_000, -5, 3], "first_ns": [100, 200, 50]})
    keys = {r["program_id"]: r["program"] for r in program_key(part).iter_rows(named=True)}
    assert keys == {9_000: "jit_add#1", -5: "jit_add#2", 3: "jit_dot"}


def test_an_eager_tpu_loop_has_one_step_per_run_of_its_heaviest_program() -> None:
    """The program's first op is a copy-start, whose span in flight sits on an async lane
    at the same start: counted as a second run it gave six steps, every other one 0 ms."""
    t = tracelens.load(EAGER)
    assert t.meta.steps_source.startswith("program:jit_matmul(")
    dur = (t.steps["end_ns"] - t.steps["start_ns"]).to_list()
    assert len(dur) == 3 and min(dur) > 0
    assert 5_700_000 < dur[0] < 5_900_000 and 5_700_000 < dur[1] < 5_900_000


def _compare_json(a: Path, b: Path) -> dict:
    res = CliRunner().invoke(main, ["compare", str(a), str(b), "--top", "100", "--format",
                                    "json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


@needs_gpu
def test_compare_of_one_jax_program_on_a_gpu_and_a_tpu() -> None:
    out = _compare_json(GPU, EAGER)
    warn = "\n".join(out["warnings"])
    assert "different vendors' hardware" in warn
    # the same program: no parameter or result shape differs, no JAX op mix differs
    assert "other parameter or result shapes" not in warn and "different JAX ops" not in warn
    assert "different HLO under the same program name" not in warn  # each backend's own HLO
    # the two scalar programs the TPU ran no device op for are named, nothing else
    assert "only in base: jit_convert_element_type, jit_sqrt; only in new: -" in warn
    tpu = tracelens.load(EAGER)
    assert not tpu.events.filter(pl.col("module").cast(pl.String).is_in(
        ["jit_sqrt", "jit_convert_element_type"])).height
    m = out["matching"]
    assert m["by_op"] == 0 and m["by_jax_op"] >= 19
    by_jax = [k for k in out["kernels"] if k["match"] == "jax_op"]
    assert len(by_jax) == m["by_jax_op"]  # each changed: another vendor's kernels
    assert by_jax and all(k["program"] == k["base_program"] and k["jax_op"] for k in by_jax)
    gemm = {k["program"] for k in by_jax if k["category"] == "gemm"}
    assert gemm == {f"jit_matmul#{i}" for i in range(1, 6)}  # all five GEMM programs
    # the step-time difference split by category, each side's hardware named
    comps = {c["component"] for c in out["components"]}
    assert {"compute:gemm", "compute:elementwise", "idle"} <= comps
    assert [h["vendor"] for h in out["base"]["hardware"]] == ["amd"]
    assert [h["vendor"] for h in out["new"]["hardware"]] == ["google"]


@needs_gpu
def test_programs_numbered_alike_on_both_backends_are_the_same_programs() -> None:
    """``jit_matmul#k`` on the GPU and on the TPU take the same parameters and return the same
    shape (each side's HLO read independently): the k-th to run is the same program."""
    sides = []
    for path in (GPU, EAGER):
        t = tracelens.load(path)
        first = t.events.filter(pl.col("module").is_not_null()).group_by(
            pl.col("module").cast(pl.String), "program_id").agg(
            first_ns=pl.col("start_ns").min())
        keys = program_key(first)
        sig = {}
        for r in keys.iter_rows(named=True):
            one = t.modules.filter(pl.col("program_id") == r["program_id"])
            sig[r["program"]] = fingerprints(one, signature=True)[r["module"]]
        sides.append(sig)
    gpu, tpu = sides
    shared = set(gpu) & set(tpu)
    assert {f"jit_matmul#{i}" for i in range(1, 6)} | {"jit_add#1", "jit_multiply#3"} <= shared
    assert all(gpu[k] == tpu[k] for k in shared)
    # and the numbering is needed: the same name's programs differ from one another
    assert len({gpu[f"jit_matmul#{i}"] for i in range(1, 6)}) == 5


@needs_gpu
def test_scaling_from_the_gpu_run_to_the_tpu_run_of_one_program() -> None:
    res = CliRunner().invoke(main, ["scaling", str(GPU), str(EAGER), "--format", "json"])
    assert res.exit_code == 0, res.output
    (tr,) = json.loads(res.stdout)["transitions"]
    assert any("different vendors' hardware" in w for w in tr["warnings"])


def test_a_module_without_a_name_adds_no_jax_ops() -> None:
    """A program whose name the trace does not give is left out (its ops stay unknown), and
    does not stop the named ones from being read."""
    mods = tracelens.load(EAGER).modules
    unnamed = mods.head(1).with_columns(pl.lit(None, pl.String).alias("module"))
    both = jax_op_table(pl.concat([mods, unnamed], how="vertical_relaxed"))
    assert both.equals(jax_op_table(mods)) and both["module"].null_count() == 0


def test_a_program_of_one_name_with_other_shapes_is_warned_across_vendors() -> None:
    """Across vendors each backend's HLO is its own, so a program of one name is compared by
    its parameter and result shapes: the eager program against itself with one of its
    ``jit_matmul`` programs' shapes changed (the GPU side's signatures as given) is named."""
    from dataclasses import dataclass, field

    from tracelens.analyze.runs.match import program_notices
    from tracelens.results.summary import HardwareCount

    mods = tracelens.load(EAGER).modules
    sig = fingerprints(mods, signature=True)
    kern = pl.DataFrame({"category": ["gemm"], "program": ["jit_matmul"], "op": ["fusion"],
                         "key": ["fusion"], "name": ["fusion"], "jax_op": ["x"],
                         "ns_per_step": [1.0], "count_per_step": [1.0]})

    @dataclass
    class R:
        hardware: tuple[HardwareCount, ...]
        signatures: dict
        devices: int = 1
        kernels: pl.DataFrame = field(default_factory=lambda: kern)
        fingerprints: dict = field(default_factory=dict)

    tpu = R((HardwareCount("TPU v5 Lite", None, "google", 1),), sig)
    gpu = R((HardwareCount("AMD Instinct MI300X", "gfx942", "amd", 1),),
            {**sig, "jit_matmul": ("0123456789ab",)})
    texts = [n.text for n in program_notices(gpu, tpu, hlo=True)]
    assert any("other parameter or result shapes (jit_matmul" in t for t in texts), texts
    same = R((HardwareCount("AMD Instinct MI300X", "gfx942", "amd", 1),), sig)
    assert not [t for t in (n.text for n in program_notices(same, tpu, hlo=True))
                if "parameter or result shapes" in t]
