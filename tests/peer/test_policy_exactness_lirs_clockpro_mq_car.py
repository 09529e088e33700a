"""Exactness of ember's LIRS, CLOCK-Pro, MQ and CAR against libCacheSim (the `libcachesim`
pip package, 0.3.5), count-based, on the same key sequences as test_policy_exactness.py
plus the real block trace cloudPhysicsIO at three cache sizes.

Expected (see lirs.rs, mq.rs, car.rs and clock_pro.rs in crates/policy/src/replacement/):
  * `lirs:lcs` equals libCacheSim's `LIRS` (Lhirs 1 %, at least one block; its departures
    from the paper are listed in lirs.rs). ember's default `lirs` is the paper's form, and
    differs a little.
  * `mq:lcs` equals libCacheSim's `MQ` (8 queues, lifetime 10 000, Qout 4x the cache):
    libCacheSim looks a missed block up in Qout before the victim joins it; ember's default
    `mq` takes the paper's order, and differs only when Qout is full.
  * `car`: libcachesim 0.3.x has no CAR class, so ember's CAR is compared with `CarRef`
    below, written from figure 2 of Bansal & Modha (FAST 2004): equal miss counts.
  * `clockpro`: libCacheSim's `ClockPro` departs from the paper (a page that returns in its
    test period is promoted inside the table of test pages and misses on every later access;
    a miss while the cold pages fill their target is not cached), and misses more than LRU
    on cloudPhysicsIO. ember implements the paper; the test only checks that ember's
    CLOCK-Pro misses less than libCacheSim's there.
"""

from __future__ import annotations

import tempfile
from collections import OrderedDict
from pathlib import Path

import pytest

import test_policy_exactness as peer

REAL_SIZES = [100, 400, 1000]

# ember spec -> libCacheSim constructor name.
EXACT = {"lirs:lcs": "LIRS", "mq:lcs": "MQ"}


class CarRef:
    """CAR as figure 2 of the paper gives it: T1 and T2 clocks (first entry the hand),
    B1 and B2 LRU lists (first entry the LRU end), the target p real."""

    def __init__(self, c: int) -> None:
        self.c, self.p = c, 0.0
        self.t1: OrderedDict = OrderedDict()
        self.t2: OrderedDict = OrderedDict()
        self.b1: OrderedDict = OrderedDict()
        self.b2: OrderedDict = OrderedDict()

    def _replace(self) -> None:
        while True:
            if len(self.t1) >= max(1.0, self.p):
                page, ref = self.t1.popitem(last=False)
                if not ref:
                    self.b1[page] = None
                    return
                self.t2[page] = False
            else:
                page, ref = self.t2.popitem(last=False)
                if not ref:
                    self.b2[page] = None
                    return
                self.t2[page] = False

    def access(self, x: int) -> bool:
        for t in (self.t1, self.t2):
            if x in t:
                t[x] = True
                return True
        c = self.c
        if len(self.t1) + len(self.t2) == c:
            self._replace()
            if x not in self.b1 and x not in self.b2:
                if len(self.t1) + len(self.b1) == c:
                    self.b1.popitem(last=False)
                elif len(self.t1) + len(self.t2) + len(self.b1) + len(self.b2) == 2 * c:
                    self.b2.popitem(last=False)
        if x in self.b1:
            self.p = min(self.p + max(1.0, len(self.b2) / len(self.b1)), c)
            del self.b1[x]
            self.t2[x] = False
        elif x in self.b2:
            self.p = max(self.p - max(1.0, len(self.b1) / len(self.b2)), 0.0)
            del self.b2[x]
            self.t2[x] = False
        else:
            self.t1[x] = False
        return False


def car_ref_misses(keys, c: int) -> int:
    ref = CarRef(c)
    return sum(1 for k in keys.tolist() if not ref.access(k))


@pytest.fixture(scope="module")
def exe() -> Path:
    return peer.build_example()


def _compare(exe: Path, keys, specs: dict[str, str], caps: list[int]) -> list[tuple]:
    return peer.compare_with_libcachesim(exe, keys, {e: (n, caps) for e, n in specs.items()})


def test_equal_libcachesim_on_cloudphysics(exe: Path, peer_data: Path) -> None:
    keys = peer.read_oracle_general_keys(peer_data / "cloudPhysicsIO.oracleGeneral.bin")
    rows = _compare(exe, keys, EXACT, REAL_SIZES)
    assert len(rows) == len(EXACT) * len(REAL_SIZES)
    peer.assert_rows_equal(rows, "cloudPhysicsIO", len(keys))


@pytest.mark.parametrize("seq", ["zipf0.9", "uniform", "hot+scan", "phases"])
def test_equal_libcachesim_on_synthetic_sequences(exe: Path, seq: str) -> None:
    keys = peer.sequences()[seq]
    rows = _compare(exe, keys, EXACT, peer.CAPACITIES)
    peer.assert_rows_equal(rows, seq)


def test_paper_lirs_differs_from_libcachesim_by_little(exe: Path) -> None:
    """The paper's LIRS keeps the LIR set full where libCacheSim's shrinks it: close, not equal."""
    keys = peer.sequences()["zipf0.9"]
    (_, _, ours, theirs), = _compare(exe, keys, {"lirs": "LIRS"}, [1000])
    assert ours != theirs
    assert abs(ours - theirs) < 0.01 * len(keys), (ours, theirs)


@pytest.mark.parametrize("seq", ["cloudPhysicsIO", "zipf0.9", "hot+scan"])
def test_car_equals_the_paper_reference(exe: Path, peer_data: Path, seq: str) -> None:
    if seq == "cloudPhysicsIO":
        keys = peer.read_oracle_general_keys(peer_data / "cloudPhysicsIO.oracleGeneral.bin")
    else:
        keys = peer.sequences()[seq][:60_000]
    caps = [7, 100, 400, 1000]
    with tempfile.TemporaryDirectory() as d:
        keys_file = Path(d) / "k.u64"
        keys.astype("<u8").tofile(keys_file)
        ours = peer.ember_misses(exe, keys_file, [f"car@{c}" for c in caps])
    for c in caps:
        assert ours[f"car@{c}"] == car_ref_misses(keys, c), f"{seq} car@{c}"


def test_clockpro_misses_less_than_libcachesims_on_cloudphysics(exe: Path, peer_data: Path) -> None:
    keys = peer.read_oracle_general_keys(peer_data / "cloudPhysicsIO.oracleGeneral.bin")
    rows = _compare(exe, keys, {"clockpro": "ClockPro", "lru": "LRU"}, REAL_SIZES)
    got = {(e, c): (ours, theirs) for e, c, ours, theirs in rows}
    for c in REAL_SIZES:
        ours, theirs = got[("clockpro", c)]
        lru_theirs = got[("lru", c)][1]
        assert theirs > lru_theirs, f"libCacheSim's ClockPro@{c} no longer misses more than LRU"
        assert ours < theirs, f"clockpro@{c}: ember {ours} vs libCacheSim {theirs}"
