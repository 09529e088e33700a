"""emberlab: ember's laboratory in Python.

Block traces as pandas DataFrames (and Arrow tables), ember's simulations returning
DataFrames with the same columns as the ``ember`` command's CSV / JSON, and sweeps on Ray.

Every experiment function takes the trace path and the same options as its ``ember``
subcommand, as keyword arguments: ``block_size=512`` is ``--block-size 512``, a list is a
comma-separated value, ``True`` is a bare flag. The work runs in Rust with the GIL released;
errors raise :class:`EmberError` with ember's message (``file:line`` for a bad trace record).

>>> import emberlab as em
>>> df = em.sim("trace.csv", policy=["lru", "arc"], size=["1%", "10%"])
>>> df[["policy", "size", "hit_ratio"]]
"""

from __future__ import annotations

import io
import json
import os
from typing import Any, Dict, List, Optional, Sequence, Union

import numpy as np
import pandas as pd

from . import _native
from ._native import EmberError

__all__ = [
    "EmberError",
    "read_trace",
    "read_trace_arrow",
    "write_trace",
    "sim",
    "sim_timeline",
    "analyze",
    "warmup",
    "demote",
    "hierarchy",
    "sievestore",
    "sweep",
    "argv",
    "__version__",
]

__version__: str = _native.__version__

PathLike = Union[str, "os.PathLike[str]"]

#: The columns of :func:`read_trace`, in order.
TRACE_COLUMNS = ["time_ns", "volume", "op", "offset", "length"]


def argv(trace: Optional[PathLike], options: Dict[str, Any]) -> List[str]:
    """The ``ember`` command-line arguments for ``trace`` and keyword ``options``.

    ``None`` and ``False`` leave a flag out, ``True`` gives a bare flag, a list or tuple is
    joined with commas, anything else is ``str()``-ed. Underscores become dashes.
    """
    out: List[str] = [] if trace is None else [os.fspath(trace)]
    for key, value in options.items():
        if value is None or value is False:
            continue
        flag = "--" + key.replace("_", "-")
        if value is True:
            out.append(flag)
        elif isinstance(value, (list, tuple)):
            out += [flag, ",".join(str(v) for v in value)]
        else:
            out += [flag, str(value)]
    return out


def _csv_frame(text: str) -> pd.DataFrame:
    # keep_default_na: a size such as "1%" or a policy name is never NaN; dtype of `size`
    # stays str (it is the size as given: "1000", "1%", "64MiB").
    return pd.read_csv(io.StringIO(text), dtype={"size": str, "policy": str, "admission": str})


def read_trace(path: PathLike, **options: Any) -> pd.DataFrame:
    """Read any trace ember reads into a DataFrame, one row per request.

    Columns: ``time_ns`` (uint64), ``volume`` (categorical of volume names), ``op``
    (categorical ``read``/``write``), ``offset`` (uint64, bytes), ``length`` (uint32, bytes).
    ``options`` are the trace flags of ``ember trace info`` (``format="msr"``,
    ``skip_bad=True``, ``csv_offset_col=5``, ...). ``df.attrs["skipped"]`` counts the records
    skipped under ``skip_bad``.
    """
    cols = _native.read_trace(argv(path, options))
    codes = np.frombuffer(cols["volume"], dtype="<u4").astype(np.int32)
    names = list(cols["volumes"]) or ["0"]
    df = pd.DataFrame(
        {
            "time_ns": np.frombuffer(cols["time_ns"], dtype="<u8"),
            "volume": pd.Categorical.from_codes(codes, categories=names),
            "op": pd.Categorical.from_codes(
                np.frombuffer(cols["op"], dtype="u1").astype(np.int8), categories=["read", "write"]
            ),
            "offset": np.frombuffer(cols["offset"], dtype="<u8"),
            "length": np.frombuffer(cols["length"], dtype="<u4"),
        }
    )
    df.attrs["skipped"] = int(cols["skipped"])
    return df


def read_trace_arrow(path: PathLike, **options: Any):
    """:func:`read_trace` as a ``pyarrow.Table`` (volume and op dictionary-encoded)."""
    import pyarrow as pa

    return pa.Table.from_pandas(read_trace(path, **options), preserve_index=False)


def write_trace(
    data, path: PathLike, format: Optional[str] = None, block_size: int = 4096
) -> None:
    """Write a DataFrame or Arrow table with :func:`read_trace`'s columns as a trace file.

    ``format``: msr, spc, csv, oracle-general or ember (default: from the file name, as
    ``ember trace convert`` picks it). ``volume`` may be categorical, strings or integers;
    ``op`` ``read``/``write`` (or ``r``/``w``, 0/1). ``.gz``/``.zst`` compress.
    """
    if not isinstance(data, pd.DataFrame):
        data = data.to_pandas()
    missing = [c for c in TRACE_COLUMNS if c not in data.columns]
    if missing:
        raise EmberError(f"write_trace: missing columns {missing} (need {TRACE_COLUMNS})")
    n = len(data)
    vol = data["volume"]
    if isinstance(vol.dtype, pd.CategoricalDtype):
        names = [str(c) for c in vol.cat.categories]
        codes = vol.cat.codes.to_numpy()
    else:
        uniq, codes = np.unique(vol.astype(str).to_numpy(), return_inverse=True)
        names = [str(u) for u in uniq]
    if (codes < 0).any():
        raise EmberError("write_trace: missing volume values")
    op = data["op"]
    if op.dtype.kind in "iub":
        op_codes = op.to_numpy()
    else:
        lower = op.astype(str).str.lower()
        op_codes = np.where(lower.isin(["w", "write"]), 1, 0)
        bad = ~lower.isin(["r", "read", "w", "write"])
        if bad.any():
            raise EmberError(f"write_trace: op {lower[bad].iloc[0]!r} is neither read nor write")

    def buf(col, dtype):
        a = np.asarray(col)
        if a.dtype.kind == "f" or (a.dtype.kind == "i" and (a < 0).any()):
            raise EmberError(f"write_trace: column of {a.dtype} with negative or fractional values")
        return np.ascontiguousarray(a.astype(dtype)).tobytes()

    _native.write_trace(
        os.fspath(path),
        format,
        int(block_size),
        n,
        buf(data["time_ns"], "<u8"),
        buf(codes, "<u4"),
        buf(op_codes, "u1"),
        buf(data["offset"], "<u8"),
        buf(data["length"], "<u4"),
        names,
    )


def _quiet(options: Dict[str, Any]) -> Dict[str, Any]:
    out = dict(options)
    out.setdefault("quiet", True)
    return out


def sim(
    trace: PathLike,
    policy: Any = "lru",
    size: Union[str, Sequence[str]] = ("1%", "10%"),
    **options: Any,
) -> pd.DataFrame:
    """``ember sim``: every policy at every size; one row per run, the columns of
    ``ember sim --csv`` (policy, admission, size, capacity_blocks, ..., hit_ratio, ...).

    ``policy``: names (``"lru"``, ``"arc"``, ``"lruk:k=3"``) and policies written in Python
    (a class, or ``"py:module:Class"``; see :mod:`emberlab.plugin`), alone or in a list; the
    rows follow the list's order. ``options``: the flags of ``ember sim``
    (``interval="1h"``, ``per_request=True``, ``threads=2``, ``block_size=512``,
    ``format="oracle-general"``, ...). With ``interval``, ``df.attrs["timeline"]`` holds the
    timeline as a DataFrame (see :func:`sim_timeline`).
    """
    from . import plugin

    policies = list(policy) if isinstance(policy, (list, tuple)) else [policy]
    if not any(plugin.is_plugin(p) for p in policies):
        return _sim_frames(_native.sim(argv(trace, _quiet(dict(options, policy=policies,
                                                                    size=size)))))
    # Consecutive names run as one `ember sim` grid; each Python policy runs on its own.
    parts = []
    i = 0
    while i < len(policies):
        if plugin.is_plugin(policies[i]):
            cls = plugin.resolve(policies[i])
            args = argv(trace, _quiet(dict(options, size=size)))
            parts.append(_sim_frames(_native.sim_plugin(args, cls, plugin.column_name(cls))))
            i += 1
            continue
        j = i
        while j < len(policies) and not plugin.is_plugin(policies[j]):
            j += 1
        parts.append(_sim_frames(_native.sim(argv(trace, _quiet(dict(
            options, policy=policies[i:j], size=size))))))
        i = j
    df = pd.concat(parts, ignore_index=True)
    timelines = [p.attrs["timeline"] for p in parts if "timeline" in p.attrs]
    if timelines:
        df.attrs["timeline"] = pd.concat(timelines, ignore_index=True)
    return df


def _sim_frames(out) -> pd.DataFrame:
    csv, timeline = out
    df = _csv_frame(csv)
    if timeline is not None:
        df.attrs["timeline"] = _csv_frame(timeline)
    return df


def sim_timeline(trace: PathLike, interval: str, **options: Any) -> pd.DataFrame:
    """``ember sim --interval``: one row per (run, interval), the columns of the timeline CSV."""
    return sim(trace, interval=interval, **options).attrs["timeline"]


def _volume_rows(report: Dict[str, Any], part: str) -> pd.DataFrame:
    rows = [dict(volume=v["name"], **v["analysis"][part]) for v in report["volumes"]]
    if len(report["volumes"]) != 1:
        rows.append(dict(volume="(all)", **report["whole"][part]))
    return pd.json_normalize(rows)


def analyze(trace: PathLike, **options: Any) -> pd.DataFrame:
    """``ember analyze``: one row per volume (and ``(all)`` for the whole trace when it has
    several), the ``summary`` fields of ``ember analyze --json`` (Bonfire Table 1: WSS, size,
    requests, reaccesses, ...). The whole JSON document is ``df.attrs["report"]``.

    ``options``: ``region_size="64KiB"``, ``shards=0.01``, ``no_exact=True``, ...
    """
    report = json.loads(_native.analyze(argv(trace, _quiet(options))))
    df = _volume_rows(report, "summary")
    df.attrs["report"] = report
    return df


def warmup(trace: PathLike, **options: Any) -> pd.DataFrame:
    """``ember warmup run``: one row per (volume, period, scheme) with Bonfire's metrics
    (convergence time, load reduction, pre-load time, improvements), as in
    ``ember warmup run --json``'s ``metrics``. The whole document is ``df.attrs["report"]``.

    ``options``: ``period="1d"``, ``cache=50``, ``warmup=10``, ``schemes=["last-k"]``, ...
    """
    report = json.loads(_native.warmup(argv(trace, _quiet(options))))
    rows = []
    for p in report["periods"]:
        runs = p["runs"]
        for m in p["metrics"]:
            rows.append(dict(volume=runs["volume"], period=runs["day"], **m))
    df = pd.json_normalize(rows)
    df.attrs["report"] = report
    return df


def demote(trace: PathLike, **options: Any) -> pd.DataFrame:
    """``ember demote`` (Wong & Wilkes' client/array hierarchy): one row per scheme, the
    fields of ``ember demote --json``'s ``schemes`` with the nested results flattened
    (``result.*`` columns). ``experiment=True`` also runs the array-size sweep
    (``df.attrs["sweep"]``). The whole document is ``df.attrs["report"]``.
    """
    report = json.loads(_native.demote(argv(trace, _quiet(options))))
    df = pd.json_normalize(report["schemes"], sep=".")
    df.attrs["report"] = report
    df.attrs["sweep"] = pd.json_normalize(report.get("sweep", []), sep=".")
    return df


#: Python's name for :func:`demote`, after the experiment (Wong & Wilkes' hierarchy).
hierarchy = demote


def sievestore(trace: PathLike, **options: Any) -> pd.DataFrame:
    """``ember sievestore``: without ``experiment``, one row per (policy, sieve, size) with the
    totals of ``sievestore_runs.json`` (``total.*`` columns) and the drives needed for 100 %,
    99.9 % and 90 % of the minutes; with ``experiment=True``, one row per configuration of
    the paper's comparison (``sievestore.json``'s ``rows``). The whole document is
    ``df.attrs["report"]``.
    """
    kind, text = _native.sievestore(argv(trace, _quiet(options)))
    report = json.loads(text)
    if kind == "runs":
        rows = []
        for r in report:
            row = {k: v for k, v in r.items() if k not in ("run", "drives")}
            row["drives_100"], row["drives_99_9"], row["drives_90"] = r["drives"]
            row["sieve_memory_bytes"] = r["run"]["sieve_memory_bytes"]
            row["total"] = r["total"]
            rows.append(row)
        df = pd.json_normalize(rows, sep=".")
    else:
        df = pd.json_normalize(
            [{k: v for k, v in r.items() if not isinstance(v, list)} for r in report["rows"]],
            sep=".",
        )
    df.attrs["report"] = report
    return df


def sweep(spec, out: Optional[PathLike] = None, **options: Any) -> pd.DataFrame:
    """Run a sweep spec (a path to TOML/JSON, or a dict) on Ray; see
    :mod:`emberlab.ray_sweep` (a module name other than ``sweep``: importing a submodule
    sets the package attribute of its name, which would shadow this function)."""
    from .ray_sweep import sweep as _sweep

    return _sweep(spec, out=out, **options)
