"""The admission filters libCacheSim has, against libCacheSim 0.3.x on the real trace.

ember's `bloom` doorkeeper with an exact set that is never cleared (`--bloom-keys 0
--bloom-fpr 0`) is libCacheSim's `BloomFilterAdmissioner`; ember's `prob` filter with seed 1
draws as libCacheSim's `ProbAdmissioner` does (probability 0.5, its default). Under LRU and
FIFO at three sizes on cloudPhysicsIO, `ember sievestore`'s misses equal libCacheSim's.
libCacheSim's generator is per thread and shared by every filter of the thread, so each of its
runs here is a fresh process.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

SIZES = [100, 400, 1000]

LIBCACHESIM_RUN = """
import sys
import libcachesim as l
trace, policy, admissioner, size = sys.argv[1:5]
reader = l.TraceReader(trace, l.TraceType.ORACLE_GENERAL_TRACE,
                       l.ReaderInitParam(ignore_obj_size=True))
adm = getattr(l, admissioner)()
cache = getattr(l, policy)(int(size), hashpower=16, admissioner=adm)
miss_ratio, _ = cache.process_trace(reader)
print(miss_ratio)
"""


def libcachesim_misses(trace: Path, policy: str, admissioner: str, size: int, n: int) -> int:
    out = subprocess.run(
        [sys.executable, "-c", LIBCACHESIM_RUN, str(trace), policy, admissioner, str(size)],
        check=True, capture_output=True, text=True,
    )
    return int(round(float(out.stdout.split()[-1]) * n))


@pytest.mark.parametrize("size", SIZES)
def test_bloom_and_prob_filters_equal_libcachesim(ember: Path, peer_data: Path, tmp_path: Path,
                                                  size: int) -> None:
    trace = peer_data / "cloudPhysicsIO.oracleGeneral.bin"
    out = tmp_path / "sieves.json"
    subprocess.run(
        [str(ember), "sievestore", str(trace), "--admission", "bloom,prob", "--bloom-keys", "0",
         "--bloom-fpr", "0", "--sieve-seed", "1", "--policy", "lru,fifo", "--size", str(size),
         "-q", "--json", str(out)],
        check=True, capture_output=True,
    )
    rows = json.loads(out.read_text())
    assert len(rows) == 4
    for r in rows:
        n = r["total"]["accesses"]
        ours = n - r["total"]["read_hits"] - r["total"]["write_hits"]
        admissioner = {"bloom": "BloomFilterAdmissioner", "prob": "ProbAdmissioner"}[r["admission"]]
        theirs = libcachesim_misses(trace, r["policy"].upper(), admissioner, size, n)
        assert ours == theirs, f"{r['policy']} {r['admission']}@{size}: ember {ours} != libCacheSim {theirs}"
        assert 0 < ours < n
