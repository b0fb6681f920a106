"""Write XProf's own memory figures of the traces in this folder (``xprof_memory_profile.json``):
per trace and allocator, what its ``memory_profile`` converter reports (peak bytes in use and
its heap and stack parts, the time of the peak as its offset in picoseconds, the capacity, the
step of the peak, and the allocations it lists as live at the peak). Needs XProf
(``pip install '.[xprof]'``); run ``python sample_traces/tpu/memory/xprof_figures.py``.
"""

from __future__ import annotations

import gzip
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
VARIANTS = ("plain", "remat", "bigbatch", "offload")
_RUN = """
import sys
from xprof.convert import raw_to_tool_data
data, _ = raw_to_tool_data.xspace_to_tool_data([sys.argv[1]], "memory_profile", {})
sys.stdout.write(data.decode() if isinstance(data, bytes) else (data or ""))
"""


def memory_profile(path: Path) -> dict:
    """XProf's ``memory_profile`` JSON of one XSpace (gzipped or not), run on an un-gzipped
    copy in a child process (the converter writes cache files next to its input)."""
    with tempfile.TemporaryDirectory(prefix="tracelens-memory-") as tmp:
        copy = Path(tmp) / path.name.removesuffix(".gz")
        opener = gzip.open if path.name.endswith(".gz") else open
        with opener(path, "rb") as src, open(copy, "wb") as dst:  # type: ignore[operator]
            shutil.copyfileobj(src, dst)
        done = subprocess.run([sys.executable, "-c", _RUN, str(copy)], capture_output=True,
                              text=True, check=True)
    return json.loads(done.stdout)


def figures(profile: dict) -> dict:
    """The figures of each allocator of one ``memory_profile``."""
    out = {}
    for mem_id, per in profile["memoryProfilePerAllocator"].items():
        s = per["profileSummary"]
        snaps = per["memoryProfileSnapshots"]
        special = per.get("specialAllocations", [])
        live, special_rows = [], []
        for a in per["activeAllocations"]:
            i = int(a["snapshotIndex"])
            m = snaps[i]["activityMetadata"] if i >= 0 else special[int(a["specialIndex"])]
            row = {"allocation_bytes": int(m["allocationBytes"]),
                   "requested_bytes": int(m["requestedBytes"]), "op": m["tfOpName"],
                   "shape": m["tensorShape"], "region": m["regionType"],
                   "count": int(a["numOccurrences"])}
            (live if i >= 0 else special_rows).append(row)
        out[mem_id] = {"peak_bytes_in_use": int(s["peakStats"]["peakBytesInUse"]),
                       "heap_bytes": int(s["peakStats"]["heapAllocatedBytes"]),
                       "stack_bytes": int(s["peakStats"]["stackReservedBytes"]),
                       "peak_time_ps": int(s["peakStatsTimePs"]),
                       "capacity_bytes": int(s["memoryCapacity"]),
                       "lifetime_peak_bytes": int(s["peakBytesUsageLifetime"]),
                       "peak_step": int(snaps[0]["activityMetadata"]["stepId"]) if snaps else None,
                       "live": live, "special": special_rows}
    return out


if __name__ == "__main__":
    result = {v: figures(memory_profile(HERE / f"{v}.xplane.pb.gz")) for v in VARIANTS}
    (HERE / "xprof_memory_profile.json").write_text(json.dumps(result, indent=1) + "\n")
