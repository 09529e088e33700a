"""Ember's randomized replacement policies against libCacheSim (the `libcachesim` pip package,
0.3.5) on the real block trace cloudPhysicsIO at three cache sizes, statistically: libCacheSim's
caches take no seed, so for each policy and size ember's mean miss ratio over five seeds must
lie within max(0.5 points, 3 standard errors of that mean) of libCacheSim's miss ratio.

libCacheSim's classes, with their defaults (read from its sources, `cache/eviction/*.c`):
  * `random`           vs `Random`      (uniform victim from the hash table).
  * `hyperbolic`       vs `Hyperbolic`  (64 samples, score 1e8 * hits / age, age in requests).
  * `lecar`            vs `LeCaR`       (update-weight=1, lru-weight=0.5, learning rate 0.45,
                                         discount 0.005^(1/size), histories of size/2 each).
  * `wtinylfu:lcs`     vs `WTinyLFU`    (main-cache=SLRU, window-size=0.01, SLRU seg-size 1:4,
                                         a counting Bloom filter for 0.1 % error halved after
                                         32 * main size main-cache hits).
  * `cacheus:lcs`      vs `Cacheus`     (SR-LRU and CR-LFU experts, histories of size/2,
                                         learning rate drawn in [0.001, 1) and updated every
                                         size requests; its SR-LRU keeps SR at size/2), both
                                         averaged over five runs, within 0.75 points (see
                                         CACHEUS_TOLERANCE for the gap and its cause).
  * `lhd`              vs `LHD`         (the authors' code: 8 samples and the last 8
                                         victim-like admissions per eviction, 16 hit-age
                                         classes, explorers within 1 % of the size; the
                                         model is first recomputed after 2^20 requests, beyond
                                         this trace, so the authors' initial densities rank).
ember's default `wtinylfu` is the paper's form (every access counted, a window kept at its
share) and misses up to about a point less at 400 and 1000 blocks; the test checks that it
is not worse than libCacheSim's by more than the tolerance.
"""

from __future__ import annotations

import statistics
import tempfile
from pathlib import Path

import pytest

import test_policy_exactness as peer

SIZES = [100, 400, 1000]
SEEDS = [1, 2, 3, 4, 5]
POLICIES = [
    ("random", "Random"),
    ("hyperbolic", "Hyperbolic"),
    ("lecar", "LeCaR"),
    ("wtinylfu:lcs", "WTinyLFU"),
    ("lhd", "LHD"),
]
# libCacheSim's Cacheus draws its learning rate unseeded, so its own miss ratio varies from
# run to run (up to 0.5 points at 400 blocks): it is averaged over five runs too.
CACHEUS = ("cacheus:lcs", "Cacheus")
# ember's `cacheus:lcs` misses fewer than libCacheSim's Cacheus (seen: 0.52, 0.56 and 0.25
# points at 100, 400 and 1000 blocks, against libCacheSim's mean over five runs, whose standard
# error is 0.05 points): where an insertion makes libCacheSim's SR-LRU evict twice (the
# expert's victim in R, then SR's overflow), its cache stays a block short until R refills;
# ember's `Replacement` evicts at most one block per insertion and keeps that block.
CACHEUS_TOLERANCE = 0.0075


@pytest.fixture(scope="module")
def exe() -> Path:
    return peer.build_example()


def _ember_ratios(exe: Path, keys, specs: list[str]) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as d:
        keys_file = Path(d) / "k.u64"
        keys.astype("<u8").tofile(keys_file)
        misses = peer.ember_misses(exe, keys_file, specs)
    return {s: m / len(keys) for s, m in misses.items()}


def _rows(exe: Path, peer_data: Path, policies) -> list[tuple]:
    trace = peer_data / "cloudPhysicsIO.oracleGeneral.bin"
    keys = peer.read_oracle_general_keys(trace)
    specs = [f"{e}:seed={s}@{c}" for e, _ in policies for c in SIZES for s in SEEDS]
    ours = _ember_ratios(exe, keys, specs)
    rows = []
    for e, lcs_name in policies:
        for c in SIZES:
            ratios = [ours[f"{e}:seed={s}@{c}"] for s in SEEDS]
            mean = statistics.mean(ratios)
            se = statistics.stdev(ratios) / len(ratios) ** 0.5
            theirs = peer.libcachesim_misses(trace, lcs_name, c, len(keys)) / len(keys)
            rows.append((e, c, mean, se, theirs, ratios))
    return rows


def test_randomized_policies_match_libcachesim_in_the_mean(exe: Path, peer_data: Path) -> None:
    rows = _rows(exe, peer_data, POLICIES)
    assert len(rows) == len(POLICIES) * len(SIZES)
    problems = []
    for e, c, mean, se, theirs, _ in rows:
        tolerance = max(0.005, 3 * se)
        if abs(mean - theirs) > tolerance:
            problems.append(
                f"{e}@{c}: ember mean {mean:.4f} (se {se:.4f}) vs libCacheSim {theirs:.4f}, "
                f"beyond {tolerance:.4f}"
            )
        assert 0 < mean < 1, (e, c, mean)
    assert problems == []


def test_cacheus_is_within_its_stated_gap_of_libcachesim(exe: Path, peer_data: Path) -> None:
    trace = peer_data / "cloudPhysicsIO.oracleGeneral.bin"
    keys = peer.read_oracle_general_keys(trace)
    e, lcs_name = CACHEUS
    ours = _ember_ratios(exe, keys, [f"{e}:seed={s}@{c}" for c in SIZES for s in SEEDS])
    problems = []
    for c in SIZES:
        mine = [ours[f"{e}:seed={s}@{c}"] for s in SEEDS]
        theirs = [peer.libcachesim_misses(trace, lcs_name, c, len(keys)) / len(keys) for _ in SEEDS]
        gap = statistics.mean(mine) - statistics.mean(theirs)
        if abs(gap) > CACHEUS_TOLERANCE:
            problems.append(f"{e}@{c}: ember {statistics.mean(mine):.4f} vs libCacheSim "
                            f"{statistics.mean(theirs):.4f} ({gap * 100:+.2f} points)")
    assert problems == []


# The size at which each policy's seeds 7 and 8 are compared: 400 blocks, but 1000 for
# `wtinylfu:lcs`, whose seed only picks the sketch's hashes; at 400 blocks (800 counters a row)
# both seeds' sketches give the same decisions on this trace (96,602 misses each), at 1000
# they do not (94,811 and 95,253).
SEED_SIZE = {"wtinylfu:lcs": 1000}


def test_the_same_seed_repeats_and_seeds_differ(exe: Path, peer_data: Path) -> None:
    keys = peer.read_oracle_general_keys(peer_data / "cloudPhysicsIO.oracleGeneral.bin")
    for e, _ in [*POLICIES, CACHEUS]:
        c = SEED_SIZE.get(e, 400)
        specs = [f"{e}:seed=7@{c}", f"{e}:seed=8@{c}"]
        a = _ember_ratios(exe, keys, specs)
        b = _ember_ratios(exe, keys, specs)
        assert a == b, e
        assert a[specs[0]] != a[specs[1]], e


def test_paper_wtinylfu_is_not_worse_than_libcachesim(exe: Path, peer_data: Path) -> None:
    rows = _rows(exe, peer_data, [("wtinylfu", "WTinyLFU")])
    for e, c, mean, se, theirs, _ in rows:
        assert mean <= theirs + max(0.005, 3 * se), (e, c, mean, theirs)
