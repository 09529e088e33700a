"""Sweeps on Ray: a grid of traces x policies x sizes x sieves (plus DEMOTE schemes and
warmup selectors), each cell one Ray task running the same Rust code as ``ember sim``.

A spec is TOML or JSON (or a dict)::

    traces   = ["msr/web_0.csv.gz", "msr/prxy_0.csv.gz"]   # relative to the spec's folder
    policies = ["lru", "arc", "s3fifo", "py:mypolicies:Lfu"]  # py:module:Class: in Python
    sizes    = ["1%", "5%", "10%"]
    sieves   = ["aod", "sievestore-c"]      # optional; aod (admit on demand) is plain `ember sim`
    schemes  = ["demote", "demote-adapt-exp"]  # optional DEMOTE schemes: `ember demote` cells
    selectors = ["last-k", "top-k"]        # optional warmup selectors: `ember warmup run` cells
    warmup_requests = 100000               # optional uncounted warm-up period of the sim,
    # warmup_time = "1h"                   #   sieve and DEMOTE cells (one of the two)
    out = "results"                        # optional; default sweep-<spec name>

    [options]        # trace and sim flags for every cell: block_size, format, per_request, ...
    [demote]         # flags of the demote cells: client_size, array_size, clients, ...
    [warmup]         # flags of the warmup cells: period, cache, warmup, ...

Results: ``results.parquet`` and ``results.csv`` (one row per sim or sieve cell with the
columns of ``ember sim --csv`` / ``ember sievestore``, one row per scheme or per warmup
(volume, period, scheme), each with ``cell``, ``kind``, ``trace``), ``failures.csv`` (cells
whose run raised, with ember's message) and ``hit_ratio_<trace>.png`` per trace. Each finished
cell is also kept in ``cells/<id>.parquet``: a second run skips those (resume).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import pandas as pd

#: Traces up to this size are shipped through Ray's object store; larger ones are read by
#: the workers from their path, which every node must see (a shared file system).
SHIP_BELOW_BYTES = 16 << 20

#: The object store of a local Ray instance: small, the cells exchange only traces and rows.
LOCAL_OBJECT_STORE_BYTES = 128 << 20


class SpecError(ValueError):
    """A sweep spec that cannot be run (the message says which key and why)."""


def load_spec(spec) -> Tuple[Dict[str, Any], Path]:
    """The spec as a dict, and the folder its relative paths are relative to."""
    if isinstance(spec, dict):
        return dict(spec), Path.cwd()
    path = Path(spec)
    try:
        text = path.read_text()
    except OSError as e:
        raise SpecError(f"{path}: {e.strerror}") from e
    if path.suffix.lower() == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise SpecError(f"{path}:{e.lineno}: {e.msg}") from e
    else:
        try:
            import tomllib  # Python 3.11+
        except ModuleNotFoundError:  # pragma: no cover - Python 3.9/3.10
            import tomli as tomllib  # type: ignore[no-redef]
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as e:
            raise SpecError(f"{path}: {e}") from e
    if not isinstance(data, dict):
        raise SpecError(f"{path}: the spec must be a table / object")
    return data, path.resolve().parent


def _list(spec: Dict[str, Any], key: str, default: Optional[List[str]] = None) -> List[str]:
    v = spec.get(key, default if default is not None else [])
    if isinstance(v, str):
        v = [v]
    if not isinstance(v, list) or not all(isinstance(x, (str, int, float)) for x in v):
        raise SpecError(f"`{key}` must be a list of strings")
    return [str(x) for x in v]


def _table(spec: Dict[str, Any], key: str) -> Dict[str, Any]:
    v = spec.get(key, {})
    if not isinstance(v, dict):
        raise SpecError(f"`[{key}]` must be a table of flags")
    return v


KNOWN_KEYS = {"traces", "policies", "sizes", "sieves", "schemes", "selectors", "out",
              "options", "demote", "warmup", "ship_below_bytes", "warmup_requests",
              "warmup_time"}


def _uncounted(spec: Dict[str, Any]) -> Dict[str, Any]:
    """The uncounted warm-up period of the sim, sieve and DEMOTE cells (`warmup_requests`
    or `warmup_time`): flags of those commands. Not the `[warmup]` table, which holds the
    flags of Bonfire's cache-warmup cells."""
    out = {}
    for key in ("warmup_requests", "warmup_time"):
        if key in spec:
            v = spec[key]
            if not isinstance(v, (str, int)) or isinstance(v, bool):
                raise SpecError(f"`{key}` must be a number of requests or a span such as \"1h\"")
            out[key] = v
    if len(out) > 1:
        raise SpecError("give `warmup_requests` or `warmup_time`, not both")
    return out


def _plugin_names(spec: Dict[str, Any]) -> Dict[str, Any]:
    """The spec with policy classes (written in Python, :mod:`emberlab.plugin`) given as
    their ``py:module:Class`` names, which the workers import."""
    from .plugin import spec_name

    pols = spec.get("policies")
    if isinstance(pols, list) and any(isinstance(p, type) for p in pols):
        spec = dict(spec, policies=[spec_name(p) if isinstance(p, type) else p for p in pols])
    return spec


def cells(spec: Dict[str, Any], base: Path) -> List[Dict[str, Any]]:
    """Every cell of the grid, in a stable order, each with its ``cell`` id."""
    unknown = sorted(set(spec) - KNOWN_KEYS)
    if unknown:
        raise SpecError(f"unknown key(s) {unknown} (known: {sorted(KNOWN_KEYS)})")
    traces = _list(spec, "traces")
    if not traces:
        raise SpecError("`traces` must name at least one trace")
    policies = _list(_plugin_names(spec), "policies", ["lru"])
    sizes = _list(spec, "sizes", ["1%", "10%"])
    sieves = _list(spec, "sieves", ["aod"])
    schemes = _list(spec, "schemes")
    selectors = _list(spec, "selectors")
    options = _table(spec, "options")
    counted = {**options, **_uncounted(spec)}
    out: List[Dict[str, Any]] = []
    for t in traces:
        path = str((base / t).resolve()) if not os.path.isabs(t) else t
        for sieve in sieves:
            for p in policies:
                for s in sizes:
                    kind = "sim" if sieve == "aod" else "sievestore"
                    out.append(dict(kind=kind, trace=path, policy=p, size=s, sieve=sieve,
                                    options=counted))
        for scheme in schemes:
            out.append(dict(kind="demote", trace=path, scheme=scheme,
                            options={**counted, **_table(spec, "demote")}))
        for sel in selectors:
            out.append(dict(kind="warmup", trace=path, selector=sel,
                            options={**options, **_table(spec, "warmup")}))
    for c in out:
        key = json.dumps(c, sort_keys=True)
        c["cell"] = hashlib.sha256(key.encode()).hexdigest()[:16]
    return out


def run_cell(cell: Dict[str, Any], trace_path: str) -> List[Dict[str, Any]]:
    """Run one cell in this process and return its rows (raises EmberError on failure)."""
    import emberlab as em

    opts = dict(cell["options"])
    kind = cell["kind"]
    if kind == "sim":
        df = em.sim(trace_path, policy=cell["policy"], size=cell["size"], threads=1, **opts)
    elif kind == "sievestore":
        df = em.sievestore(trace_path, policy=cell["policy"], size=cell["size"],
                           admission=cell["sieve"], threads=1, **opts)
    elif kind == "demote":
        df = em.demote(trace_path, scheme=cell["scheme"], threads=1, **opts)
        want = cell["scheme"].replace("-", "").replace("_", "").lower()
        df = df[df["scheme"].str.lower() == want]
    elif kind == "warmup":
        df = em.warmup(trace_path, schemes=cell["selector"], **opts)
    else:
        raise ValueError(f"unknown cell kind {kind!r}")
    rows = df.to_dict("records")
    for r in rows:
        r.update(cell=cell["cell"], kind=kind, trace=cell["trace"])
        for k in ("sieve", "scheme", "selector"):
            if k in cell:
                r[f"cell_{k}"] = cell[k]
    return rows


def _remote_body(cell: Dict[str, Any], shipped) -> Dict[str, Any]:
    """What a Ray task does: run the cell (from the shipped bytes or the shared path) and
    report rows or the error, so one failing cell never fails the sweep."""
    import socket

    host = socket.gethostname()
    local = cell["trace"]
    try:
        if shipped is None:
            rows = run_cell(cell, local)
        else:
            name = os.path.basename(cell["trace"])
            with tempfile.TemporaryDirectory(prefix="emberlab-") as d:
                local = os.path.join(d, name)
                with open(local, "wb") as f:
                    f.write(shipped)
                rows = run_cell(cell, local)
        return {"cell": cell["cell"], "ok": True, "rows": rows, "node": host, "pid": os.getpid()}
    except Exception as e:  # noqa: BLE001 - every failure is reported per cell
        # Name the trace as the spec did, not the worker's copy of a shipped one.
        msg = f"{type(e).__name__}: {e}".replace(local, cell["trace"])
        return {"cell": cell["cell"], "ok": False, "error": msg, "node": host,
                "pid": os.getpid()}


def _init_ray(address: Optional[str], num_cpus: Optional[int]):
    host = ""
    if address and address != "auto":
        host = address.rsplit(":", 1)[0].removeprefix("ray://")
    if host in ("127.0.0.1", "localhost") or not address:
        # A cluster on this machine's loopback interface (or a local instance): Ray would
        # otherwise resolve 127.0.0.1 to the machine's outward address. Read when ray is
        # first imported.
        os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    import ray

    if ray.is_initialized():
        return ray
    if address:
        kw = {}
        if host in ("127.0.0.1", "localhost"):
            # A cluster on this machine's loopback interface: the driver joins it there.
            kw["_node_ip_address"] = "127.0.0.1"
        ray.init(address=address, logging_level="WARNING", log_to_driver=False, **kw)
    else:
        # A local instance stays on the loopback interface.
        ray.init(num_cpus=num_cpus or os.cpu_count() or 1,
                 object_store_memory=LOCAL_OBJECT_STORE_BYTES, include_dashboard=False,
                 logging_level="WARNING", log_to_driver=False, _node_ip_address="127.0.0.1")
    return ray


def _write_atomic_parquet(df: pd.DataFrame, path: Path) -> None:
    tmp = path.with_suffix(".tmp")
    df.to_parquet(tmp, index=False)
    os.replace(tmp, path)


def _plots(results: pd.DataFrame, out: Path) -> List[Path]:
    """Hit ratio against cache size (% of WSS), one PNG per trace, one line per
    policy (+ sieve)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    made = []
    if "hit_ratio" not in results or "percent_wss" not in results:
        return made
    grid = results[results["kind"] == "sim"]
    for trace, g in grid.groupby("trace"):
        fig, ax = plt.subplots(figsize=(8, 5))
        for (pol, adm), line in g.groupby(["policy", "admission"]):
            line = line.sort_values("percent_wss")
            label = pol if adm == "aod" else f"{pol}+{adm}"
            ax.plot(line["percent_wss"], line["hit_ratio"], marker="o", label=label)
        ax.set_xscale("log")
        ax.set_xlabel("cache size (% of working set)")
        ax.set_ylabel("hit ratio")
        ax.set_title(os.path.basename(trace))
        ax.grid(True, alpha=0.3)
        ax.legend()
        safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in os.path.basename(trace))
        p = out / f"hit_ratio_{safe}.png"
        fig.savefig(p, dpi=100, bbox_inches="tight")
        plt.close(fig)
        made.append(p)
    return made


def sweep(
    spec,
    out=None,
    ray_address: Optional[str] = None,
    num_cpus: Optional[int] = None,
    resume: bool = True,
    progress: bool = True,
    max_retries: int = 3,
) -> pd.DataFrame:
    """Run every cell of ``spec`` on Ray and return all rows (``df.attrs["failures"]``: the
    cells that raised, with their error; ``df.attrs["out"]``: the results folder).

    ``ray_address``: an existing cluster; default a local Ray instance with ``num_cpus``.
    ``resume``: skip cells whose ``cells/<id>.parquet`` exists. A task lost with its node
    (worker killed, node gone) is retried by Ray up to ``max_retries`` times.
    """
    data, base = load_spec(spec)
    grid = cells(data, base)
    if out is None:
        o = data.get("out")
        if o is not None:
            out = base / str(o)
        elif isinstance(spec, (str, os.PathLike)):
            out = base / f"sweep-{Path(spec).stem}"
        else:
            out = Path.cwd() / "sweep-results"
    out = Path(out)
    cell_dir = out / "cells"
    cell_dir.mkdir(parents=True, exist_ok=True)
    done = {p.stem for p in cell_dir.glob("*.parquet")} if resume else set()
    todo = [c for c in grid if c["cell"] not in done]
    ship_below = int(data.get("ship_below_bytes", SHIP_BELOW_BYTES))
    failures: List[Dict[str, Any]] = []
    started = time.time()
    if todo:
        ray = _init_ray(ray_address, num_cpus)
        task = ray.remote(num_cpus=1, max_retries=max_retries, retry_exceptions=False)(_remote_body)
        shipped: Dict[str, Any] = {}
        for c in todo:
            t = c["trace"]
            if t not in shipped:
                try:
                    small = os.path.getsize(t) < ship_below
                except OSError:
                    small = False  # the workers report the error with the cell
                shipped[t] = ray.put(Path(t).read_bytes()) if small else None
        pending = {task.remote(c, shipped[c["trace"]]): c for c in todo}
        bar = None
        if progress:
            from tqdm import tqdm

            bar = tqdm(total=len(grid), initial=len(grid) - len(todo), unit="cell",
                       desc="ember sweep", file=sys.stderr)
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=5.0)
            for ref in ready:
                cell = pending.pop(ref)
                try:
                    res = ray.get(ref)
                except Exception as e:  # noqa: BLE001 - lost beyond retries
                    res = {"cell": cell["cell"], "ok": False,
                           "error": f"{type(e).__name__}: {e}", "node": None}
                if res["ok"]:
                    _write_atomic_parquet(pd.DataFrame(res["rows"]),
                                          cell_dir / f"{cell['cell']}.parquet")
                else:
                    failures.append({**{k: v for k, v in cell.items() if k != "options"},
                                     "error": res["error"]})
                if bar is not None:
                    bar.update(1)
                    if failures:
                        bar.set_postfix(failed=len(failures))
        if bar is not None:
            bar.close()
    wanted = {c["cell"] for c in grid}
    parts = [pd.read_parquet(p) for p in sorted(cell_dir.glob("*.parquet")) if p.stem in wanted]
    results = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()
    order = {c["cell"]: i for i, c in enumerate(grid)}
    if len(results):
        results = results.sort_values("cell", key=lambda s: s.map(order), kind="stable")
        results = results.reset_index(drop=True)
    results.to_parquet(out / "results.parquet", index=False)
    results.to_csv(out / "results.csv", index=False)
    fail_df = pd.DataFrame(failures, columns=["cell", "kind", "trace", "policy", "size", "sieve",
                                              "scheme", "selector", "error"])
    fail_df.to_csv(out / "failures.csv", index=False)
    _plots(results, out)
    if progress:
        print(f"ember sweep: {len(grid)} cells ({len(grid) - len(todo)} already done), "
              f"{len(failures)} failed, {time.time() - started:.1f} s; results in {out}",
              file=sys.stderr)
        for f in failures:
            print(f"ember sweep: cell {f['cell']} ({f['kind']} {os.path.basename(f['trace'])} "
                  f"{f.get('policy') or ''} {f.get('size') or ''}) failed: {f['error']}",
                  file=sys.stderr)
    results.attrs["failures"] = fail_df
    results.attrs["out"] = str(out)
    return results


def main(argv: Optional[List[str]] = None) -> int:
    """``python -m emberlab sweep SPEC``: what ``ember sweep`` runs."""
    ap = argparse.ArgumentParser(prog="ember sweep", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("spec")
    ap.add_argument("--out")
    ap.add_argument("--ray-address")
    ap.add_argument("--num-cpus", type=int)
    ap.add_argument("--no-resume", action="store_true")
    ap.add_argument("--quiet", "-q", action="store_true")
    a = ap.parse_args(argv)
    try:
        res = sweep(a.spec, out=a.out, ray_address=a.ray_address, num_cpus=a.num_cpus,
                    resume=not a.no_resume, progress=not a.quiet)
    except SpecError as e:
        print(f"ember sweep: error: {e}", file=sys.stderr)
        return 2
    return 1 if len(res.attrs["failures"]) else 0
