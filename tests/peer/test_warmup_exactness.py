"""The uncounted warm-up period of `ember sim` (`--warmup-requests`, `--warmup-time`) against
libCacheSim (the `libcachesim` Python package 0.3.5).

libCacheSim's Python API has no warm-up of its own for a cache simulation (`process_trace`'s
`start_req` skips requests instead of running them, and `AnalysisParam.warmup_time` belongs
to the trace analyzer), so its side is libCacheSim's own cache driven request by request
(`cache.get`), every request changing the cache and only those after the warm-up counted:
cachesim's `--warmup-sec` meaning. Count-based capacity as in test_sim_exactness.py, on
libCacheSim's block trace cloudPhysicsIO (oracleGeneral form).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import libcachesim as lcs
import pytest

POLICIES = {"lru": "LRU", "fifo": "FIFO", "arc": "ARC", "s3fifo": "S3FIFO"}
SIZES = [100, 5_000]


def lcs_counted_misses(path: Path, counted) -> dict:
    """libCacheSim's misses after the warm-up, every cache of the grid fed in one pass."""
    reader = lcs.TraceReader(str(path), lcs.TraceType.ORACLE_GENERAL_TRACE,
                             lcs.ReaderInitParam(ignore_obj_size=True))
    caches = {(name, size): getattr(lcs, cls)(size)
              for name, cls in POLICIES.items() for size in SIZES}
    misses = dict.fromkeys(caches, 0)
    first = None
    for i, req in enumerate(reader):
        if first is None:
            first = req.clock_time
        count = counted(i, req.clock_time - first)
        for key, cache in caches.items():
            if not cache.get(req) and count:
                misses[key] += 1
    return misses


def ember_misses(ember: Path, trace: Path, tmp: Path, flags: list[str]) -> dict:
    out = tmp / "sim.json"
    subprocess.run([str(ember), "sim", str(trace), "--policy", ",".join(POLICIES), "--size",
                    ",".join(map(str, SIZES)), "--json", str(out), "--quiet", *flags],
                   check=True)
    report = json.loads(out.read_text())
    return report, {(r["policy"], r["capacity_blocks"]): r["misses"] for r in report["runs"]}


@pytest.mark.parametrize("how", ["requests", "time"])
def test_warmup_period_matches_libcachesim(ember: Path, peer_data: Path, tmp_path: Path, how):
    trace = peer_data / "cloudPhysicsIO.oracleGeneral.bin"
    if how == "requests":
        n = 40_000
        flags = ["--warmup-requests", str(n)]

        def counted(i, _dt):
            return i >= n
    else:
        reader = lcs.TraceReader(str(trace), lcs.TraceType.ORACLE_GENERAL_TRACE,
                                 lcs.ReaderInitParam(ignore_obj_size=True))
        times = [r.clock_time for r in reader]
        span = (times[-1] - times[0]) // 3
        assert span > 0
        flags = ["--warmup-time", f"{span}s"]

        def counted(_i, dt):
            return dt >= span
    report, got = ember_misses(ember, trace, tmp_path, flags)
    assert report["warmup"] is not None and report["warmup"]["requests"] > 0
    assert got == lcs_counted_misses(trace, counted), f"after {flags}"
