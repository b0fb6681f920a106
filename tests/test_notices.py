"""Warnings repeated per host are said once, with the hosts counted."""

from __future__ import annotations

import tracelens
from tracelens.notices import fold_per_host

from .conftest import SAMPLES


def test_fold_names_the_hosts_and_counts_them() -> None:
    hosts = [f"node{i}" for i in range(8)]
    ws = [f"node{i}.xplane.pb: clipped {3} overlaps" for i in range(8)] + ["alone"]
    out = fold_per_host(ws, hosts + [f"{h}.xplane.pb" for h in hosts])
    assert out == ["node0.xplane.pb: clipped 3 overlaps (the same on 8 hosts/files: "
                   "node0.xplane.pb, node1.xplane.pb, node2.xplane.pb, node3.xplane.pb, "
                   "... 4 more)", "alone"]
    # different numbers are different warnings
    assert len(fold_per_host(["a: 1 thing", "b: 2 things"], ["a", "b"])) == 2
    assert fold_per_host(["x"], ["a"]) == ["x"]
    # a short or embedded name is not a host mention
    ws = ["run a: clipped 2", "run b: clipped 2"]
    assert fold_per_host(ws, ["a", "b"]) == ws
    assert fold_per_host(["xnode1y: 1", "xnode2y: 1"], ["node1", "node2"]) == [
        "xnode1y: 1", "xnode2y: 1"]


def test_two_host_sample_says_its_bandwidth_note_once() -> None:
    s = tracelens.summarize(tracelens.load(SAMPLES / "mi355x_2x8gpu_straggler"))
    bw = [w for w in s["warnings"] if "memory_bandwidth" in w]
    assert len(bw) == 1 and "(the same on 2 hosts/files: " in bw[0]
