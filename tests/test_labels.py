"""Labels that match the facts (issue 25 C11): the device the others wait for is the slowest,
never the best; the filters in force are in the headline of the terminal and Markdown output."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import SAMPLES, cli


@pytest.fixture(scope="module")
def straggler_64(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The 64-GPU straggler run of the scaling tests: 8 hosts × 8 MI355X, node5/GPU3 computes
    30% slower and arrives last in every all-reduce."""
    from tracelens_dev.synth import Scenario, Straggler, build
    from tracelens_dev.writers.xspace import write

    root = tmp_path_factory.mktemp("straggler64") / "n64"
    write(build(Scenario(hosts=8, gpus=8, layers=2, steps=3, seed=1, fsdp=False, overlap=1.0,
                         batch=16, host_launches=False,
                         straggler=Straggler(host=5, device=3, slowdown=1.3))).trace, root)
    return root


def test_the_straggler_is_the_slowest_never_the_best(straggler_64: Path) -> None:
    import json

    r = cli("summarize", str(straggler_64), "--format", "json", "--quiet")
    assert r.returncode == 0, r.stderr
    top = json.loads(r.stdout)["collectives"]["stragglers"][0]
    assert (top["host"], top["device"]) == ("mi355x-node5", 3)
    assert 2 * top["times_last"] > top["instances"]  # last in most (all its all-reduces)
    out = cli("summarize", str(straggler_64), "--format", "markdown").stdout
    rows = re.findall(r"\| (median|slowest|fastest|outlier|best|worst): ([\w-]+/\d+)", out)
    roles = {}
    for role, dev in rows:
        roles.setdefault(dev, set()).add(role)
    assert rows and roles["mi355x-node5/3"] == {"slowest"}, rows
    assert not {"best", "worst"} & {r for r, _ in rows}
    assert "slowest: last in most collectives" in out


def test_roles_without_collective_data() -> None:
    """Without arrival data the slowest is the device waiting least in exposed communication,
    the fastest the one waiting most; the median the median of the others."""
    from tracelens.analyze.summary.reduce import device_roles
    from tracelens.results.summary import Timeline

    def dev(comm: int, span: int = 100) -> Timeline:
        return Timeline(span_ns=span, busy_ns=span, compute_ns=span - comm, comm_ns=comm,
                        exposed_comm_ns=comm, overlapped_comm_ns=0, memory_ns=0,
                        exposed_memory_ns=0, idle_ns=0)
    devs = [dev(10 + i % 3) for i in range(20)]
    devs[7] = dev(2)    # waits least: the others wait for it
    devs[11] = dev(13)  # waits most, by 1 point: no outlier
    roles = dict(device_roles(devs))
    assert roles["slowest"] == 7 and roles["fastest"] == 11
    assert dict(device_roles(devs, straggler=4))["slowest"] == 4


def test_filters_in_the_headline() -> None:
    path = str(SAMPLES / "mi355x_2x8gpu_straggler")
    args = ("--category", "gemm", "--category", "attention", "--time", "1ms:4ms",
            "--host", "mi355x-node1", "--kernel", "Cijk")
    out = cli("summarize", path, *args).stdout
    line = next(x for x in out.splitlines() if "filters" in x)
    for want in ("category gemm, attention", "time 1.000–4.000 ms", "host mi355x-node1",
                 "kernel Cijk"):
        assert want in line, line
    md = cli("summarize", path, "--format", "markdown", "--time", "2ms:").stdout
    assert "filters: time 2.000 ms–" in md
    full = cli("summarize", path, "--format", "markdown", "--time", "2ms:", "--all").stdout
    assert "| filters | time 2.000 ms– |" in full
    assert "filters" not in cli("summarize", path, "--format", "markdown").stdout


def test_collectives_says_its_filters() -> None:
    path = str(SAMPLES / "mi355x_2x8gpu_straggler")
    out = cli("collectives", path, "--time", "1ms:4ms").stdout
    assert out.splitlines()[0] == "filters: time 1.000–4.000 ms"
    md = cli("collectives", path, "--format", "markdown", "--category", "collective").stdout
    assert "Filters: category collective" in md
    assert "ilters" not in cli("collectives", path, "--format", "markdown").stdout
