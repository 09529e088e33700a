"""Replacement policies written in Python, run by ember's simulator.

A policy is a class in the shape of libCacheSim's ``PluginCache`` hooks, as methods::

    class MyPolicy:
        def __init__(self, capacity: int): ...   # once per cache size, in blocks
        def on_hit(self, key: int) -> None: ...  # a cached block was accessed
        def on_miss(self, key: int) -> None: ... # a missed block is now cached
        def evict(self, key: int) -> int: ...    # cache full, `key` missed: name a cached
                                                 #   block to eject (before on_miss(key))
        def remove(self, key: int) -> None: ...  # a cached block was invalidated

Pass the class where a policy name goes: ``emberlab.sim(trace, policy=[MyPolicy, "lru"])``
(also in a sweep spec, as the class or as ``"py:module:Class"``). ember records which
blocks are cached; ``evict`` must name one of them. A class attribute ``name`` sets the
``policy`` column (default: the class name).

:class:`Lru` and :class:`Fifo` below are complete examples.
"""

from __future__ import annotations

import importlib
from collections import OrderedDict
from typing import Any

#: The prefix of a policy written in Python in a sweep spec: ``py:module:Class``.
PREFIX = "py:"


class Lru:
    """Least recently used, written in Python (the same misses as ember's ``lru``)."""

    name = "py-lru"

    def __init__(self, capacity: int):
        self.order: OrderedDict = OrderedDict()

    def on_hit(self, key: int) -> None:
        self.order.move_to_end(key)

    def on_miss(self, key: int) -> None:
        self.order[key] = None

    def evict(self, key: int) -> int:
        return self.order.popitem(last=False)[0]

    def remove(self, key: int) -> None:
        self.order.pop(key, None)


class Fifo:
    """First in, first out, written in Python (the same misses as ember's ``fifo``)."""

    name = "py-fifo"

    def __init__(self, capacity: int):
        self.order: OrderedDict = OrderedDict()

    def on_hit(self, key: int) -> None:
        pass

    def on_miss(self, key: int) -> None:
        self.order[key] = None

    def evict(self, key: int) -> int:
        return self.order.popitem(last=False)[0]

    def remove(self, key: int) -> None:
        self.order.pop(key, None)


def is_plugin(policy: Any) -> bool:
    """True if ``policy`` is a Python policy: a class, or a ``py:module:Class`` name."""
    if isinstance(policy, str):
        return policy.startswith(PREFIX)
    return callable(policy)


def resolve(policy: Any):
    """The class of a Python policy given as a class or as ``py:module:Class``."""
    if not isinstance(policy, str):
        return policy
    spec = policy[len(PREFIX):]
    module, sep, qualname = spec.partition(":")
    if not sep or not module or not qualname:
        raise ValueError(f"policy {policy!r}: a Python policy is named py:module:Class")
    obj: Any = importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


def spec_name(policy: Any) -> str:
    """The ``py:module:Class`` name of a Python policy class (for sweep specs and cell ids)."""
    if isinstance(policy, str):
        return policy
    return f"{PREFIX}{policy.__module__}:{policy.__qualname__}"


def column_name(cls) -> str:
    """The ``policy`` column of a Python policy's rows: its ``name`` attribute, else its
    class name."""
    return str(getattr(cls, "name", None) or cls.__name__)
