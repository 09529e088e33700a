"""Exactness of ember's replacement policies against libCacheSim (the `libcachesim` pip
package, 0.3.5), count-based: every block one unit, capacity in blocks.

Both tools see the same key sequences: ember through the `replay_keys` example of
`ember-policy` (a file of little-endian u64 keys), libCacheSim through an oracleGeneral
binary trace ({u32 time, u64 obj_id, u32 obj_size = 1, i64 next_access_vtime}, next access
as the request index of the key's next occurrence, -1 for none).

Expected (see each policy's doc comment in crates/policy/src/replacement/):
  * LRU, FIFO, CLOCK, SIEVE, OPT (Belady): miss counts equal, every capacity.
  * ARC, 2Q (c >= 4), S3-FIFO (c >= 20): miss counts equal with libCacheSim's defaults.
  * SLRU: libCacheSim's has 4 segments and puts a new block into the lowest segment with
    room, so during warm-up never-hit blocks land in protected segments. ember's SLRU with
    that placement (`slru:4:lcs`, SlruInsert::LowestWithRoom) is equal for capacities that
    are multiples of 4. ember's default placement (the paper's: always probationary,
    `slru:4`) differs: by < 1 % of requests on Zipf-like and uniform sequences, and a lot on
    a loop larger than the cache next to a small hot set, where libCacheSim keeps part of the
    loop pinned in protected segments since warm-up (fewer misses for libCacheSim).

Run standalone (builds the example in release first):
    python3 tests/peer/test_policy_exactness.py            # prints the table, exits non-zero on a mismatch
    python3 -m pytest -q tests/peer/test_policy_exactness.py
    python3 tests/peer/test_policy_exactness.py --trace /path/to/x.oracleGeneral.bin  # extra real trace
"""

from __future__ import annotations

import argparse
import os
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
CAPACITIES = [20, 100, 400, 1000]

# (ember spec name, libcachesim constructor name, exact?)
POLICIES = [
    ("lru", "LRU", True),
    ("fifo", "FIFO", True),
    ("clock", "Clock", True),
    ("sieve", "Sieve", True),
    ("opt", "Belady", True),
    ("arc", "ARC", True),
    ("2q", "TwoQ", True),
    ("s3fifo", "S3FIFO", True),
    ("slru:4:lcs", "SLRU", True),
    ("slru:4", "SLRU", False),
]

# ember's paper SLRU vs libCacheSim's on sequences where placement during warm-up matters
# little (no loop larger than the cache): allowed difference, as a fraction of requests.
SLRU_TOLERANCE = 0.01
N_EXACT = sum(1 for p in POLICIES if p[2])


def sequences() -> dict[str, np.ndarray]:
    """Deterministic synthetic key sequences (keys start at 1)."""
    rng = np.random.default_rng(20240601)
    out = {}
    n_keys = 10_000
    ranks = np.arange(1, n_keys + 1, dtype=np.float64)
    p = ranks**-0.9
    p /= p.sum()
    out["zipf0.9"] = rng.choice(n_keys, size=200_000, p=p).astype(np.uint64) + 1
    out["uniform"] = rng.integers(1, 3_001, size=100_000, dtype=np.uint64)
    # A hot set interleaved with repeated scans of a loop larger than most caches.
    hot = rng.integers(1, 201, size=60_000, dtype=np.uint64)
    loop = np.tile(np.arange(1_000, 2_500, dtype=np.uint64), 40)[:60_000]
    mix = np.empty(120_000, dtype=np.uint64)
    mix[0::2] = hot
    mix[1::2] = loop
    out["hot+scan"] = mix
    # Phase change: two Zipf popularity orders over disjoint key ranges.
    a = rng.choice(n_keys, size=50_000, p=p).astype(np.uint64) + 1
    b = rng.choice(n_keys, size=50_000, p=p).astype(np.uint64) + 50_001
    out["phases"] = np.concatenate([a, b])
    return out


def next_access(keys: np.ndarray) -> np.ndarray:
    nxt = np.full(len(keys), -1, dtype=np.int64)
    last: dict[int, int] = {}
    for t in range(len(keys) - 1, -1, -1):
        k = int(keys[t])
        nxt[t] = last.get(k, -1)
        last[k] = t
    return nxt


def write_oracle_general(path: Path, keys: np.ndarray) -> None:
    rec = np.dtype([("t", "<u4"), ("id", "<u8"), ("size", "<u4"), ("next", "<i8")])
    arr = np.empty(len(keys), dtype=rec)
    arr["t"] = np.arange(len(keys), dtype=np.uint32)
    arr["id"] = keys
    arr["size"] = 1
    arr["next"] = next_access(keys)
    assert arr.itemsize == 24
    arr.tofile(path)


def read_oracle_general_keys(path: Path) -> np.ndarray:
    rec = np.dtype([("t", "<u4"), ("id", "<u8"), ("size", "<u4"), ("next", "<i8")])
    return np.fromfile(path, dtype=rec)["id"].astype(np.uint64)


def libcachesim_misses(trace: Path, policy: str, capacity: int, n: int) -> int:
    import libcachesim as lcs

    params = lcs.ReaderInitParam(ignore_obj_size=True)
    reader = lcs.TraceReader(str(trace), lcs.TraceType.ORACLE_GENERAL_TRACE, params)
    cache = getattr(lcs, policy)(capacity, hashpower=16)
    miss_ratio, _ = cache.process_trace(reader)
    return int(round(miss_ratio * n))


def build_example() -> Path:
    subprocess.run(
        ["cargo", "build", "--release", "-q", "-p", "ember-policy", "--example", "replay_keys"],
        cwd=ROOT,
        check=True,
    )
    target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    return target / "release" / "examples" / "replay_keys"


def ember_misses(exe: Path, keys_file: Path, specs: list[str]) -> dict[str, int]:
    out = subprocess.run([str(exe), str(keys_file), *specs], check=True, capture_output=True, text=True)
    result = {}
    for line in out.stdout.splitlines():
        spec, misses = line.split()
        result[spec] = int(misses)
    return result


def compare(exe: Path, name: str, keys: np.ndarray, workdir: Path, capacities=CAPACITIES):
    """Rows (sequence, policy, capacity, ember, libcachesim, exact_expected)."""
    keys_file = workdir / f"{name}.u64"
    trace = workdir / f"{name}.oracleGeneral.bin"
    keys.astype("<u8").tofile(keys_file)
    write_oracle_general(trace, keys)
    specs = [f"{e}@{c}" for e, _, _ in POLICIES for c in capacities]
    ours = ember_misses(exe, keys_file, specs)
    rows = []
    for e, l, exact in POLICIES:
        for c in capacities:
            theirs = libcachesim_misses(trace, l, c, len(keys))
            rows.append((name, e, c, ours[f"{e}@{c}"], theirs, exact))
    return rows


def compare_with_libcachesim(exe: Path, keys: np.ndarray, specs_by_lcs: dict) -> list[tuple]:
    """(ember spec, capacity, ember's misses, libCacheSim's) for every ember spec of
    `specs_by_lcs` (spec -> (libCacheSim class, capacities)) on `keys`."""
    rows = []
    with tempfile.TemporaryDirectory() as d:
        work = Path(d)
        keys_file = work / "k.u64"
        trace = work / "k.oracleGeneral.bin"
        keys.astype("<u8").tofile(keys_file)
        write_oracle_general(trace, keys)
        specs = [f"{e}@{c}" for e, (_, caps) in specs_by_lcs.items() for c in caps]
        ours = ember_misses(exe, keys_file, specs)
        for e, (lcs_name, caps) in specs_by_lcs.items():
            for c in caps:
                theirs = libcachesim_misses(trace, lcs_name, c, len(keys))
                rows.append((e, c, ours[f"{e}@{c}"], theirs))
    return rows


def assert_rows_equal(rows: list[tuple], label: str, n: int | None = None) -> None:
    """Every row's misses equal libCacheSim's; with `n` (the trace's length), also some but not
    all requests miss."""
    for e, c, ours, theirs in rows:
        assert ours == theirs, f"{label} {e}@{c}: ember {ours} != libCacheSim {theirs}"
        if n is not None:
            assert 0 < ours < n


def check_rows(rows, n_by_seq) -> list[str]:
    problems = []
    for seq, pol, c, ours, theirs, exact in rows:
        if exact and ours != theirs:
            problems.append(f"{seq} {pol}@{c}: ember {ours} != libCacheSim {theirs}")
        if not exact and seq != "hot+scan" and abs(ours - theirs) > SLRU_TOLERANCE * n_by_seq[seq]:
            problems.append(f"{seq} {pol}@{c}: ember {ours} vs libCacheSim {theirs} beyond tolerance")
        if not exact and seq == "hot+scan" and c >= 400 and ours <= theirs:
            problems.append(f"{seq} {pol}@{c}: expected libCacheSim's pinned loop to win, {ours} <= {theirs}")
    return problems


def run_all(extra_traces=()):
    exe = build_example()
    seqs = sequences()
    with tempfile.TemporaryDirectory() as d:
        work = Path(d)
        rows = []
        for name, keys in seqs.items():
            rows += compare(exe, name, keys, work)
        for t in extra_traces:
            keys = read_oracle_general_keys(Path(t))
            seqs[Path(t).name] = keys
            rows += compare(exe, Path(t).name, keys, work)
    return rows, {k: len(v) for k, v in seqs.items()}


_CACHE = {}


def _rows():
    if "rows" not in _CACHE:
        _CACHE["rows"] = run_all()
    return _CACHE["rows"]


def test_exact_policies_match_libcachesim():
    rows, n = _rows()
    exact_rows = [r for r in rows if r[5]]
    assert len(exact_rows) == N_EXACT * len(CAPACITIES) * len(n)
    assert check_rows(exact_rows, n) == []
    # The sequences exercise the caches: some hits and some evictions everywhere.
    for seq, pol, c, ours, theirs, _ in exact_rows:
        assert 0 < ours < n[seq], (seq, pol, c, ours)


def test_paper_slru_differs_only_as_documented():
    rows, n = _rows()
    slru = [r for r in rows if r[1] == "slru:4"]
    assert len(slru) == len(CAPACITIES) * len(n)
    assert check_rows(slru, n) == []


def test_always_exact_policies_at_small_and_odd_capacities():
    """LRU, FIFO, CLOCK, SIEVE, OPT and ARC have no capacity floor: equal down to one block."""
    exe = build_example()
    keys = sequences()["zipf0.9"][:30_000]
    saved = POLICIES[:]
    try:
        POLICIES[:] = [p for p in saved if p[0] in ("lru", "fifo", "clock", "sieve", "opt", "arc")]
        with tempfile.TemporaryDirectory() as d:
            rows = compare(exe, "small", keys, Path(d), [1, 2, 3, 7, 33, 333])
    finally:
        POLICIES[:] = saved
    assert len(rows) == 6 * 6
    assert check_rows(rows, {"small": len(keys)}) == []


def test_libcachesim_capacity_floors_documented_in_ember():
    """Where ember's doc comments say libCacheSim caches nothing (2Q below 4 blocks, S3-FIFO
    below 20, SLRU below its 4 segments), libCacheSim misses every request and ember does not."""
    exe = build_example()
    keys = sequences()["zipf0.9"][:20_000]
    with tempfile.TemporaryDirectory() as d:
        work = Path(d)
        keys_file = work / "k.u64"
        trace = work / "k.oracleGeneral.bin"
        keys.astype("<u8").tofile(keys_file)
        write_oracle_general(trace, keys)
        for ember, lcs_name, c in [("2q", "TwoQ", 3), ("s3fifo", "S3FIFO", 19), ("slru:4:lcs", "SLRU", 3)]:
            assert libcachesim_misses(trace, lcs_name, c, len(keys)) == len(keys)
            ours = ember_misses(exe, keys_file, [f"{ember}@{c}"])[f"{ember}@{c}"]
            assert ours < len(keys), (ember, c, ours)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trace", action="append", default=[], help="extra oracleGeneral trace (obj ids as keys)")
    args = ap.parse_args()
    rows, n = run_all(args.trace)
    print(f"{'sequence':<28} {'policy':<8} {'cap':>5} {'ember':>8} {'libCacheSim':>11} {'diff':>6}")
    for seq, pol, c, ours, theirs, exact in rows:
        mark = "" if ours == theirs else ("  (documented: SLRU placement)" if not exact else "  MISMATCH")
        print(f"{seq:<28} {pol:<8} {c:>5} {ours:>8} {theirs:>11} {ours - theirs:>6}{mark}")
    problems = check_rows(rows, n)
    for p in problems:
        print("FAIL:", p, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
