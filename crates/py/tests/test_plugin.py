"""Policies written in Python (emberlab.plugin) run by ember's simulator: LRU and FIFO in
Python give every column of ember's own lru and fifo, timelines and uncounted warm-up
periods included; names and classes mix in one call; a bad policy fails with a clear error."""

from __future__ import annotations

import pandas as pd
import pytest

import emberlab as em
from emberlab.plugin import Fifo, Lru


def same_runs(ours: pd.DataFrame, native: pd.DataFrame) -> None:
    pd.testing.assert_frame_equal(ours.drop(columns="policy"), native.drop(columns="policy"))


@pytest.mark.parametrize("name", ["zipf", "msr"])
def test_python_lru_and_fifo_equal_ember_s(traces, name):
    sizes = ["1%", "10%", "100"]
    for cls, native in ((Lru, "lru"), (Fifo, "fifo")):
        ours = em.sim(traces[name], policy=cls, size=sizes)
        assert list(ours["policy"]) == [cls.name] * 3
        same_runs(ours, em.sim(traces[name], policy=native, size=sizes))
        assert (ours["hits"] > 0).all()


def test_timeline_and_warmup_as_ember_sim(traces):
    opts = dict(size=["5%"], interval="10000req", warmup_requests=20000)
    ours = em.sim(traces["zipf"], policy=Lru, **opts)
    native = em.sim(traces["zipf"], policy="lru", **opts)
    same_runs(ours, native)
    same_runs(ours.attrs["timeline"], native.attrs["timeline"])


def test_names_and_classes_mix_in_list_order(traces):
    df = em.sim(traces["zipf"], policy=["arc", Lru, "lru", "py:emberlab.plugin:Fifo"],
                size=["2%"])
    assert list(df["policy"]) == ["arc", "py-lru", "lru", "py-fifo"]
    assert df["hits"].iloc[1] == df["hits"].iloc[2]


class Named:
    """No `name` attribute: the policy column is the class name."""

    def __init__(self, capacity):
        self.inner = Lru(capacity)

    def on_hit(self, key):
        self.inner.on_hit(key)

    def on_miss(self, key):
        self.inner.on_miss(key)

    def evict(self, key):
        return self.inner.evict(key)

    def remove(self, key):
        self.inner.remove(key)


class EvictsAStranger(Named):
    def evict(self, key):
        return 10**12


class Raises(Named):
    def on_hit(self, key):
        raise RuntimeError(f"boom at {key}")


class NoEvict:
    def __init__(self, capacity):
        pass

    def on_hit(self, key):
        pass

    def on_miss(self, key):
        pass

    def remove(self, key):
        pass


def test_bad_policies_fail_clearly(traces):
    assert list(em.sim(traces["zipf"], policy=Named, size=["1%"])["policy"]) == ["Named"]
    with pytest.raises(ValueError, match="returned 1000000000000, which is not cached"):
        em.sim(traces["zipf"], policy=EvictsAStranger, size=["1%"])
    with pytest.raises(RuntimeError, match="boom at"):
        em.sim(traces["zipf"], policy=Raises, size=["1%"])
    with pytest.raises(TypeError, match="NoEvict has no evict"):
        em.sim(traces["zipf"], policy=NoEvict, size=["1%"])
    with pytest.raises(ValueError, match="py:module:Class"):
        em.sim(traces["zipf"], policy="py:emberlab.plugin", size=["1%"])
    with pytest.raises(em.EmberError):
        em.sim(traces["zipf"], policy=Lru, size=["1%"], block_size=0)
    with pytest.raises(em.EmberError, match="minisim runs ember's own policies"):
        em.sim(traces["zipf"], policy=Lru, size=["1%"], minisim="1%")
