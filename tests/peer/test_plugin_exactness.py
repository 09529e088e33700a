"""Policies written in Python, run by ember's simulator through emberlab (emberlab.plugin),
against ember's native policies and libCacheSim's `PluginCache` on the peer trace
cloudPhysicsIO, at three sizes:

* LRU written in Python gives ember's native LRU's miss counts exactly;
* FIFO and LRU written for both plugin APIs (ember's class, libCacheSim's five hooks) give
  libCacheSim's PluginCache miss counts exactly (count-based capacity: libCacheSim with
  `ignore_obj_size=True`, ember with one access per request keyed by its first 512-byte
  sector, libCacheSim's object view of a block trace).
"""

from __future__ import annotations

from collections import OrderedDict
from pathlib import Path

import emberlab as em
import libcachesim as lcs
import pytest
from emberlab.plugin import Fifo, Lru

SIZES = [100, 1_000, 5_000]
VSCSI = dict(format="vscsi", block_size=512, per_request=True)


def lcs_plugin_misses(path: Path, lru: bool, capacity: int) -> int:
    """libCacheSim's PluginCache with LRU or FIFO written as its hooks."""
    reader = lcs.TraceReader(str(path), lcs.TraceType.VSCSI_TRACE,
                             lcs.ReaderInitParam(ignore_obj_size=True))
    n = reader.get_num_of_req()

    def hit(d, r):
        if lru:
            d.move_to_end(r.obj_id)

    def miss(d, r):
        d[r.obj_id] = None

    def evict(d, r):
        return d.popitem(last=False)[0]

    def remove(d, obj_id):
        d.pop(obj_id, None)

    cache = lcs.PluginCache(capacity, lambda p: OrderedDict(), hit, miss, evict, remove,
                            lambda d: None)
    miss_ratio, _ = cache.process_trace(reader)
    return int(round(miss_ratio * n))


@pytest.fixture(scope="module")
def vscsi(peer_data: Path) -> Path:
    return peer_data / "cloudPhysicsIO.vscsi"


def misses(trace: Path, policy, **opts) -> list[int]:
    df = em.sim(trace, policy=policy, size=[str(s) for s in SIZES], **opts)
    assert list(df["capacity_blocks"]) == SIZES
    return list(df["misses"])


def test_python_lru_equals_native_lru(vscsi, peer_data):
    assert misses(vscsi, Lru, **VSCSI) == misses(vscsi, "lru", **VSCSI)
    blocks = peer_data / "cloudPhysicsIO.oracleGeneral.bin"
    assert misses(blocks, Lru) == misses(blocks, "lru")


@pytest.mark.parametrize("cls,lru", [(Fifo, False), (Lru, True)])
def test_python_policy_equals_libcachesim_plugin(vscsi, cls, lru):
    ours = misses(vscsi, cls, **VSCSI)
    theirs = [lcs_plugin_misses(vscsi, lru, s) for s in SIZES]
    assert ours == theirs
    assert theirs[0] > theirs[2] > 0
