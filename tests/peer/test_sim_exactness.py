"""`ember sim` against libCacheSim (the `libcachesim` Python package 0.3.5): miss counts,
through ember's own Python package (`emberlab.sim`, the same code as the `ember sim` command;
crates/py/tests checks that the two give the same numbers).

Exactness against a real peer: count-based capacity (libCacheSim with
`ignore_obj_size=True`, so every object is one unit; ember with capacity in blocks), on
(a) a synthetic Zipf trace and (b) a uniform trace, both generated and written as
oracleGeneral by ember and read by both tools from the same file, and (c) libCacheSim's real
block trace cloudPhysicsIO, read by ember's own readers in its vscsi and oracleGeneral forms.
Three cache sizes each.

Every policy below matches exactly, including ARC, 2Q and S3-FIFO at libCacheSim's default
parameters (see each policy's doc comment in crates/policy/src/replacement/). SLRU is
compared in tests/peer/test_policy_exactness.py: libCacheSim's SLRU has four segments and places a
new block in the lowest segment with room, which `ember sim`'s paper SLRU (probationary +
protected, Wong & Wilkes) deliberately does not.

For the vscsi form, libCacheSim names an object by the request's starting sector (one object
per request); ember reproduces that view with `block_size=512, per_request=True`. libCacheSim's
Belady needs oracleGeneral input, so for vscsi it runs on cloudPhysicsIO.oracleGeneral.bin,
the same requests in libCacheSim's own conversion.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import emberlab as em
import libcachesim as lcs
import pytest

# ember name -> libcachesim class
POLICIES = {
    "lru": "LRU",
    "fifo": "FIFO",
    "clock": "Clock",
    "sieve": "Sieve",
    "opt": "Belady",
    "arc": "ARC",
    "2q": "TwoQ",
    "s3fifo": "S3FIFO",
}


def lcs_misses(path: Path, trace_type, policy: str, capacity: int) -> int:
    reader = lcs.TraceReader(str(path), trace_type, lcs.ReaderInitParam(ignore_obj_size=True))
    n = reader.get_num_of_req()
    cache = getattr(lcs, policy)(capacity)
    miss_ratio, _ = cache.process_trace(reader)
    return int(round(miss_ratio * n))


def ember_misses(trace: Path, sizes: list[int], options: dict) -> dict:
    runs = em.sim(trace, policy=list(POLICIES), size=sizes, **options)
    assert len(runs) == len(POLICIES) * len(sizes)
    return {(r.policy, r.capacity_blocks): r.misses for r in runs.itertuples()}


def generated(ember: Path, tmp: Path, name: str, args: list[str]) -> Path:
    path = tmp / f"{name}.oracleGeneral.bin"
    subprocess.run([str(ember), "trace", "gen", *args, "-o", str(path)], check=True,
                   stdout=subprocess.DEVNULL)
    return path


CASES = {
    # name: (sizes in blocks)
    "zipf": [200, 2_000, 8_000],
    "uniform": [100, 1_000, 5_000],
    "cloudphysics-oracle": [100, 1_000, 5_000],
    "cloudphysics-vscsi": [100, 1_000, 5_000],
}


@pytest.fixture(scope="module")
def traces(ember: Path, peer_data: Path, tmp_path_factory) -> dict:
    tmp = tmp_path_factory.mktemp("exact")
    og = lcs.TraceType.ORACLE_GENERAL_TRACE
    zipf = generated(ember, tmp, "zipf", ["zipf", "--alpha", "0.9", "--blocks", "20000",
                                          "--requests", "300000", "--seed", "7"])
    uni = generated(ember, tmp, "uniform", ["uniform", "--blocks", "10000",
                                            "--requests", "200000", "--seed", "8"])
    cp_og = peer_data / "cloudPhysicsIO.oracleGeneral.bin"
    cp_vscsi = peer_data / "cloudPhysicsIO.vscsi"
    # name: (file ember reads, ember options, file + type libCacheSim reads for each policy)
    return {
        "zipf": (zipf, {}, lambda p: (zipf, og)),
        "uniform": (uni, {}, lambda p: (uni, og)),
        "cloudphysics-oracle": (cp_og, {}, lambda p: (cp_og, og)),
        "cloudphysics-vscsi": (
            cp_vscsi,
            {"block_size": 512, "per_request": True},
            lambda p: (cp_og, og) if p == "Belady" else (cp_vscsi, lcs.TraceType.VSCSI_TRACE),
        ),
    }


@pytest.mark.parametrize("case", list(CASES))
def test_miss_counts_equal_libcachesim(traces: dict, case: str) -> None:
    path, options, lcs_input = traces[case]
    sizes = CASES[case]
    ours = ember_misses(path, sizes, options)
    mismatches = []
    for name, cls in POLICIES.items():
        for size in sizes:
            theirs = lcs_misses(*lcs_input(cls), cls, size)
            if ours[(name, size)] != theirs:
                mismatches.append(f"{name}@{size}: ember {ours[(name, size)]} libCacheSim {theirs}")
    assert not mismatches, f"{case}: " + "; ".join(mismatches)


def test_vscsi_and_oracle_forms_are_the_same_requests(peer_data: Path) -> None:
    """ember's vscsi and oracleGeneral readers see the same 113,872 requests of cloudPhysicsIO
    that libCacheSim counts."""
    counts = []
    for name in ["cloudPhysicsIO.vscsi", "cloudPhysicsIO.oracleGeneral.bin"]:
        counts.append(len(em.read_trace(peer_data / name)))
        reader = lcs.TraceReader(str(peer_data / name),
                                 lcs.TraceType.VSCSI_TRACE if name.endswith("vscsi")
                                 else lcs.TraceType.ORACLE_GENERAL_TRACE)
        assert reader.get_num_of_req() == counts[-1]
    assert counts[0] == counts[1] == 113_872


def test_lru_over_a_state_beyond_the_caches_matches_libcachesim(ember: Path, tmp_path: Path) -> None:
    """Above about half a million blocks `ember sim` keeps LRU as a log of accesses
    (crates/policy/src/replacement/lru_log.rs: appends, a sequential victim scan and
    compactions) instead of the linked list every size above is run with: its misses must
    still be libCacheSim's LRU's. 3 M Zipf(0.9) requests over 2 M blocks, 600,000 blocks of
    cache (every compaction path runs: the log compacts about every 560,000 appends)."""
    import json

    path = generated(ember, tmp_path, "zipf-big", ["zipf", "--alpha", "0.9", "--blocks",
                                                   "2000000", "--requests", "3000000",
                                                   "--seed", "11"])
    out = subprocess.run([str(ember), "sim", str(path), "-q", "--threads", "1", "--policy",
                          "lru", "--size", "600000", "--json", "/dev/stdout"],
                         check=True, capture_output=True, text=True).stdout
    ours = json.loads(out[out.index("{"):])["runs"][0]["misses"]
    theirs = lcs_misses(path, lcs.TraceType.ORACLE_GENERAL_TRACE, "LRU", 600_000)
    assert ours == theirs, f"ember {ours} libCacheSim {theirs}"
    assert 0 < ours < 3_000_000
