#!/usr/bin/python3
"""Soak of `ember serve`: many verifying clients, a failing and delaying backing, abrupt
client disconnects, and a SIGKILL + restart of the server every few minutes.

Layout of one run (every process is started by this script and stopped by its pid):

* one `ember serve` per write policy (default: write-back-persist and write-through), each
  with its own cache file and two volumes:
  - `nbd`: nbdkit's file plugin behind its `error` filter (EIO at --error-rate on reads,
    writes, trims and zeroes) and its `delay` filter (--delay on every request), reached over
    a Unix socket as `--backing nbd=nbd+unix:///?socket=…`;
  - `file`: a plain backing file, no faults.
* `--clients` client processes (python3-libnbd), spread over the four exports; each owns a
  disjoint region of its export and runs one request at a time: reads (verified), writes
  (some with FUA), FLUSHes, TRIMs and WRITE_ZEROES, sector-aligned, 512 B to 64 KiB, 80 % of
  them on a hot fifth of the region. Now and then a client opens a raw NBD connection beside
  its own and drops it mid-handshake, mid-payload of a WRITE, after a whole WRITE without
  reading the reply, or with READ replies unread; or it drops its own libnbd connection with
  a WRITE and a READ in flight.
* every RESTART_MIN..RESTART_MAX seconds, each server is killed with SIGKILL and restarted on
  the same cache file (its clients wait, then check their whole region).
* one cache-device failure (`--cache-failure on`, the default): the write-through (or
  write-around) server keeps its cache file on a file system that fails on demand (nbdkit's
  `error` filter behind nbdfuse, as scripts/degraded_trials.py does) with a state directory.
  At a time drawn in the first half of the run the file system starts failing with EIO; the
  server must go degraded (its state file says so) and serve every request from backing with
  no client-visible error; a few seconds later the device comes back and the server is killed
  and restarted on it with `--reformat-failed-cache` (back to caching, cold). The write-back
  policies' lost blocks under a cache failure are the trials' subject (degraded_trials.py),
  since there reads of the lost blocks fail by design.

The checker (`Model` in soaklib/checker.py) tracks, per 512-byte sector, the set of values
the NBD contract allows:

* while the server runs: the last acknowledged write; after a write, TRIM or WRITE_ZEROES that
  failed or whose reply never came, the old value or the new one (a TRIM: old or zeros);
* after a SIGKILL: the value the sector had when the last acknowledged FLUSH was sent (a FUA
  write counts as flushed for its sectors), or any value written to it after that. Under
  write-through (and write-around) ember promises more, every acknowledged write is on backing
  at once, so there the region must read exactly as before the kill. The first read after the
  restart pins the value; later reads must return it.

Every written sector carries a stamp (magic, export, sector, generation) so a wrong sector is
classified: *lost* (zeros, or an older value of this sector) or *wrong* (another sector's or
export's data, or bytes that are no stamp at all). Any lost or wrong byte, any error other than
an EIO from the failing backing, a disconnect that no SIGKILL explains, a server that does not
shut down cleanly at the end, or RSS / open fds growing past the bound fails the soak.

At the end both servers stop with SIGTERM (faults off) and start again warm, and every region is
checked once more against what the clients last wrote.

Usage: scripts/soak.py --ember target/release/ember --duration 1800 [options]; `make soak`.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import random
import re
import shutil
import sys
import tempfile
import time

try:
    import nbd  # noqa: F401  python3-libnbd, installed by scripts/setup.sh
except ImportError:  # a pyenv or venv python3 without the Debian module: use the system one
    if os.path.exists("/usr/bin/python3") and os.path.realpath(sys.executable) != os.path.realpath(
        "/usr/bin/python3"
    ):
        os.execv("/usr/bin/python3", ["/usr/bin/python3"] + sys.argv)
    raise

from soaklib.checker import SECTOR, fill
from soaklib.client import COUNTERS, client_main
from soaklib.servers import FailingCache, Nbdkit, Server, can_fail_a_cache



def prefill(path: str, export: int, size: int):
    """Generation 0 everywhere, so that zeros are never the right answer by accident."""
    with open(path, "wb") as f:
        step = 2048
        for first in range(0, size // SECTOR, step):
            f.write(fill(export, first, [0] * min(step, size // SECTOR - first)))


def flatness(lives, warmup: float, cfg):
    """First/last/max RSS and fds after warm-up, per incarnation and over the run, and the
    incarnations that grew past the bound."""
    rows, bad = [], []
    for life in lives:
        s = [x for x in life["samples"] if x[0] - life["ready"] >= warmup]
        if len(s) < 2:
            continue
        first, last = s[0], s[-1]
        row = {
            "pid": life["pid"], "seconds": round(last[0] - first[0], 1),
            "rss_first": first[1], "rss_last": last[1], "rss_max": max(x[1] for x in s),
            "fds_first": first[2], "fds_last": last[2], "fds_max": max(x[2] for x in s),
        }
        rows.append(row)
        rss_bound = first[1] + max(cfg["rss_slack"], first[1] * 0.25)
        fd_bound = first[2] + cfg["fd_slack"]
        if last[1] > rss_bound or last[2] > fd_bound:
            bad.append(f"pid {life['pid']}: RSS {first[1]} -> {last[1]} (bound {int(rss_bound)}),"
                       f" fds {first[2]} -> {last[2]} (bound {fd_bound})")
    return rows, bad


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ember", default="target/release/ember")
    p.add_argument("--duration", type=float, default=60)
    p.add_argument("--clients", type=int, default=8)
    p.add_argument("--policies", default="write-back-persist,write-through",
                   help="one ember serve per policy, comma-separated")
    p.add_argument("--restart-every", default="60-90",
                   help="MIN-MAX seconds between SIGKILLs; 0 for none (one life: a leak soak)")
    p.add_argument("--error-rate", default="1%")
    p.add_argument("--delay", default="2ms")
    p.add_argument("--volume-size", default="64M")
    p.add_argument("--cache-size", default="32M")
    p.add_argument("--abrupt-rate", type=float, default=0.005)
    p.add_argument("--seed", type=int, default=int(time.time()) % 100000)
    p.add_argument("--workdir", help="keep all files here (default: a temporary directory, "
                   "removed after a pass; after a failure only its logs are kept)")
    p.add_argument("--warmup", type=float, default=10.0,
                   help="seconds after each start before RSS/fd samples count")
    p.add_argument("--rss-slack", type=int, default=8 << 20,
                   help="bytes of RSS growth allowed within one life (or 25 %%, the larger)")
    p.add_argument("--fd-slack", type=int, default=16)
    p.add_argument("--serve-arg", action="append", default=[],
                   help="extra argument for every ember serve (repeat)")
    p.add_argument("--cache-failure", choices=["on", "off"], default="on",
                   help="fail the cache device of the write-through (or write-around) server "
                   "once, at a time drawn in the first half of the run")
    a = p.parse_args()

    def size(s: str) -> int:
        mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
        return int(s[:-1]) * mult[s[-1].upper()] if s[-1].upper() in mult else int(s)

    if a.restart_every.strip() == "0":
        lo = hi = float("inf")
    else:
        lo, hi = (float(x) for x in a.restart_every.split("-"))
    vol = size(a.volume_size)
    cfg = {
        "seed": a.seed, "error_rate": a.error_rate, "delay": a.delay,
        "cache_size": a.cache_size, "abrupt_rate": a.abrupt_rate, "quarantine": 5.0,
        "rss_slack": a.rss_slack, "fd_slack": a.fd_slack,
    }
    ember = os.path.abspath(a.ember)
    policies = a.policies.split(",")
    work = a.workdir or tempfile.mkdtemp(prefix="ember-soak-")
    os.makedirs(work, exist_ok=True)
    t_start = time.time()
    kills = "no SIGKILL" if lo == float("inf") else f"SIGKILL every {a.restart_every} s"
    print(f"soak: seed {a.seed}, {a.duration:.0f} s, {a.clients} clients, policies {policies}, "
          f"{kills}, backing faults {a.error_rate} EIO + {a.delay} "
          f"delay, volumes {a.volume_size}, caches {a.cache_size}, workdir {work}", flush=True)

    rng = random.Random(a.seed)
    # Its own draws, so the SIGKILL schedule of a seed is the same with or without it.
    fail_rng = random.Random(a.seed + 1)
    failing_policy = next((p for p in policies if p in ("write-through", "write-around")), None)
    if a.cache_failure == "on" and failing_policy and not can_fail_a_cache():
        print("soak: no cache-device failure: nbdkit, nbdfuse, fusermount3 or /dev/fuse "
              "missing", flush=True)
        failing_policy = None
    if a.cache_failure == "off":
        failing_policy = None
    caches: list[FailingCache] = []
    cache_failures: list[dict] = []
    kits, servers, exports = [], [], []
    procs, done, harness_problems, client_server = [], {}, [], {}
    clean, clean2, warm_starts, counters = [False], [False], [], {}
    try:
        for i, pol in enumerate(policies):
            img = os.path.join(work, f"s{i}.nbd-backing.img")
            fimg = os.path.join(work, f"s{i}.file-backing.img")
            prefill(img, 2 * i, vol)
            prefill(fimg, 2 * i + 1, vol)
            kit = Nbdkit(work, f"s{i}", img, cfg)
            kits.append(kit)
            failing = None
            if pol == failing_policy and not caches:
                failing = FailingCache(work, f"s{i}", size(a.cache_size))
                caches.append(failing)
            srv = Server(i, work, ember, pol, cfg, kit, fimg, a.serve_arg, failing)
            srv.start()
            servers.append(srv)
            print(f"soak: {srv.name}: {srv.starts[-1] if srv.starts else '?'}", flush=True)
            exports += [(i, "nbd", 2 * i, True), (i, "file", 2 * i + 1, False)]

        # Clients: round-robin over the exports; each export split evenly among its clients.
        per_export: dict[int, list[int]] = {}
        for cid in range(a.clients):
            per_export.setdefault(cid % len(exports), []).append(cid)
        ctx = mp.get_context("fork")
        shared = {
            "gen": [ctx.Value("i", 0) for _ in servers],
            "up": [ctx.Value("i", 0) for _ in servers],
            "stop": ctx.Event(),
            "final_up": ctx.Event(),
        }
        results = ctx.Queue()
        sectors = vol // SECTOR
        for e, cids in per_export.items():
            srv_idx, name, export_id, faulty = exports[e]
            share = sectors // len(cids)
            share -= share % 8
            for k, cid in enumerate(cids):
                spec = {
                    "server": srv_idx, "export": name, "export_id": export_id, "faulty": faulty,
                    "socket": servers[srv_idx].socket, "lo": k * share, "n": share,
                    "strict_crash": servers[srv_idx].policy in ("write-through", "write-around"),
                }
                client_server[cid] = srv_idx
                pr = ctx.Process(target=client_main, args=(cfg, cid, spec, shared, results),
                                 daemon=True)
                pr.start()
                procs.append(pr)

        def pause() -> float:
            return float("inf") if lo == float("inf") else rng.uniform(lo, hi)

        next_kill = [time.time() + pause() for _ in servers]
        end = time.time() + a.duration
        # The cache-device failure: (server, when it fails, how long it serves degraded).
        fail_plan = None
        for i, s in enumerate(servers):
            if s.failing:
                fail_plan = {"server": i, "at": time.time() + fail_rng.uniform(0.2, 0.5)
                             * a.duration, "degraded_for": fail_rng.uniform(3.0, 8.0)}

        def restart(i: int, s: Server, why: str):
            shared["gen"][i].value += 1  # before the kill: clients see why they broke
            s.kill()
            if s.failing:
                s.failing.heal()  # the device comes back (reformatted at the start)
            time.sleep(1.0)  # nbdkit finishes what the dead server had in flight
            s.start()
            shared["up"][i].value = shared["gen"][i].value
            print(f"soak: {time.time() - t_start:7.0f} s  SIGKILL #{s.restarts} of "
                  f"{s.name}{why}; restarted: {s.starts[-1].split(', ')[0]}", flush=True)
            next_kill[i] = time.time() + pause()

        def cache_failure_step(final: bool):
            """Advance the cache-device failure: fail it, see the switch, bring it back."""
            if fail_plan is None or fail_plan.get("done"):
                return
            i = fail_plan["server"]
            s = servers[i]
            now = time.time()
            if "failed" not in fail_plan:
                if final or now < fail_plan["at"]:
                    return
                s.failing.fail()
                fail_plan["failed"] = now
                print(f"soak: {now - t_start:7.0f} s  the cache device of {s.name} fails "
                      f"(EIO from its file system)", flush=True)
                return
            if "switched" not in fail_plan:
                if s.degraded():
                    fail_plan["switched"] = now
                    print(f"soak: {now - t_start:7.0f} s  {s.name} serves degraded, "
                          f"{now - fail_plan['failed']:.2f} s after the failure", flush=True)
                elif now - fail_plan["failed"] > 30 or final:
                    harness_problems.append(
                        f"{s.name}: no switch to degraded mode within "
                        f"{now - fail_plan['failed']:.0f} s of the cache device failing")
                    fail_plan["switched"] = None
                else:
                    return
            if not final and fail_plan["switched"] is not None and \
                    now < fail_plan["switched"] + fail_plan["degraded_for"]:
                return
            restart(i, s, " (the cache device came back)")
            fail_plan["done"] = True
            cache_failures.append({
                "server": s.name, "at_s": round(fail_plan["failed"] - t_start, 1),
                "switch_s": None if fail_plan["switched"] is None
                else round(fail_plan["switched"] - fail_plan["failed"], 3),
                "degraded_s": None if fail_plan["switched"] is None
                else round(time.time() - fail_plan["switched"], 1),
                "restart": s.starts[-1] if s.starts else "?",
                "healthy_after": not s.degraded(),
            })
            if s.degraded():
                harness_problems.append(f"{s.name}: still degraded after the restart on the "
                                        "reformatted cache device")
        last_report = time.time()
        while time.time() < end:
            for s in servers:
                s.sample()
            cache_failure_step(final=time.time() >= end - 5)
            failing_now = fail_plan is not None and "failed" in fail_plan \
                and not fail_plan.get("done")
            for i, s in enumerate(servers):
                if failing_now and fail_plan["server"] == i:
                    continue  # its failure ends in its own restart
                if time.time() >= next_kill[i] and time.time() < end - 5:
                    restart(i, s, "")
            if time.time() - last_report > 60:
                last_report = time.time()
                txt = ", ".join(
                    f"{s.name} rss {s.lives[-1]['samples'][-1][1] >> 20} MiB "
                    f"fds {s.lives[-1]['samples'][-1][2]}"
                    for s in servers if s.lives and s.lives[-1]["samples"]
                )
                print(f"soak: {time.time() - t_start:7.0f} s  {txt}", flush=True)
            if not all(pr.is_alive() for pr in procs):
                break
            # Watched closely while a failed cache device awaits its switch.
            time.sleep(0.1 if failing_now and "switched" not in fail_plan else 1.0)

        # Final phase: faults off, clients check their regions on the live servers, then a
        # clean SIGTERM, a warm restart, and one more check. A cache failure still under way
        # ends first (the device comes back, the server restarts on it).
        cache_failure_step(final=True)
        for k in kits:
            k.faults_off()
        shared["stop"].set()
        phase1 = set()
        while len(phase1) < len(procs):
            msg = results.get(timeout=900)  # queue.Empty: a client hangs, the soak fails
            if msg[0] == "phase1":
                phase1.add(msg[1])
            else:
                done[msg[1]] = msg
        for s in servers:
            s.sample()
        counters = {}
        for s in servers:
            for k, v in s.scrape().items():
                s.engine_total[k] = s.engine_total.get(k, 0.0) + v
            counters[s.name] = s.engine_total
        clean = [s.stop_clean() for s in servers]
        for i, s in enumerate(servers):
            s.start()
            shared["up"][i].value = shared["gen"][i].value
        warm_starts = [s.starts[-1] for s in servers]
        shared["final_up"].set()
        while len(done) < len(procs):
            msg = results.get(timeout=900)
            if msg[0] == "done":
                done[msg[1]] = msg
        for pr in procs:
            pr.join(60)
        clean2 = [s.stop_clean() for s in servers]
    except Exception as e:  # the harness itself failed (a server that never came back, …)
        harness_problems.append(f"{type(e).__name__}: {e}")
    finally:
        for s in servers:
            if s.proc is not None and s.proc.poll() is None:
                s.proc.kill()
                s.proc.wait()
        for k in kits:
            k.stop()
        for c in caches:
            c.stop()

    # ---- report
    total: dict[str, int] = {k: 0 for k in COUNTERS}
    per_server: dict[int, dict[str, int]] = {}
    failures: list[str] = []
    for _, cid, c, f in sorted(done.values()):
        mine = per_server.setdefault(client_server[cid], {})
        for k, v in c.items():
            total[k] = total.get(k, 0) + v
            mine[k] = mine.get(k, 0) + v
        failures += f
    for s in servers:
        failures += s.failures
    injected_by: dict[str, int] = {}
    for k in kits:
        for kind, v in k.injected().items():
            injected_by[kind] = injected_by.get(kind, 0) + v
    injected = sum(injected_by.values())
    wall = time.time() - t_start
    print()
    print(f"soak summary ({wall:.0f} s wall, seed {a.seed})")
    line = lambda k, v: print(f"  {k:<34} {v}")
    line("requests", total["requests"])
    for k in ["reads", "writes", "fua_writes", "flushes", "trims", "zeroes"]:
        line("  " + k, total[k])
    line("verified reads (client reads)", total["verified_reads"])
    line("sectors verified", total["sectors_verified"])
    line("bytes verified", total["bytes_verified"])
    line("faults injected (nbdkit error filter)", injected)
    for kind, v in sorted(injected_by.items()):
        line("  into " + kind, v)
    line("EIO replies seen by clients", total["eio"])
    for k in ["eio_read", "eio_write", "eio_trim", "eio_zero", "eio_flush"]:
        line("  " + k, total[k])
    line("SIGKILL restarts", sum(s.restarts for s in servers))
    line("cache-device failures", len(cache_failures))
    for f in cache_failures:
        line(f"  {f['server']} at {f['at_s']} s", f"degraded after {f['switch_s']} s, for "
             f"{f['degraded_s']} s; then {f['restart'].split(', ')[0]}")
    line("start failures (retried)", sum(s.start_failures for s in servers))
    line("requests in flight at a SIGKILL", total["in_flight_at_kill"])
    line("region checks after SIGKILL", total["crash_checks"])
    line("  sectors checked", total["crash_sectors_checked"])
    line("  sectors that had one known value", total["crash_sectors_checked"]
         - total["crash_sectors_uncertain"])
    line("  of which held an older allowed value", total["crash_sectors_unflushed_lost"])
    line("  sectors with several allowed values", total["crash_sectors_uncertain"])
    for k in ["handshake", "partial_write", "write_no_reply", "reads_no_reply", "libnbd_close"]:
        line("abrupt disconnects: " + k, total["abrupt_" + k])
    line("final check sectors (live + after clean restart)", total["final_sectors_checked"])
    line("unexpected errors", total["unexpected_errors"])
    line("unexpected disconnects", total["unexpected_disconnects"])
    for s in servers:
        mine = per_server.get(s.idx, {})
        for k in ["requests", "verified_reads", "eio", "crash_checks",
                  "crash_sectors_unflushed_lost", "lost_bytes", "wrong_bytes"]:
            line(f"{s.name} clients' {k}", mine.get(k, 0))
        kinds = {}
        for st in s.starts:
            word = re.search(r"start (\w+)", st)
            kinds[word.group(1) if word else "?"] = kinds.get(word.group(1) if word else "?", 0) + 1
        line(f"{s.name} starts", kinds)
        c = counters.get(s.name, {})
        for key in ["read_hits", "read_misses", "io_errors", "flush_errors", "flushed_blocks",
                    "journal_commits", "persist_checkpoints", "write_through_fallbacks",
                    "degraded_requests"]:
            if f"ember_cache_{key}_total" in c:
                line(f"{s.name} engine {key}", int(c[f"ember_cache_{key}_total"]))
    growth_fail = []
    summary_flat = {}
    for s in servers:
        rows, bad = flatness(s.lives, a.warmup, cfg)
        growth_fail += bad
        if rows:
            rss_max = max(r["rss_max"] for r in rows)
            fds_max = max(r["fds_max"] for r in rows)
            line(f"{s.name} RSS first/last/max",
                 f"{rows[0]['rss_first'] >> 10} / {rows[-1]['rss_last'] >> 10} / "
                 f"{rss_max >> 10} KiB")
            line(f"{s.name} open fds first/last/max",
                 f"{rows[0]['fds_first']} / {rows[-1]['fds_last']} / {fds_max}")
            worst = max(rows, key=lambda r: r["rss_last"] - r["rss_first"])
            line(f"{s.name} largest RSS growth in one life",
                 f"{(worst['rss_last'] - worst['rss_first']) >> 10} KiB over {worst['seconds']} s"
                 f" (bound: +max({cfg['rss_slack'] >> 20} MiB, 25 %))")
            worstf = max(rows, key=lambda r: r["fds_last"] - r["fds_first"])
            line(f"{s.name} largest fd growth in one life",
                 f"{worstf['fds_last'] - worstf['fds_first']} (bound: +{cfg['fd_slack']})")
            summary_flat[s.name] = rows
    lost, wrong = total["lost_bytes"], total["wrong_bytes"]
    line("lost bytes", lost)
    line("wrong bytes", wrong)
    line("lost or wrong bytes", lost + wrong)
    problems = []
    if lost + wrong:
        problems.append(f"{lost + wrong} lost or wrong bytes")
    if total["unexpected_errors"] or total["unexpected_disconnects"]:
        problems.append("unexpected errors or disconnects")
    if not all(clean) or not all(clean2):
        problems.append("a server did not shut down cleanly")
    if growth_fail:
        problems.append("RSS or fds grew past the bound: " + "; ".join(growth_fail))
    if len(done) < len(procs):
        problems.append("a client did not report")
    problems += harness_problems
    if total["requests"] == 0:
        problems.append("no requests")
    print("soak-json: " + json.dumps({
        "seed": a.seed, "duration": a.duration, "wall": round(wall), "policies": policies,
        "counters": total,
        "counters_by_server": {s.name: per_server.get(s.idx, {}) for s in servers}, "faults_injected": injected,
        "faults_injected_by_kind": injected_by, "restarts": sum(s.restarts for s in servers),
        "cache_failures": cache_failures,
        "start_failures": sum(s.start_failures for s in servers),
        "starts": {s.name: s.starts for s in servers}, "engine": counters,
        "flatness": summary_flat, "warm_restart": warm_starts,
        "lost_or_wrong_bytes": lost + wrong, "problems": problems,
    }))
    for f in failures[:40]:
        print("  ! " + f)
    if problems:
        print("soak: FAIL: " + "; ".join(problems))
        if not a.workdir:
            # A temporary work directory keeps what a post-mortem reads (the servers' and
            # nbdkit's logs) and loses the images, a few hundred MiB a run.
            for name in os.listdir(work):
                if not name.endswith(".log"):
                    path = os.path.join(work, name)
                    if os.path.isdir(path):
                        shutil.rmtree(path)
                    else:
                        os.remove(path)
            print(f"soak: logs kept in {work}")
        return 1
    if not a.workdir:
        shutil.rmtree(work, ignore_errors=True)
    print("soak: PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
