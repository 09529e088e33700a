"""Per-cell overhead of emberlab.sweep on a local Ray instance: a tiny trace (2,000
requests), 100 cells, swept twice on one instance (cold, then warm workers).

Usage: .venv/bin/python crates/py/examples/sweep_overhead.py target/release/ember
"""
import json, os, subprocess, sys, tempfile, time
from pathlib import Path
os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
ember = sys.argv[1]
d = Path(tempfile.mkdtemp())
t = d / "tiny.oracleGeneral.bin"
subprocess.run([ember, "trace", "gen", "zipf", "--blocks", "1000", "--requests", "2000", "-o", str(t)], check=True, capture_output=True)
import ray
t0 = time.time()
ray.init(num_cpus=2, object_store_memory=128 << 20, include_dashboard=False, logging_level="WARNING", log_to_driver=False, _node_ip_address="127.0.0.1")
t_start = time.time() - t0
import emberlab as em
spec = {"traces": [str(t)], "policies": ["lru", "fifo", "arc", "clock"], "sizes": [f"{p}%" for p in range(1, 26)]}
for rep in range(2):
    out = d / f"out{rep}"
    t1 = time.time()
    df = em.sweep(spec, out=out, progress=False)
    dt = time.time() - t1
    print(f"ray start {t_start:.2f} s; sweep of {len(df)} cells of a 2000-request trace on 2 CPUs: {dt:.2f} s = {2 * dt / len(df) * 1000:.0f} ms of CPU-slot per cell")
