"""Sweeps on a real Ray cluster on this machine: a head node and a second node (two raylets
registered with one GCS) started by the test with Ray's own `ray.cluster_utils.Cluster`.

* the sweep's rows equal the same cells run by `ember sim` in one process, exactly;
* the second node killed mid-sweep (SIGKILL of its raylet and workers): the sweep still
  completes every cell (Ray retries the lost tasks on the head);
* a failing cell is reported with ember's message and the others are kept;
* a second run resumes: finished cells are not run again.

Footprint: 1 CPU per node, 80 MiB object stores, no dashboard.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from cli_helpers import run

# Ray resolves 127.0.0.1 to the machine's outward address unless told that this is a
# single-machine cluster; the test cluster (and the drivers it starts, which inherit the
# environment) stays on the loopback interface.
os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"

import ray  # noqa: E402  (installed by `make setup`)
from ray.cluster_utils import Cluster  # noqa: E402

# Loopback only: every Ray process of the test binds and talks on 127.0.0.1.
NODE = dict(num_cpus=1, object_store_memory=80 << 20, include_dashboard=False,
            node_ip_address="127.0.0.1")
POLICIES = ["lru", "fifo", "arc", "s3fifo"]
SIZES = ["1%", "5%", "10%"]


def test_ray_is_installed():
    assert ray.__version__


@pytest.fixture(scope="module")
def cluster():
    c = Cluster(initialize_head=True, head_node_args=dict(NODE))
    worker = c.add_node(**NODE)
    c.wait_for_nodes()
    yield c, worker
    ray.shutdown()  # a driver of this process (test_python_sweep_twice_resumes)
    c.shutdown()


@pytest.fixture(scope="module")
def sweep_traces(ember: Path, tmp_path_factory) -> list[Path]:
    d = tmp_path_factory.mktemp("sweep-traces")
    out = []
    for seed in (1, 2):
        p = d / f"z{seed}.oracleGeneral.bin"
        run(ember, "trace", "gen", "zipf", "--alpha", "0.8", "--blocks", "20000", "--requests",
            "400000", "--seed", str(seed), "-o", p)
        out.append(p)
    return out


def driver(spec: Path, address: str, out: Path, *extra: str) -> subprocess.Popen:
    """`ember sweep`'s driver in its own process, connected to the cluster."""
    return subprocess.Popen(
        [sys.executable, "-m", "emberlab", "sweep", str(spec), "--ray-address", address,
         "--out", str(out), *extra],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def ember_sim_rows(ember: Path, trace: Path, tmp: Path) -> pd.DataFrame:
    csv = tmp / f"{trace.name}.sim.csv"
    run(ember, "sim", trace, "--policy", ",".join(POLICIES), "--size", ",".join(SIZES),
        "--csv", csv, "-q", "--threads", "1")
    return pd.read_csv(csv, dtype={"size": str, "policy": str, "admission": str})


def test_sweep_equals_ember_sim_and_survives_a_killed_node(cluster, ember, sweep_traces,
                                                            tmp_path):
    c, worker = cluster
    spec = tmp_path / "spec.toml"
    spec.write_text(
        f"traces = {json.dumps([str(t) for t in sweep_traces])}\n"
        f"policies = {json.dumps(POLICIES)}\nsizes = {json.dumps(SIZES)}\n"
        # Shipped through the object store: the traces are small.
        "ship_below_bytes = 100000000\n"
    )
    out = tmp_path / "out"
    proc = driver(spec, c.address, out, "--quiet")
    cells = out / "cells"
    # Kill the second node once a few cells are done and others are running on both nodes.
    deadline = time.time() + 300
    while time.time() < deadline and len(list(cells.glob("*.parquet"))) < 3:
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.2)
    done_before_kill = len(list(cells.glob("*.parquet")))
    assert done_before_kill < 24, "the sweep finished before the node could be killed"
    c.remove_node(worker, allow_graceful=False)
    stdout, stderr = proc.communicate(timeout=600)
    assert proc.returncode == 0, stderr
    res = pd.read_parquet(out / "results.parquet")
    assert len(res) == 2 * len(POLICIES) * len(SIZES) == 24
    assert set(res["kind"]) == {"sim"}
    # Every row equals `ember sim` run in one process on the same trace, every column.
    for t in sweep_traces:
        ours = res[res["trace"] == str(t)][ember_sim_rows(ember, t, tmp_path).columns]
        ours = ours.reset_index(drop=True)
        pd.testing.assert_frame_equal(ours, ember_sim_rows(ember, t, tmp_path))
    assert (out / "results.csv").exists()
    assert len(pd.read_csv(out / "failures.csv")) == 0
    assert (out / f"hit_ratio_{sweep_traces[0].name}.png").stat().st_size > 5000
    # Resume: a second run finds every cell done and runs nothing.
    before = {p: p.stat().st_mtime_ns for p in cells.glob("*.parquet")}
    proc = driver(spec, c.address, out)
    _, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 0, stderr
    assert "24 cells (24 already done), 0 failed" in stderr, stderr
    assert {p: p.stat().st_mtime_ns for p in cells.glob("*.parquet")} == before


def test_a_failing_cell_is_reported_and_the_others_kept(cluster, ember, sweep_traces,
                                                        tmp_path):
    c, _ = cluster
    bad = tmp_path / "bad.csv"
    bad.write_text("128166372003061629,web,0,Read,3518828544,4096,2754\n"
                   "128166372003061631,web,0,Read,oops,4096,2754\n")
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({
        "traces": [str(sweep_traces[0]), str(bad)],
        "policies": ["lru"], "sizes": ["10%"],
        "options": {},
    }))
    out = tmp_path / "out"
    proc = driver(spec, c.address, out)
    _, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 1, stderr
    fails = pd.read_csv(out / "failures.csv")
    assert len(fails) == 1
    assert fails["trace"][0] == str(bad)
    assert f"{bad}:2" in fails["error"][0], fails["error"][0]
    assert f"{bad}:2" in stderr
    res = pd.read_parquet(out / "results.parquet")
    assert len(res) == 1 and res["trace"][0] == str(sweep_traces[0])
    assert res["hit_ratio"][0] > 0


def test_ember_sweep_cli_runs_the_driver(cluster, ember, sweep_traces, tmp_path):
    """`ember sweep` hands the spec to the same driver (here on the cluster), with the
    sieves and DEMOTE-scheme axes."""
    c, _ = cluster
    spec = tmp_path / "s.toml"
    spec.write_text(
        f'traces = ["{sweep_traces[0]}"]\npolicies = ["lru"]\nsizes = ["5%"]\n'
        'sieves = ["aod", "sievestore-c"]\nschemes = ["demote-adapt-exp"]\n'
        '[demote]\nclient_size = "1%"\narray_size = "1%"\n'
    )
    env = dict(os.environ, EMBER_PYTHON=sys.executable)
    p = subprocess.run([str(ember), "sweep", str(spec), "--ray-address", c.address, "-q"],
                       env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    res = pd.read_parquet(tmp_path / "sweep-s" / "results.parquet")
    assert sorted(res["kind"]) == ["demote", "sievestore", "sim"]
    d = res[res["kind"] == "demote"].iloc[0]
    assert d["scheme"] == "DemoteAdaptExp" and d["cell_scheme"] == "demote-adapt-exp"
    assert d["mean_speedup"] > 0
    sim = res[res["kind"] == "sim"].iloc[0]
    cli = ember_sim_rows(ember, sweep_traces[0], tmp_path)
    want = cli[(cli["policy"] == "lru") & (cli["size"] == "5%")].iloc[0]
    assert sim["hits"] == want["hits"] and sim["misses"] == want["misses"]


def test_bad_spec_is_a_clear_error(tmp_path):
    spec = tmp_path / "s.toml"
    spec.write_text('traces = ["x"]\npolicys = ["lru"]\n')
    p = subprocess.run([sys.executable, "-m", "emberlab", "sweep", str(spec)],
                       capture_output=True, text=True)
    assert p.returncode == 2
    assert "unknown key(s) ['policys']" in p.stderr, p.stderr


def test_python_sweep_twice_resumes(cluster, sweep_traces, tmp_path):
    """`emberlab.sweep` from Python, twice in one process: the second call resumes (and the
    function is still the function: importing the sweep driver must not shadow it)."""
    import emberlab as em

    c, _ = cluster
    spec = {"traces": [str(sweep_traces[1])], "policies": ["fifo"], "sizes": ["1%", "2%"]}
    try:
        first = em.sweep(spec, out=tmp_path / "o", ray_address=c.address, progress=False)
        assert len(first) == 2 and list(first["size"]) == ["1%", "2%"]
        again = em.sweep(spec, out=tmp_path / "o", ray_address=c.address, progress=False)
        pd.testing.assert_frame_equal(first, again)
    finally:
        ray.shutdown()


def test_sweep_runs_a_policy_written_in_python(cluster, sweep_traces, tmp_path):
    """A policy class in a sweep spec runs on the workers (by its `py:module:Class` name)
    and gives the rows of its native twin."""
    import emberlab as em
    from emberlab.plugin import Lru

    c, _ = cluster
    spec = {"traces": [str(sweep_traces[0])], "policies": [Lru, "lru"], "sizes": ["1%"]}
    try:
        res = em.sweep(spec, out=tmp_path / "o", ray_address=c.address, progress=False)
    finally:
        ray.shutdown()
    assert len(res.attrs["failures"]) == 0, res.attrs["failures"]
    assert list(res["policy"]) == ["py-lru", "lru"]
    assert res["hits"].iloc[0] == res["hits"].iloc[1] > 0


def test_a_warm_up_period_in_a_sweep_is_the_one_ember_sim_applies(cluster, ember, sweep_traces,
                                                                 tmp_path):
    """`warmup_requests` in a sweep spec reaches every cell on the workers with the meaning
    `ember sim --warmup-requests` gives it: the rows equal `ember sim`'s with the same flag,
    and they count fewer requests than the rows without it."""
    import emberlab as em

    c, _ = cluster
    trace = sweep_traces[0]
    spec = {"traces": [str(trace)], "policies": ["lru", "arc"], "sizes": ["5%"],
            "warmup_requests": 100000}
    try:
        res = em.sweep(spec, out=tmp_path / "o", ray_address=c.address, progress=False)
    finally:
        ray.shutdown()
    assert len(res.attrs["failures"]) == 0, res.attrs["failures"]
    csv = tmp_path / "warm.csv"
    run(ember, "sim", trace, "--policy", "lru,arc", "--size", "5%", "--warmup-requests",
        "100000", "--csv", csv, "-q", "--threads", "1")
    want = pd.read_csv(csv, dtype={"size": str, "policy": str, "admission": str})
    ours = res[want.columns].reset_index(drop=True)
    pd.testing.assert_frame_equal(ours, want)
    cold = ember_sim_rows(ember, trace, tmp_path)
    lru_cold = cold[(cold["policy"] == "lru") & (cold["size"] == "5%")].iloc[0]
    lru_warm = ours[ours["policy"] == "lru"].iloc[0]
    assert lru_warm["requests"] == lru_cold["requests"] - 100000
