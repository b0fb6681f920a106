"""compare and scaling: planted causes are diagnosed first with their exact share, and nothing
that was not planted is named."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner

from tracelens_dev.writers.xspace import Activity, build_xspace
from tracelens.cli.commands import main

GEMM = "Cijk_Ailk_Bljk_BBS_BH_MT256x256x64_MI16x16x16x1_SN_1LDSB0.kd"
RCCL = "ncclDevKernel_Generic_4(ncclDevKernelArgsStorage<4096ul>)"
T0 = 1_790_000_000_000_000_000


def job(path: Path, hosts: int = 1, gpus: int = 8, gemm: int = 400_000, ew: int = 50_000,
        allgather: int = 300_000, allreduce: int = 100_000,
        straggler: tuple | list[tuple] | None = None, delay: int = 0, steps: int = 3) -> Path:
    """Per step and device: GEMM then elementwise on stream 1; an all-gather on stream 2
    starting with the GEMM (hidden while shorter than GEMM + elementwise), then an all-reduce
    on stream 2 after the compute. The straggler's GEMM is ``delay`` longer; everyone's
    all-reduce ends together, so the others wait ``delay`` inside it. A list of stragglers
    takes turns, one per step."""
    run = path / "plugins" / "profile" / "run1"
    run.mkdir(parents=True)
    for h in range(hosts):
        acts, marks, t = [], [], 1_000
        for s in range(steps):
            compute_end = t + 10 + gemm + ew
            ag_end = t + 10 + allgather
            ar_start = max(compute_end, ag_end)
            slow_one = straggler[s % len(straggler)] if isinstance(straggler, list) \
                else straggler
            for d in range(gpus):
                slow = delay if (h, d) == slow_one else 0
                acts += [
                    Activity(d, 1, GEMM, t + 10, gemm + slow, {"hlo_op": "custom-call.1"}),
                    Activity(d, 1, "loop_add_fusion.kd", t + 10 + gemm + slow, ew,
                             {"hlo_op": "loop_add_fusion"}),
                    Activity(d, 2, RCCL, t + 10, allgather, {"hlo_op": "all-gather-start.1"}),
                    Activity(d, 2, RCCL, max(ar_start + slow, ag_end), ar_start + delay
                             + allreduce - max(ar_start + slow, ag_end),
                             {"hlo_op": "all-reduce-start.2"}),
                ]
            end = ar_start + delay + allreduce + 40
            marks.append((s, t, end))
            t = end + 100
        (run / f"node{h}.xplane.pb").write_bytes(build_xspace(
            acts, host=f"node{h}", steps=marks, profile_start_ns=T0))
    return path


def run_json(*args: str) -> tuple[int, dict]:
    res = CliRunner().invoke(main, [*args, "--format", "json"])
    assert res.exit_code in (0, 1), res.output
    return res.exit_code, json.loads(res.stdout)


def test_elementwise_regression(tmp_path: Path) -> None:
    base = job(tmp_path / "a")
    new = job(tmp_path / "b", ew=90_000)
    _, rep = run_json("compare", str(base), str(new))
    assert rep["delta_ns"] == 40_000
    assert rep["verdict"] == ["100% of the gross change is elementwise compute (+0.040 ms per "
                              "step per device)"]
    deltas = {c["component"]: c["delta_ns"] for c in rep["components"]}
    assert deltas["compute:elementwise"] == 40_000
    assert all(v == 0 for k, v in deltas.items() if k != "compute:elementwise")
    assert rep["kernels"][0]["name"] == "loop_add_fusion.kd"
    assert rep["kernels"][0]["delta_ns"] == 40_000


def test_exposed_allgather_growth_in_scaling(tmp_path: Path) -> None:
    small = job(tmp_path / "n8")
    big = job(tmp_path / "n16", hosts=2, allgather=550_000)  # 100 µs beyond the compute
    _, rep = run_json("scaling", str(small), str(big))
    assert [r["devices"] for r in rep["runs"]] == [8, 16]
    t = rep["transitions"][0]
    assert t["delta_ns"] == 100_000
    assert t["efficiency"] == pytest.approx(rep["runs"][0]["step_ns"] / rep["runs"][1]["step_ns"])
    assert t["verdict"] == ["100% of the gross change is exposed all-gather (+0.100 ms per step "
                            "per device)"]
    causes = {c["component"]: c for c in t["causes"]}
    assert causes["exposed_comm:all-gather"]["share"] == 1.0
    assert sum(c["delta_ns"] for c in t["causes"]) == t["delta_ns"]


def test_straggler(tmp_path: Path) -> None:
    base = job(tmp_path / "a", hosts=2)
    new = job(tmp_path / "b", hosts=2, straggler=(1, 3), delay=160_000)
    _, rep = run_json("scaling", str(base), str(new))
    t = rep["transitions"][0]
    assert t["delta_ns"] == 160_000
    first = t["verdict"][0]
    # 15 of 16 devices wait 160 µs, and node1/GPU3 is those 160 µs late: all of the change
    assert first.startswith("100% of the gross change is waiting for node1/GPU3")
    assert "arrives last in 100% of all-reduces" in first
    assert len(t["verdict"]) == 1
    assert t["stragglers"][0]["host"] == "node1" and t["stragglers"][0]["device"] == 3
    assert sum(c["delta_ns"] for c in t["causes"]) == pytest.approx(t["delta_ns"])


def test_compare_with_itself_and_fail_above(tmp_path: Path) -> None:
    base = job(tmp_path / "a")
    code, rep = run_json("compare", str(base), str(base))
    assert code == 0 and rep["delta_ns"] == 0 and not rep["only_base"] and not rep["only_new"]
    assert all(k["delta_ns"] == 0 for k in rep["kernels"])
    step = rep["base"]["step_ns"]
    ten = job(tmp_path / "ten", ew=50_000 + int(0.10 * step))
    two = job(tmp_path / "two", ew=50_000 + int(0.02 * step))
    assert CliRunner().invoke(main, ["compare", str(base), str(ten), "--fail-above", "5"]
                              ).exit_code == 1
    assert CliRunner().invoke(main, ["compare", str(base), str(two), "--fail-above", "5"]
                              ).exit_code == 0


def test_kernel_matching_by_normalized_name_and_op(tmp_path: Path) -> None:
    from tracelens.analyze.runs.kernels import normalize_kernel

    # only suffixes that never tell two kernels apart are stripped; numbers name fusions
    assert normalize_kernel("loop_add_fusion_3.kd") == "loop_add_fusion_3"
    assert normalize_kernel("input_reduce_fusion.12") == "input_reduce_fusion.12"
    assert normalize_kernel("fusion.3.clone") == "fusion.3"
    assert normalize_kernel("fusion_3_clone_1.kd") == "fusion_3"
    assert normalize_kernel("elementwise_kernel [clone .kd]") == "elementwise_kernel"
    base = job(tmp_path / "a")
    new = tmp_path / "b"
    run = new / "plugins" / "profile" / "run1"
    run.mkdir(parents=True)
    src = (base / "plugins" / "profile" / "run1" / "node0.xplane.pb").read_bytes()
    # another Tensile tile for the same op: matched through the op
    (run / "node0.xplane.pb").write_bytes(src.replace(b"MT256x256x64", b"MT128x256x64"))
    _, rep = run_json("compare", str(base), str(new))
    assert not rep["only_base"] and not rep["only_new"]
    assert rep["kernels"] == []  # matched, and nothing changed
    from tracelens.analyze.runs.compare import match_kernels
    from tracelens.analyze.runs.scaling import profile
    from tracelens.loading.loader import load

    matched, only_a, only_b = match_kernels(profile(load([base])).kernels,
                                            profile(load([new])).kernels)
    assert only_a.is_empty() and only_b.is_empty()
    tile = matched.filter(pl.col("new_name").str.contains("MT128x256x64"))
    assert tile.height == 1 and "MT256x256x64" in tile["base_name"][0]
    assert tile["match"][0] == "op" and tile["base_op"][0] == "custom-call.1"


def test_html_output_of_compare_and_scaling(tmp_path: Path) -> None:
    base = job(tmp_path / "a")
    new = job(tmp_path / "b", ew=90_000)
    out = tmp_path / "cmp.html"
    res = CliRunner().invoke(main, ["compare", str(base), str(new), "--html", str(out)])
    assert res.exit_code == 0, res.output
    page = out.read_text()
    assert "100% of the gross change is elementwise compute" in page
    import re
    assert page.count("<script") == 3  # data, plotly.js, the page's own script; nothing loaded
    markup = page.split("<script")[0]  # everything but the inlined scripts
    assert not re.search(r"""(?:src|href)\s*=\s*["']?https?:""", markup)
    out2 = tmp_path / "scaling.html"
    res = CliRunner().invoke(main, ["scaling", str(base), str(new), "--html", str(out2)])
    assert res.exit_code == 0 and "scaling efficiency" in out2.read_text()
    res = CliRunner().invoke(main, ["scaling", str(base), str(new), "--html",
                                    str(tmp_path / "missing" / "x.html")])
    assert res.exit_code == 2 and "cannot write the HTML file" in res.stderr


def test_synthetic_straggler_pair_names_the_slow_device(tmp_path: Path) -> None:
    """tracelens_dev.synth: the same 2 × 8 MI355X job with and without a 20%-slower GPU."""
    from tracelens_dev.writers.xspace import write
    from tracelens_dev.synth import Scenario, Straggler, build

    common = dict(device="mi355x", hosts=2, gpus=8, layers=4, steps=3, seed=1)
    write(build(Scenario(**common)).trace, tmp_path / "base")
    write(build(Scenario(**common, straggler=Straggler(host=1, device=3, slowdown=1.2))).trace,
          tmp_path / "slow")
    _, rep = run_json("scaling", str(tmp_path / "base"), str(tmp_path / "slow"))
    t = rep["transitions"][0]
    assert t["delta_ns"] > 0 and not t["noise"]["within"]
    # its GEMM time grows there; the waits it causes (in all-gathers it is last in only some
    # of: FSDP prefetches them) move most, so they come first
    assert any("mi355x-node1/GPU3" in line for line in t["verdict"])
    assert sum(c["delta_ns"] for c in t["causes"]) == pytest.approx(t["delta_ns"])
    assert all(c["share"] <= 1 for c in t["causes"])


def test_straggler_wait_is_its_own_cause_and_the_verdict_reads_it(tmp_path: Path) -> None:
    """15 of 16 devices wait 160 µs for node1/GPU3 in every all-reduce, exposed, and node1/GPU3
    is 160 µs late (its GEMM ran 160 µs longer): 160 µs of straggler wait on every device,
    none of it exposed all-reduce (which does not change) or compute (the others' GEMM time
    is unchanged; the straggler's extra GEMM is the wait). The verdict says so, per device."""
    base = job(tmp_path / "a", hosts=2)
    new = job(tmp_path / "b", hosts=2, straggler=(1, 3), delay=160_000)
    _, rep = run_json("scaling", str(base), str(new))
    t = rep["transitions"][0]
    causes = {c["component"]: c for c in t["causes"]}
    assert causes["straggler_wait:all-reduce"]["delta_ns"] == 160_000
    assert causes["straggler_wait:all-reduce"]["share"] == 1.0
    assert causes["compute:gemm"]["delta_ns"] == 0
    assert causes["compute:elementwise"]["delta_ns"] == 0
    assert causes["exposed_comm:all-reduce"]["delta_ns"] == 0
    assert t["gross_ns"] == t["delta_ns"] == 160_000
    assert t["verdict"] == ["100% of the gross change is waiting for node1/GPU3, which arrives "
                            "last in 100% of all-reduces (+0.160 ms per step per device)"]
    straggler = t["stragglers"][0]
    assert (straggler["host"], straggler["device"]) == ("node1", 3)
    # the others' waits over every device-step: 15 × 160 µs / 16
    assert straggler["wait_per_step_ns"] == 150_000
    small, big = rep["runs"]
    assert big["components"]["straggler_wait:all-reduce"] == 160_000
    assert small["components"]["straggler_wait:all-reduce"] == 0
    for r in rep["runs"]:
        assert sum(r["components"].values()) == r["step_ns"]


@pytest.fixture(scope="module")
def synth_8_to_64(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """tracelens_dev.synth: 8 MI355X, then 64 (8 hosts) with node5/GPU3 computing 30% slower."""
    from tracelens_dev.writers.xspace import write
    from tracelens_dev.synth import Scenario, Straggler, build

    root = tmp_path_factory.mktemp("synth_scaling")
    common = dict(device="mi355x", gpus=8, layers=2, steps=3, seed=1, fsdp=False, overlap=1.0,
                  batch=16, host_launches=False)
    write(build(Scenario(hosts=1, **common)).trace, root / "n8")
    write(build(Scenario(hosts=8, **common,
                         straggler=Straggler(host=5, device=3, slowdown=1.3))).trace,
          root / "n64")
    return root / "n8", root / "n64"


def test_scaling_verdict_equals_the_causes_per_device(synth_8_to_64: tuple[Path, Path],
                                                      tmp_path: Path) -> None:
    import re

    from reports.scaling import scaling_tables

    n8, n64 = synth_8_to_64
    _, rep = run_json("scaling", str(n8), str(n64))
    t = rep["transitions"][0]
    assert t["devices"] == [8, 64] and t["warnings"] == []
    step = t["step_ns"][1]
    assert sum(c["delta_ns"] for c in t["causes"]) == pytest.approx(t["delta_ns"])
    named = [c for c in t["causes"] if c["share"] >= 0.10]
    assert [c["component"] for c in named] == ["straggler_wait:all-reduce",
                                               "exposed_comm:all-reduce"]
    # one sentence per named cause, in the causes' order, with the causes' share
    assert len(t["verdict"]) == len(named)
    for line, c in zip(t["verdict"], named):
        assert line.startswith(f"{100 * c['share']:.0f}% of the gross change is ")
        assert f"{c['delta_ns'] / 1e6:+.3f} ms per step per device" in line
    line = t["verdict"][0]
    assert "waiting for mi355x-node5/GPU3" in line
    # every time in words is per device: none can exceed the step
    for ms in re.findall(r"([0-9][0-9,]*\.[0-9]+) ms", " ".join(t["verdict"])):
        assert float(ms.replace(",", "")) * 1e6 <= step
    # the typed result is what the JSON says, and its table prints the verdict's shares
    from tracelens.analyze.runs.scaling import profile, scaling
    from tracelens.loading.loader import load
    from tracelens.results.encode import encode

    res = scaling([profile(load([p]), str(p)) for p in (n8, n64)],
                  [r["steps_source"] for r in rep["runs"]])
    assert json.dumps(encode(res)) == json.dumps(rep)
    causes = next(rows for title, _, rows in scaling_tables(res) if title.startswith("Causes"))
    shares = {row[0]: row[2] for row in causes}
    for line, c in zip(t["verdict"], named):
        assert line.startswith(shares[c["component"]] + " of the gross change")
    out = tmp_path / "scaling.html"
    assert CliRunner().invoke(main, ["scaling", str(n8), str(n64), "--html", str(out)]
                              ).exit_code == 0
    page = out.read_text()
    assert "waiting for mi355x-node5/GPU3" in page and "waiting in all-reduce for the last " \
        "arrival" in page


def test_scaling_json_is_identical_across_processes(synth_8_to_64: tuple[Path, Path],
                                                    tmp_path: Path) -> None:
    from tests.test_compare import run_each_in_process

    # two stragglers taking turns: tied in every straggler column but their names
    base = job(tmp_path / "a", hosts=2, steps=4)
    new = job(tmp_path / "b", hosts=2, steps=4, straggler=[(0, 5), (1, 2)], delay=50_000)
    commands = [["scaling", *map(str, synth_8_to_64), "--format", "json"],
                ["scaling", str(base), str(new), "--format", "json"]]
    first = run_each_in_process(commands, "1")
    assert run_each_in_process(commands, "2") == first
    out = first[1]
    first, second = json.loads(out)["transitions"][0]["stragglers"][:2]
    assert (first["host"], first["device"], second["host"], second["device"]) == \
        ("node0", 5, "node1", 2)
    assert first["wait_ns"] == second["wait_ns"] and first["times_last"] == second["times_last"]


def test_scaling_warns_on_decreasing_devices_and_efficiency_above_100(
        synth_8_to_64: tuple[Path, Path], tmp_path: Path) -> None:
    n8, n64 = synth_8_to_64
    _, rep = run_json("scaling", str(n64), str(n8))
    (warning,) = rep["transitions"][0]["warnings"]
    assert warning.startswith("runs go from 64 down to 8 devices: the larger run is the baseline")
    small = job(tmp_path / "small")
    fast = job(tmp_path / "fast", hosts=2, ew=10_000)  # less work per device: shorter step
    _, rep = run_json("scaling", str(small), str(fast))
    t = rep["transitions"][0]
    assert t["efficiency"] > 1
    (warning,) = t["warnings"]
    assert warning.startswith(f"efficiency {100 * t['efficiency']:.0f}% is above 100%: the "
                              "16-device step is shorter than the 8-device one")
    res = CliRunner().invoke(main, ["scaling", str(small), str(fast)])
    assert "is above 100%" in res.output
    out = tmp_path / "w.html"
    CliRunner().invoke(main, ["scaling", str(small), str(fast), "--html", str(out)])
    assert "is above 100%" in out.read_text()


def test_verdict_busbw_of_small_collectives_is_not_rounded_to_zero() -> None:
    """Collectives of a few KiB (a CPU trace, small gradients) run at well under 1 GB/s: the
    verdict said "busbw fell from 0 to 0 GB/s"."""
    import polars as pl

    from tracelens.analyze.runs.scaling import RunProfile, verdict
    from tracelens.results.runs import Cause

    def run(step_ns: float, exposed: float, busbw: float) -> RunProfile:
        return RunProfile("r", 8, 1, 3, step_ns, {"exposed_comm:all-gather": exposed},
                          pl.DataFrame(), {"all-gather": busbw}, {})

    a, b = run(1e6, 1e5, 0.4212), run(2e6, 1.1e6, 0.0731)
    lines = verdict(a, b, [Cause("exposed_comm:all-gather", 1e6, 1.0)], 1e6)
    assert lines == ["100% of the gross change is exposed all-gather (+1.000 ms per step per "
                     "device); busbw fell from 0.421 to 0.0731 GB/s"]
    a, b = run(1e6, 1e5, 271.27), run(2e6, 1.1e6, 39.66)  # large values stay whole GB/s
    assert verdict(a, b, [Cause("exposed_comm:all-gather", 1e6, 1.0)], 1e6)[0].endswith(
        "busbw fell from 271 to 40 GB/s")


def test_shares_are_of_the_gross_change_and_never_exceed_100_percent() -> None:
    """Components move both ways (a real JAX CPU pair: elementwise -1.47 ms, idle -1.43 ms;
    the 128-rank pair: send-recv -37.9 ms, reduction +31.0 ms on a +0.6 ms step): a share of
    the net change read "5029% of the added step time". Shares are of the gross change (the
    sum of absolute deltas), and the verdict says the components moved both ways."""
    import polars as pl

    from tracelens.analyze.runs.scaling import RunProfile, scaling_transition

    def run(step_ns: float, components: dict[str, float]) -> RunProfile:
        return RunProfile("r", 8, 1, 3, step_ns, components,
                          pl.DataFrame({"ns_per_step": [1.0]}), {}, {},
                          step_times=(step_ns, step_ns, step_ns))

    a = run(10e6, {"compute:gemm": 6e6, "compute:elementwise": 3e6, "idle": 1e6})
    b = run(11e6, {"compute:gemm": 6.6e6, "compute:elementwise": 2.7e6, "idle": 0.9e6,
                   "exposed_comm:all-gather": 0.8e6})
    t = scaling_transition(a, b)
    assert t.delta_ns == 1e6 and t.gross_ns == pytest.approx(1.8e6)
    shares = {c.component: c.share for c in t.causes}
    assert shares["exposed_comm:all-gather"] == pytest.approx(0.8 / 1.8)
    assert shares["compute:elementwise"] == pytest.approx(0.3 / 1.8)
    assert sum(shares.values()) == pytest.approx(1.0)
    assert all(0 <= v <= 1 for v in shares.values())
    assert t.verdict[0] == ("44% of the gross change is exposed all-gather (+0.800 ms per step "
                            "per device)")
    assert t.noise.floor_ns == 0 and t.noise.within is False  # identical steps: no noise
    assert t.verdict[-1] == ("components moved both ways: +1.400 ms grew and -0.400 ms shrank "
                             "per step, net +1.000 ms (shares are of the gross 1.800 ms)")
