"""bench/warmup-live's driver (run it through bench/warmup-live, which builds ember first).

Bonfire's experiment (FAST 2013, section 6, Figures 10-15) on the real server: a slow backing
(nbdkit's file plugin behind its delay filter), a trace with Bonfire's hourly reaccess pattern
(`ember trace gen bonfire`, time compressed: the mean reaccess age is seconds, not minutes),
replayed through `ember serve --cache mem:SIZE` by `ember replay` at queue depth 1 at the
trace's own timing, every read verified against the pattern prefilled on the backing.

Per round:
  warm          one server, never killed: the first half, then the second half (reference)
  first half    a server with --warmup-log, the first half, then kill -9 (the crash)
  cold          a new server without a log: the second half
  bonfire       a new server with the crashed server's log (metadata only; the selector
                preloads from the slow backing while the second half runs)
  bonfire+data  the same with --warmup-snapshot (its own first half and kill -9), only when
                `ember serve --help` lists the flag

During each second half the server's Prometheus metrics are scraped every 0.25 s: read hits
and misses (blocks), backing read bytes of client misses, blocks preloaded; the series are
binned by reads (INTERVAL * RATE reads an interval: INTERVAL seconds of trace time), so runs
that fell behind the trace's timing still compare the same requests.
T_converge is Bonfire's eq. 1 on those hit-rate series against the warm run's (the same code as
ember_sim::warmup::convergence::convergence_intervals), the backing reads saved are counted over
cold's convergence window [0, T_cold). The preload time is the server's
ember_warmup_preload_seconds once the preload is done.
"""

import json
import os
import random
import re
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.request

EMBER = os.environ["EMBER"]
WORK = os.environ["WORK"]
OUT = os.environ["OUT"]
ROUNDS = int(os.environ.get("ROUNDS", "2"))
RATE = float(os.environ.get("RATE", "300"))
HALF = float(os.environ.get("HALF", "60"))
INTERVAL = float(os.environ.get("INTERVAL", "1"))
DELAY = os.environ.get("DELAY", "1ms")
CACHE = os.environ.get("CACHE", "mem:40M")
SELECTOR = os.environ.get("SELECTOR", "last-k")
REGION = os.environ.get("REGION", "4K")
MEAN_AGE = float(os.environ.get("MEAN_AGE", "10"))
HOURLY = float(os.environ.get("HOURLY", "0.9"))
# The snapshot's staging buffer is written as one segment when full (Bonfire: 128 MiB); the
# first half here copies about 28 MiB of blocks, so the default is scaled down to match.
SNAP_STAGING = os.environ.get("SNAP_STAGING", "1M")
SNAP_SIZE = os.environ.get("SNAP_SIZE", "256M")
BLOCKS = int(os.environ.get("BLOCKS", "65536"))
TH_V = float(os.environ.get("TH_V", "0.9"))
TH_N = float(os.environ.get("TH_N", "0.05"))
SEED = "77"


def fail(msg):
    print("bench/warmup-live: FAILED: " + msg, file=sys.stderr)
    sys.exit(1)


def run(args, **kw):
    r = subprocess.run(args, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        fail("%s exited %d:\n%s%s" % (" ".join(args), r.returncode, r.stdout, r.stderr))
    return r.stdout


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def convergence_intervals(new, warm, th_v, th_n):
    """Bonfire eq. 1, as ember_sim::warmup::convergence::convergence_intervals."""
    n = min(len(new), len(warm))
    best, suffix = n, 0
    for t in range(n - 1, -1, -1):
        h, w = new[t], warm[t]
        suffix += int(h is not None and w is not None and h < th_v * w)
        if suffix <= th_n * (n - t):
            best = t
    return best


def scrape(addr):
    text = urllib.request.urlopen("http://%s/metrics" % addr, timeout=10).read().decode()
    out = {}
    for line in text.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        name = re.split(r"[{ ]", line, maxsplit=1)[0]
        try:
            out[name] = out.get(name, 0.0) + float(line.split()[-1])
        except ValueError:
            pass
    return out


class Server:
    def __init__(self, name, extra):
        self.name = name
        self.sock = os.path.join(WORK, name + ".sock")
        self.metrics = "127.0.0.1:%d" % free_port()
        self.logfile = os.path.join(WORK, name + ".console")
        if os.path.exists(self.sock):
            os.unlink(self.sock)
        args = [EMBER, "serve", "--cache", CACHE, "--backing",
                "disk=nbd+unix:///?socket=%s" % os.path.join(WORK, "nbdkit.sock"),
                "--unix", self.sock, "--metrics", self.metrics,
                # Only ember writes the backing after the prefill: without this an NBD
                # backing's identity is unknown, and the snapshot is never used.
                "--trust-nbd-backing"] + extra
        self.out = open(self.logfile, "w")
        self.proc = subprocess.Popen(args, stdout=self.out, stderr=subprocess.STDOUT)
        t = time.time()
        while "ember serve: ready" not in self.console():
            if self.proc.poll() is not None or time.time() - t > 30:
                fail("ember serve (%s) did not start:\n%s" % (name, self.console()))
            time.sleep(0.02)
        self.started = time.time()

    def console(self):
        with open(self.logfile) as f:
            return f.read()

    def uri(self):
        return "nbd+unix:///disk?socket=%s" % self.sock

    def kill9(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        self.out.close()

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.out.close()


def replay(trace, server, sample=False):
    """Replay at the trace's timing, every read verified; with sample, scrape the server's
    metrics every SCRAPE seconds. Returns (replay report, samples)."""
    samples = []
    stop = threading.Event()

    def sampler():
        t0 = time.time()
        k = 0
        while True:
            m = scrape(server.metrics)
            samples.append((time.time() - t0, m))
            k += 1
            if stop.wait(max(0.0, t0 + k * SCRAPE - time.time())):
                break
        samples.append((time.time() - t0, scrape(server.metrics)))

    th = threading.Thread(target=sampler) if sample else None
    if th:
        th.start()
    r = subprocess.run([EMBER, "replay", trace, "--format", "msr", "--server", server.uri(),
                        "--assume-prefilled", "--seed", SEED, "--timing", "trace", "--json"],
                       capture_output=True, text=True)
    if th:
        stop.set()
        th.join()
    if r.returncode != 0:
        fail("ember replay on %s exited %d (wrong data or errors?):\n%s%s"
             % (server.name, r.returncode, r.stdout[-4000:], r.stderr[-4000:]))
    rep = json.loads(r.stdout)
    v = rep["verification"]
    if v["reads_failed"] or v["reads_unverifiable"] or any(o["errors"] for o in rep["ops"]):
        fail("%s: the replay found wrong data or errors: %s" % (server.name, json.dumps(v)))
    return rep, samples


SCRAPE = 0.25  # seconds between scrapes; the series is binned by reads, not by time


def series(samples):
    """Per interval of INTERVAL * RATE reads (INTERVAL seconds of the trace's time, whatever
    the replay's lateness): hits, misses, backing reads (4 KiB blocks read from backing for
    clients), blocks preloaded, the wall time at its end. Counters are interpolated linearly
    between scrapes at each interval's boundary."""
    keys = ("ember_cache_read_hits_total", "ember_cache_read_misses_total",
            "ember_cache_backing_read_bytes_total", "ember_warmup_preloaded_blocks_total")
    base = samples[0][1]
    cum = [(t, [m.get(k, 0.0) - base.get(k, 0.0) for k in keys]) for t, m in samples]
    reads = [c[0] + c[1] for _, c in cum]
    per = RATE * INTERVAL
    total = reads[-1]
    bounds = [0.0]
    while bounds[-1] + per <= total + 0.5:
        bounds.append(bounds[-1] + per)
    if total - bounds[-1] > per / 2:  # a last interval at least half full
        bounds.append(total)

    def at(r):
        for i in range(1, len(cum)):
            if reads[i] >= r:
                r0, r1 = reads[i - 1], reads[i]
                f = 0.0 if r1 == r0 else (r - r0) / (r1 - r0)
                t = cum[i - 1][0] + f * (cum[i][0] - cum[i - 1][0])
                return t, [a + f * (b - a) for a, b in zip(cum[i - 1][1], cum[i][1])]
        return cum[-1][0], cum[-1][1]

    out = []
    prev = at(bounds[0])
    for b in bounds[1:]:
        cur = at(b)
        d = [y - x for x, y in zip(prev[1], cur[1])]
        h, m = d[0], d[1]
        out.append({
            "t_s": cur[0],
            "hits": round(h),
            "misses": round(m),
            "hit_rate": h / (h + m) if h + m else None,
            "backing_reads": round(d[2] / 4096),
            "preloaded_blocks": round(d[3]),
        })
        prev = cur
    return out


def wait_preload(server, limit=120):
    t = time.time()
    while True:
        m = scrape(server.metrics)
        if m.get("ember_warmup_state") == 3.0:
            return m
        if time.time() - t > limit:
            return m
        time.sleep(0.1)


def main():
    os.makedirs(OUT, exist_ok=True)
    help_text = run([EMBER, "serve", "--help"])
    has_snapshot = "--warmup-snapshot" in help_text
    trace = os.path.join(WORK, "trace.csv")
    days = 2 * HALF / 86400
    run([EMBER, "trace", "gen", "bonfire", "--rate", str(RATE), "--days", "%.9f" % days,
         "--hourly", str(HOURLY), "--hourly-mean-age", str(MEAN_AGE), "--daily-regions", "0", "--blocks", str(BLOCKS),
         "--seed", "1", "-o", trace])
    lines = open(trace).read().splitlines()
    half = len(lines) // 2
    first, second = os.path.join(WORK, "first.csv"), os.path.join(WORK, "second.csv")
    open(first, "w").write("\n".join(lines[:half]) + "\n")
    open(second, "w").write("\n".join(lines[half:]) + "\n")
    # The backing: a sparse file, the pattern written over the trace's footprint, served by
    # nbdkit with DELAY added to every read.
    img = os.path.join(WORK, "backing.img")
    with open(img, "wb") as f:
        f.truncate(BLOCKS * 4096)
    kit_sock = os.path.join(WORK, "nbdkit.sock")
    run(["nbdkit", "-P", os.path.join(WORK, "nbdkit.pid"), "-U", kit_sock, "--filter=delay",
         "file", img, "rdelay=" + DELAY])
    run([EMBER, "replay", trace, "--format", "msr", "--server",
         "nbd+unix:///?socket=" + kit_sock, "--prefill-only", "--seed", SEED, "--json"])
    print("bench/warmup-live: %d cores; trace: ember trace gen bonfire --rate %g (%g %% hourly "
          "reaccesses, mean age %g s, one-offs over %d blocks), %d reads in two halves of "
          "%g s; backing: nbdkit file + delay rdelay=%s; cache %s, LRU; %s, region %s, "
          "warmup size 100 %%; replay at trace timing, queue depth 1; intervals of %g s; "
          "Th_V %g, Th_N %g; %d round(s)"
          % (os.cpu_count(), RATE, 100 * HOURLY, MEAN_AGE, BLOCKS, len(lines), HALF, DELAY, CACHE,
             SELECTOR, REGION, INTERVAL, TH_V, TH_N, ROUNDS), flush=True)
    if not has_snapshot:
        print("bench/warmup-live: `ember serve --help` has no --warmup-snapshot: the "
              "metadata+data row is NOT run (the performance snapshot is not built in this "
              "ember)", flush=True)

    def log_args(log, snapshot):
        a = ["--warmup-log", log, "--warmup", SELECTOR, "--warmup-region", REGION,
             "--warmup-size", "100%"]
        return a + (["--warmup-snapshot", "--warmup-snapshot-staging", SNAP_STAGING,
                      "--warmup-snapshot-size", SNAP_SIZE] if snapshot else [])

    rounds = []
    for rnd in range(ROUNDS):
        res = {}

        def warm():
            s = Server("warm%d" % rnd, log_args(os.path.join(WORK, "warm%d.wlog" % rnd), False))
            replay(first, s)
            rep, smp = replay(second, s, sample=True)
            s.stop()
            res["always-warm"] = {"series": series(smp), "replay": rep}

        def crash_then(name, snapshot):
            log = os.path.join(WORK, "%s%d.wlog" % (name, rnd))
            s = Server("first-%s%d" % (name, rnd), log_args(log, snapshot))
            replay(first, s)
            time.sleep(0.1)  # the log writer drains every 10 ms
            s.kill9()
            s = Server("%s%d" % (name, rnd), log_args(log, snapshot))
            console = s.console()
            if "preloading" not in console:
                fail("%s: the restart after kill -9 does not preload:\n%s" % (name, console))
            rep, smp = replay(second, s, sample=True)
            m = wait_preload(s)
            if m.get("ember_warmup_state") != 3.0:
                fail("%s: the preload did not finish:\n%s" % (name, s.console()))
            from_snap = m.get("ember_warmup_preloaded_from_snapshot_blocks_total")
            if snapshot and not from_snap:
                fail("%s: no block was preloaded from the snapshot (a metadata+data row that "
                     "is metadata only):\n%s" % (name, s.console()))
            s.stop()
            res[name] = {
                "series": series(smp), "replay": rep,
                "preload_seconds": m.get("ember_warmup_preload_seconds"),
                "preloaded_blocks": m.get("ember_warmup_preloaded_blocks_total"),
                "warmup_metrics": {k: v for k, v in m.items() if k.startswith("ember_warmup")},
                "start_line": [l for l in console.splitlines() if "warmup log" in l],
            }

        def cold():
            # A crash of a memory cache without Bonfire: a new, empty cache.
            s = Server("cold%d" % rnd, [])
            rep, smp = replay(second, s, sample=True)
            s.stop()
            res["cold"] = {"series": series(smp), "replay": rep}

        steps = [warm, cold, lambda: crash_then("bonfire", False)]
        if has_snapshot:
            steps.append(lambda: crash_then("bonfire+data", True))
        order = steps if rnd % 2 == 0 else [steps[0]] + steps[:0:-1]
        for step in order:
            step()
        rounds.append(evaluate(rnd, res))
    summarize(rounds, has_snapshot)


def evaluate(rnd, res):
    warm = [p["hit_rate"] for p in res["always-warm"]["series"]]
    ev = {"round": rnd, "runs": {}}
    t_cold = convergence_intervals([p["hit_rate"] for p in res["cold"]["series"]], warm,
                                   TH_V, TH_N)
    for name, r in res.items():
        s = r["series"]
        t = convergence_intervals([p["hit_rate"] for p in s], warm, TH_V, TH_N)
        win = s[:t_cold]
        hits = sum(p["hits"] for p in s)
        reads = hits + sum(p["misses"] for p in s)
        rep = r["replay"]
        ev["runs"][name] = {
            "t_converge_intervals": t,
            "t_converge_s": t * INTERVAL,
            "intervals": len(s),
            "backing_reads_in_cold_window": sum(p["backing_reads"] for p in win),
            "hits_in_cold_window": sum(p["hits"] for p in win),
            "reads_in_cold_window": sum(p["hits"] + p["misses"] for p in win),
            "hit_rate_second_half": hits / reads if reads else None,
            "preload_seconds": r.get("preload_seconds"),
            "preloaded_blocks": r.get("preloaded_blocks"),
            "preloaded_from_snapshot": (r.get("warmup_metrics") or {}).get(
                "ember_warmup_preloaded_from_snapshot_blocks_total"),
            "warmup_metrics": r.get("warmup_metrics"),
            "start_line": r.get("start_line"),
            "replay_reads_verified": rep["verification"]["reads_verified"],
            "replay_sent_late": rep["behind_schedule"],
            "replay_max_late_ms": rep["max_lateness_ms"],
            "series": s,
        }
    ev["t_cold_intervals"] = t_cold
    return ev


def spread(vals):
    vals = sorted(v for v in vals if v is not None)
    if not vals:
        return "-"
    if len(vals) == 1:
        return "%.3g" % vals[0]
    return "%.3g (min %.3g, max %.3g)" % (statistics.median(vals), vals[0], vals[-1])


def summarize(rounds, has_snapshot):
    names = ["always-warm", "cold", "bonfire"] + (["bonfire+data"] if has_snapshot else [])
    print()
    print("per round: T_converge (eq. 1, intervals of %g s), backing reads of clients over "
          "cold's convergence window, hit rate over the second half, preload seconds" % INTERVAL)
    for ev in rounds:
        for n in names:
            r = ev["runs"][n]
            print("round %d  %-13s T_converge %3d (%5.1f s)  backing reads in [0, T_cold) %6d  "
                  "hit rate %5.1f %%  preload %s  (%d reads verified, %d sent late, max %.0f ms)"
                  % (ev["round"], n, r["t_converge_intervals"], r["t_converge_s"],
                     r["backing_reads_in_cold_window"], 100 * (r["hit_rate_second_half"] or 0),
                     "-" if r["preload_seconds"] is None else "%.2f s, %d blocks%s"
                     % (r["preload_seconds"], r["preloaded_blocks"] or 0,
                        "" if r["preloaded_from_snapshot"] is None
                        else " (%d from the snapshot)" % r["preloaded_from_snapshot"]),
                     r["replay_reads_verified"], r["replay_sent_late"], r["replay_max_late_ms"]))
    print()
    ratios, saved, saved_data, pre_ratio = [], [], [], []
    ratios_data = []
    lower_bound = False
    for ev in rounds:
        c = ev["runs"]["cold"]
        b = ev["runs"]["bonfire"]
        tb = b["t_converge_intervals"]
        if tb == 0:
            lower_bound = True
        ratios.append(c["t_converge_intervals"] / max(tb, 1))
        if c["backing_reads_in_cold_window"]:
            saved.append(1 - b["backing_reads_in_cold_window"] / c["backing_reads_in_cold_window"])
        if has_snapshot:
            d = ev["runs"]["bonfire+data"]
            ratios_data.append(c["t_converge_intervals"] / max(d["t_converge_intervals"], 1))
            if c["backing_reads_in_cold_window"]:
                saved_data.append(
                    1 - d["backing_reads_in_cold_window"] / c["backing_reads_in_cold_window"])
            if d["preload_seconds"]:
                pre_ratio.append(b["preload_seconds"] / d["preload_seconds"])
    print("T_converge cold (s)              %s" % spread(
        [e["runs"]["cold"]["t_converge_s"] for e in rounds]))
    print("T_converge bonfire (s)           %s" % spread(
        [e["runs"]["bonfire"]["t_converge_s"] for e in rounds]))
    print("cold / bonfire T_converge        %s%s" % (spread(ratios), "  (Bonfire converged in "
          "the first interval in some round: its T counted as 1 interval, a lower bound)"
          if lower_bound else ""))
    print("backing reads saved, bonfire     %s %%  (client backing reads over [0, T_cold), "
          "against cold)" % spread([100 * x for x in saved]))
    ceiling = [100 * (1 - e["runs"]["always-warm"]["backing_reads_in_cold_window"]
                      / e["runs"]["cold"]["backing_reads_in_cold_window"])
               for e in rounds if e["runs"]["cold"]["backing_reads_in_cold_window"]]
    print("backing reads saved, always-warm %s %%  (the ceiling: one-off reads miss in every "
          "cache)" % spread(ceiling))
    print("preload seconds, metadata only   %s" % spread(
        [e["runs"]["bonfire"]["preload_seconds"] for e in rounds]))
    if has_snapshot:
        print("T_converge bonfire+data (s)      %s" % spread(
            [e["runs"]["bonfire+data"]["t_converge_s"] for e in rounds]))
        print("cold / bonfire+data T_converge   %s" % spread(ratios_data))
        print("backing reads saved, +data       %s %%" % spread([100 * x for x in saved_data]))
        print("preload seconds, metadata+data   %s" % spread(
            [e["runs"]["bonfire+data"]["preload_seconds"] for e in rounds]))
        print("preload speedup, data / meta     %s" % spread(pre_ratio))
    else:
        print("metadata+data row: not run (no --warmup-snapshot in this ember)")
    r = statistics.median(ratios)
    targets = [("Bonfire converges >= 2x sooner than cold", r >= 2.0),
               ("Bonfire cuts backing reads in cold's window by >= 40 %",
                bool(saved) and statistics.median(saved) >= 0.4)]
    if has_snapshot:
        targets.append(("metadata+data preloads >= 2x faster than metadata only",
                        bool(pre_ratio) and statistics.median(pre_ratio) >= 2.0))
    for what, ok in targets:
        print("target: %s: %s" % (what, "met" if ok else "NOT MET"))
    doc = {"config": {"rate": RATE, "half_s": HALF, "interval_s": INTERVAL, "delay": DELAY,
                      "cache": CACHE, "selector": SELECTOR, "region": REGION,
                      "mean_age_s": MEAN_AGE, "hourly": HOURLY, "blocks": BLOCKS, "th_v": TH_V, "th_n": TH_N,
                      "rounds": ROUNDS, "snapshot": has_snapshot,
                      "snapshot_staging": SNAP_STAGING, "snapshot_size": SNAP_SIZE},
           "rounds": rounds, "ratio": r}
    with open(os.path.join(OUT, "warmup-live.json"), "w") as f:
        json.dump(doc, f, indent=1)
    with open(os.path.join(OUT, "warmup-live.csv"), "w") as f:
        f.write("round,run,interval,t_s,hits,misses,hit_rate,backing_reads,preloaded_blocks\n")
        for ev in rounds:
            for n in names:
                for i, p in enumerate(ev["runs"][n]["series"]):
                    f.write("%d,%s,%d,%.3f,%d,%d,%s,%d,%d\n" % (
                        ev["round"], n, i, p["t_s"], p["hits"], p["misses"],
                        "" if p["hit_rate"] is None else "%.4f" % p["hit_rate"],
                        p["backing_reads"], p["preloaded_blocks"]))
    plot(rounds[0], names)
    record(rounds, names, ratios, saved, pre_ratio, targets, r)
    print("wrote %s/warmup-live.json, warmup-live.csv, warmup-live-hit-rate.png, "
          "warmup-live-backing-reads.png" % OUT)
    print("ratio: %.2f" % r)


def record(rounds, names, ratios, saved, pre_ratio, targets, r):
    """The result in bench/results/ (bench/lib/record.py)."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
    from record import Record
    rec = Record("warmup-live", peer="ember, cold restart", target=">= 2",
                 title="Bonfire live on ember serve: restarts after kill -9 in the middle of a "
                       "trace, cold against Bonfire's warmup",
                 ratio_of="cold T_converge / metadata-only Bonfire T_converge (median)")
    for n in names:
        rec.figure("T_converge, %s" % n, [e["runs"][n]["t_converge_s"] for e in rounds],
                   unit="s", who="peer" if n == "cold" else "ember")
        rec.figure("hit rate over the second half, %s" % n,
                   [100 * (e["runs"][n]["hit_rate_second_half"] or 0) for e in rounds],
                   unit="%", who="peer" if n == "cold" else "ember")
    rec.figure("cold / bonfire T_converge", ratios, who="ratio", target=">= 2")
    rec.figure("backing reads saved in cold's window, bonfire", [100 * x for x in saved],
               unit="%", who="ember", target=">= 40")
    if pre_ratio:
        rec.figure("preload speedup, metadata+data / metadata only", pre_ratio, who="ratio",
                   target=">= 2")
    for what, ok in targets:
        rec.note("target: %s: %s" % (what, "met" if ok else "NOT MET"))
    rec.note("%d round(s); rate %s reads/s, halves of %s s, cache %s, selector %s, region %s"
             % (ROUNDS, RATE, HALF, CACHE, SELECTOR, REGION))
    rec.write(round(r, 2))


def plot(ev, names):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("bench/warmup-live: matplotlib missing: no PNG plots")
        return
    for key, ylabel, fname in (("hit_rate", "read hit rate", "warmup-live-hit-rate.png"),
                               ("backing_reads", "client reads from backing (4 KiB blocks) "
                                "per interval", "warmup-live-backing-reads.png")):
        fig, ax = plt.subplots(figsize=(8, 4.5), dpi=80)
        for n in names:
            s = ev["runs"][n]["series"]
            xs = [(i + 0.5) * INTERVAL for i in range(len(s))]
            ys = [p[key] for p in s]
            ax.plot(xs, ys, label="%s (T_converge %g s)" % (n, ev["runs"][n]["t_converge_s"])
                    if n != "always-warm" else n, linewidth=1.6)
        t_cold = ev["t_cold_intervals"] * INTERVAL
        ax.axvline(t_cold, color="grey", linestyle=":", linewidth=1)
        ax.set_xlabel("trace seconds after the restart (intervals of %d reads)"
                      % round(RATE * INTERVAL))
        ax.set_ylabel(ylabel)
        ax.set_title("ember serve after kill -9: %s" % ylabel.split(" per")[0])
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
        fig.tight_layout()
        fig.savefig(os.path.join(OUT, fname))
        plt.close(fig)


if __name__ == "__main__":
    random.seed(1)
    main()
