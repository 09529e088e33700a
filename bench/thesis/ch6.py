"""bench/thesis-ch6's driver: the thesis' chapter 6 (Qin 2014) on `ember serve` with ext4.

Stack per run: backing image (a copy of a golden ext4 image holding the personality's files)
served by nbdkit with bench/thesis/disk.c (one disk arm with seeks) -> `ember serve` (cache
file on a disk file system) -> nbdfuse -> `losetup --direct-io=on` -> ext4 mounted -> fio
(direct I/O, bench/thesis/*.fio). "no-cache" leaves ember out (nbdfuse on the disk itself).

Configuration comes from the environment (see bench/thesis-ch6). Writes OUT/ch6.json,
OUT/ch6.csv, OUT/ch6.md (the tables in Markdown) and the PNGs; prints the tables and `ratio: X` last.
Records the result in bench/results/ (bench/lib/record.py).
"""

import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HERE = os.path.join(ROOT, "bench", "thesis")
EMBER = os.environ.get("EMBER", os.path.join(ROOT, "target", "release", "ember"))
QUICK = os.environ.get("QUICK", "") not in ("", "0")
ROUNDS = int(os.environ.get("ROUNDS", "1" if QUICK else "2"))
SECS = int(os.environ.get("SECS", "3" if QUICK else "5"))
WARM = int(os.environ.get("WARM", "1" if QUICK else "2"))
LONG_SECS = int(os.environ.get("LONG_SECS", "12"))  # the discard comparison's runs
LONG_WARM = int(os.environ.get("LONG_WARM", "3"))
CACHE_MB = int(os.environ.get("CACHE_MB", "16"))
OUT = os.environ.get("OUT", os.path.join(ROOT, "target", "thesis-ch6"))
BENCH_DIR = os.environ.get("BENCH_DIR", os.path.join(ROOT, "target", "bench-thesis"))
DISK_ARGS = os.environ.get("DISK", "xfer_us=100 seek_us=4000 wseek_extra_us=2000 flush_us=2000")
ENV = dict(os.environ, PATH="/usr/bin:/usr/sbin:/sbin:" + os.environ.get("PATH", ""))

# Section 6.1.1: data set sizes against the thesis' 8 GB cache (4, 14, 22, 6.5 and 4 GB).
PERSONALITIES = {
    "webservice": dict(job="webservice.fio", data=4 / 8, filesize=16 << 10),
    "webservice-large": dict(job="webservice.fio", data=14 / 8, filesize=16 << 10),
    "ms_nfs": dict(job="ms_nfs.fio", data=22 / 8, filesize=34 << 10,
                   env=dict(RWMIXWRITE="58", CHURN="3")),
    "ms_nfs-small": dict(job="ms_nfs.fio", data=6.5 / 8, filesize=34 << 10,
                         env=dict(RWMIXWRITE="84", CHURN="6")),
    "varmail": dict(job="varmail.fio", data=4 / 8, filesize=16 << 10),
}
NUMJOBS = 4  # the main job's clones in every .fio file; each has NRFILES files

POLICIES = ["no-cache", "write-through", "write-back-flush", "write-back-persist",
            "ordered-write-back", "unsafe-write-back"]
SHORT = {"no-cache": "none", "write-through": "WT", "write-back-flush": "WBF",
         "write-back-persist": "WBP", "ordered-write-back": "ordered",
         "unsafe-write-back": "unsafe"}


def sh(cmd, check=True, timeout=120, **kw):
    r = subprocess.run(cmd, env=ENV, capture_output=True, text=True, timeout=timeout, **kw)
    if check and r.returncode != 0:
        raise RuntimeError("%s failed (%d): %s%s" % (" ".join(cmd), r.returncode, r.stdout,
                                                     r.stderr))
    return r.stdout


def wait_for(pred, secs, what):
    t0 = time.time()
    while time.time() - t0 < secs:
        if pred():
            return
        time.sleep(0.02)
    raise RuntimeError("timed out waiting for " + what)


def ordered_built():
    return "ordered-write-back" in sh([EMBER, "serve", "--help"])


def volume_mb():
    biggest = max(p["data"] for p in PERSONALITIES.values()) * CACHE_MB
    return int(biggest * 1.6) + 64


def nrfiles(name):
    p = PERSONALITIES[name]
    return max(8, int(p["data"] * CACHE_MB * (1 << 20) / p["filesize"] / NUMJOBS))


def fio_env(name, d, runtime):
    p = PERSONALITIES[name]
    e = dict(ENV, DIR=d, RUNTIME=str(runtime), NRFILES=str(nrfiles(name)))
    e.update(p.get("env", {}))
    return e


def make_golden(name, work):
    """ext4 with the personality's files laid out, made once, without the slow disk."""
    img = os.path.join(work, "golden-%s.img" % name)
    sh(["truncate", "-s", "%dM" % volume_mb(), img])
    sh(["mkfs.ext4", "-F", "-q", "-E", "lazy_itable_init=0,lazy_journal_init=0,nodiscard",
        img])
    mnt = os.path.join(work, "gmnt")
    os.makedirs(mnt, exist_ok=True)
    sh(["mount", "-o", "loop", img, mnt])
    try:
        subprocess.run(["fio", "--create_only=1", os.path.join(HERE, PERSONALITIES[name]["job"]),
                        "--output=/dev/null"], env=fio_env(name, mnt, 1), check=True,
                       capture_output=True, timeout=600)
        used = sh(["du", "-sm", mnt]).split()[0]
    finally:
        sh(["umount", mnt])
    return img, int(used)


class Stack:
    """One run's processes and mounts, torn down in reverse order."""

    def __init__(self, work):
        self.work = work
        self.procs = []
        self.loop = None
        self.mounted = None
        self.fuse_dir = None
        self.metrics = None

    def start(self, golden, policy, opts, disk_so):
        w = self.work
        hdd = os.path.join(w, "hdd.img")
        sh(["cp", "--sparse=always", golden, hdd])
        hsock = os.path.join(w, "hdd.sock")
        for f in (hsock, os.path.join(w, "ember.sock")):
            if os.path.exists(f):
                os.unlink(f)
        self.procs.append(subprocess.Popen(
            ["nbdkit", "-f", "-U", hsock, disk_so, "file=" + hdd] + DISK_ARGS.split(),
            env=ENV, stdout=subprocess.DEVNULL, stderr=open(os.path.join(w, "nbdkit.log"), "w")))
        wait_for(lambda: os.path.exists(hsock), 10, "nbdkit")
        uri = "nbd+unix:///?socket=" + hsock
        if policy != "no-cache":
            os.makedirs(BENCH_DIR, exist_ok=True)
            cache = os.path.join(BENCH_DIR, "thesis-cache.img")
            if os.path.exists(cache):
                os.unlink(cache)
            esock = os.path.join(w, "ember.sock")
            log = os.path.join(w, "ember.log")
            args = [EMBER, "serve", "--cache", cache, "--cache-size", "%dM" % CACHE_MB,
                    "--format-if-needed", "--backing", "disk=" + uri, "--unix", esock,
                    "--write-policy", policy, "--metrics", "127.0.0.1:0"]
            args += os.environ.get("EMBER_ARGS", "").split()
            for k in ("flush_order", "max_epochs"):
                if k in opts:
                    args += ["--" + k.replace("_", "-"), str(opts[k])]
            self.procs.append(subprocess.Popen(args, env=ENV, stdout=open(log, "w"),
                                               stderr=subprocess.STDOUT))
            wait_for(lambda: "ember serve: ready" in open(log).read(), 30, "ember serve")
            m = re.search(r"metrics (http://\S+/metrics)", open(log).read())
            self.metrics = m.group(1) if m else None
            uri = "nbd+unix:///disk?socket=" + esock
        self.fuse_dir = os.path.join(w, "fuse")
        os.makedirs(self.fuse_dir, exist_ok=True)
        dev = os.path.join(self.fuse_dir, "disk")
        self.procs.append(subprocess.Popen(["nbdfuse", dev, uri], env=ENV,
                                           stdout=subprocess.DEVNULL,
                                           stderr=subprocess.DEVNULL))
        size = volume_mb() << 20

        def up():
            try:
                return os.stat(dev).st_size == size
            except OSError:
                return False
        wait_for(up, 30, "nbdfuse")
        self.loop = sh(["losetup", "--direct-io=on", "-f", "--show", dev]).strip()
        mnt = os.path.join(w, "mnt")
        os.makedirs(mnt, exist_ok=True)
        # commit=1: ext4's journal timer (5 s by default) scaled with the thesis' 30-second
        # intervals to this bench's 1-second ones; noatime: the warm-up read writes nothing.
        sh(["mount", "-o", "noatime,commit=1" + (",discard" if opts.get("discard") else ""),
            self.loop, mnt])
        self.mounted = mnt
        return mnt

    def warm(self):
        """The thesis' create phase left the files partly on the flash cache (6.1.2): read
        every file once through the stack, so a cache starts holding what fits of them."""
        paths = [os.path.join(d, f) for d, _, files in os.walk(self.mounted) for f in files]
        # In inode order, which is about the order the golden image allocated them in, so the
        # slow disk reads nearly sequentially.
        for p in sorted(paths, key=lambda p: os.stat(p).st_ino):
            with open(p, "rb", buffering=0) as fh:
                while fh.read(1 << 20):
                    pass

    def counters(self):
        if not self.metrics:
            return {}
        c = {}
        try:
            text = urllib.request.urlopen(self.metrics, timeout=5).read().decode()
        except OSError:
            return {}
        for line in text.splitlines():
            m = re.match(r"ember_(\w+?)(_total)?(\{[^}]*\})? ([0-9.e+]+)$", line)
            if m:
                name = m.group(1)[len("cache_"):] if m.group(1).startswith("cache_") else m.group(1)
                c[name] = c.get(name, 0) + float(m.group(4))
        return c

    def stop(self):
        if self.mounted:
            subprocess.run(["umount", self.mounted], env=ENV, capture_output=True, timeout=120)
            self.mounted = None
        if self.loop:
            subprocess.run(["losetup", "-d", self.loop], env=ENV, capture_output=True)
            self.loop = None
        for p in reversed(self.procs):
            p.kill()
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        self.procs = []
        if self.fuse_dir:
            subprocess.run(["fusermount3", "-u", "-z", self.fuse_dir], env=ENV,
                           capture_output=True)
            self.fuse_dir = None


def series(prefix, secs):
    """Per-second IOPS (reads + writes, every job) from fio's averaged iops logs."""
    per = {}
    d = os.path.dirname(prefix)
    for f in os.listdir(d):
        if f.startswith(os.path.basename(prefix) + "_iops."):
            for line in open(os.path.join(d, f)):
                parts = [x.strip() for x in line.split(",")]
                if len(parts) < 3:
                    continue
                sec = (int(parts[0]) + 500) // 1000
                per[sec] = per.get(sec, 0) + int(parts[1])
    return [per.get(s, 0) for s in range(1, secs + 1)]


def run_one(cfg, golden, work, disk_so):
    name, policy, opts = cfg["pers"], cfg["policy"], cfg["opts"]
    secs, warm = cfg.get("secs", SECS), cfg.get("warm", WARM)
    st = Stack(work)
    t_setup = time.time()
    try:
        mnt = st.start(golden[name], policy, opts, disk_so)
        t0 = time.time()
        setup_s = t0 - t_setup
        st.warm()
        warm_s = time.time() - t0
        before = st.counters()
        prefix = os.path.join(work, "log", "r")
        shutil.rmtree(os.path.dirname(prefix), ignore_errors=True)
        os.makedirs(os.path.dirname(prefix))
        out = os.path.join(work, "fio.json")
        r = subprocess.run(["fio", os.path.join(HERE, PERSONALITIES[name]["job"]),
                            "--output-format=json", "--output=" + out,
                            "--write_iops_log=" + prefix, "--log_avg_msec=1000"],
                           env=fio_env(name, mnt, secs + 1), capture_output=True, text=True,
                           timeout=secs + 120)
        after = st.counters()
        fio_s = time.time() - t0 - warm_s
    finally:
        st.stop()
    total_s = time.time() - t_setup
    j = json.load(open(out))
    errors = [x["error"] for x in j["jobs"] if x["error"]]
    if r.returncode != 0 or errors:
        raise RuntimeError("fio failed on %s/%s: rc %d, errors %s: %s" % (
            name, policy, r.returncode, errors, r.stderr[-2000:]))
    # fio runs one second longer than SECS: its last logged interval is partial (the jobs
    # stop one by one), so only the first SECS intervals count.
    ios = sum(x["read"]["total_ios"] + x["write"]["total_ios"] for x in j["jobs"])
    writes = sum(x["write"]["total_ios"] for x in j["jobs"])
    ts = series(prefix, secs)
    steady = ts[warm:]
    delta = {k: after.get(k, 0) - before.get(k, 0) for k in after}
    hits = delta.get("read_hits", 0)
    misses = delta.get("read_misses", 0)
    return dict(iops=statistics.mean(steady) if steady else 0.0, series=ts, warm_s=warm_s,
                times="setup %.1f s, warm-up read %.1f s, fio %.1f s, total %.1f s" % (
                    setup_s, warm_s, fio_s, total_s),
                overall=ios / (secs + 1), write_share=writes / ios if ios else 0.0,
                read_hit_rate=hits / (hits + misses) if hits + misses else None,
                counters={k: delta.get(k, 0) for k in (
                    "read_hits", "read_misses", "write_hits", "write_misses", "evictions",
                    "invalidations", "flushed_blocks", "write_through_fallbacks",
                    "journal_commits", "flushes", "trims")})


def configs(personalities, policies):
    c = []
    for p in personalities:
        for pol in policies:
            c.append(dict(fig="6.1", pers=p, policy=pol, opts={}))
    if os.environ.get("FIGS", "all") == "6.1":
        return c
    for p in personalities:  # Figures 6.3 and 6.4: LRU flush order (6.1 gives ascending)
        for pol in ("write-back-persist", "write-back-flush"):
            c.append(dict(fig="6.3/6.4", pers=p, policy=pol, opts=dict(flush_order="lru")))
    for p in personalities:  # Figure 6.7: write-back flush with 1 and 2 dirty epochs (6.1: 4)
        if p == "webservice-large":  # not in the thesis' Figure 6.7 either
            continue
        for n in (1, 2):
            c.append(dict(fig="6.7", pers=p, policy="write-back-flush", opts=dict(max_epochs=n)))
    # TRIM: ms_nfs-small, longer runs (the thesis' pollution needs the cache to fill with
    # blocks the file system freed), with and without -o discard, for the two policies whose
    # hit rates the thesis gives (78 % persist, 49 % flush).
    if "ms_nfs-small" in personalities:
        for pol in ("write-back-flush", "write-back-persist"):
            for d in (False, True):
                c.append(dict(fig="discard", pers="ms_nfs-small", policy=pol,
                              opts=dict(discard=d, long=True), secs=LONG_SECS, warm=LONG_WARM))
    return c


def key(cfg):
    o = cfg["opts"]
    extra = "".join(",%s=%s" % (k, o[k]) for k in sorted(o))
    return "%s|%s%s" % (cfg["pers"], cfg["policy"], extra)


def main():
    for tool in ("fio", "nbdkit", "nbdfuse", "losetup", "mkfs.ext4", "fusermount3", "gcc"):
        if shutil.which(tool, path=ENV["PATH"]) is None:
            sys.exit("bench/thesis-ch6: %s is required" % tool)
    if os.geteuid() != 0:
        sys.exit("bench/thesis-ch6: needs root (loop devices, mount)")
    os.makedirs(BENCH_DIR, exist_ok=True)
    fstype = sh(["stat", "-f", "-c", "%T", BENCH_DIR]).strip()
    if fstype in ("tmpfs", "ramfs"):
        sys.exit("bench/thesis-ch6: BENCH_DIR %s is on %s; use a disk" % (BENCH_DIR, fstype))
    personalities = os.environ.get("PERSONALITIES", " ".join(PERSONALITIES)).split()
    for p in personalities:
        if p not in PERSONALITIES:
            sys.exit("bench/thesis-ch6: unknown personality %s (known: %s)" % (
                p, " ".join(PERSONALITIES)))
    policies = list(POLICIES)
    have_ordered = ordered_built()
    if not have_ordered:
        policies.remove("ordered-write-back")
    work = tempfile.mkdtemp(prefix="ember-thesis-ch6.")
    os.makedirs(OUT, exist_ok=True)
    t_start = time.time()
    try:
        disk_so = os.path.join(work, "disk.so")
        sh(["gcc", "-O2", "-fno-math-errno", "-shared", "-fPIC", "-o", disk_so,
            os.path.join(HERE, "disk.c")])
        golden, used = {}, {}
        for p in personalities:
            golden[p], used[p] = make_golden(p, work)
        print("bench/thesis-ch6: %d cores, cache %d MiB (file on %s), volume %d MiB, %d round(s) "
              "of %d s runs, steady state = seconds %d..%d, disk: %s" % (
                  os.cpu_count(), CACHE_MB, fstype, volume_mb(), ROUNDS, SECS, WARM + 1, SECS,
                  DISK_ARGS))
        for p in personalities:
            print("  %-17s data %4d MiB (%.2fx the cache; thesis %.2fx), %d files per job" % (
                p, used[p], used[p] / CACHE_MB, PERSONALITIES[p]["data"], nrfiles(p)))
        if not have_ordered:
            print("  ordered-write-back: not measured (not built in this build)")
        cfgs = configs(personalities, policies)
        results = []
        for rnd in range(1, ROUNDS + 1):
            order = cfgs if rnd % 2 else list(reversed(cfgs))
            for cfg in order:
                res = run_one(cfg, golden, work, disk_so)
                res.update(round=rnd, key=key(cfg), **cfg)
                results.append(res)
                hr = res["read_hit_rate"]
                print("round %d  %-6s %-17s %-19s %-26s %7.0f IOPS steady (%5.0f overall)%s"
                      % (rnd, cfg["fig"], cfg["pers"], cfg["policy"],
                         ",".join("%s=%s" % kv for kv in sorted(cfg["opts"].items())),
                         res["iops"], res["overall"],
                         "" if hr is None else "  read hits %.0f%%" % (100 * hr))
                      + "  (%s)" % res["times"],
                      flush=True)
        elapsed = time.time() - t_start
    finally:
        shutil.rmtree(work, ignore_errors=True)
    report(results, personalities, policies, have_ordered, elapsed)


def med(results, k):
    v = sorted(r["iops"] for r in results if r["key"] == k)
    return (statistics.median(v), v[0], v[-1]) if v else None


def per_round_ratio(results, ka, kb):
    a = {r["round"]: r["iops"] for r in results if r["key"] == ka}
    b = {r["round"]: r["iops"] for r in results if r["key"] == kb}
    v = sorted(a[k] / b[k] for k in a if k in b and b[k] > 0)
    return (statistics.median(v), v[0], v[-1]) if v else None


def fmt(m):
    return "%.0f (%.0f..%.0f)" % m if m else "-"


def report(results, personalities, policies, have_ordered, elapsed):
    print("\nFigure 6.1: IOPS after stabilization, median (min..max) over %d round(s)" % ROUNDS)
    print("%-17s" % "" + "".join("%-21s" % SHORT[p] for p in policies))
    for pers in personalities:
        print("%-17s" % pers + "".join(
            "%-21s" % fmt(med(results, "%s|%s" % (pers, pol))) for pol in policies))
    print("\nRatios (median of per-round ratios, min..max):")
    findings = []

    def ratio(pers, a, b, thesis):
        r = per_round_ratio(results, "%s|%s" % (pers, a), "%s|%s" % (pers, b))
        if r:
            def label(k):
                pol, _, extra = k.partition(",")
                extra = extra.replace(",long=True", "").replace("long=True", "")
                return SHORT[pol] + ("" if not extra else "[" + extra + "]")
            print("  %-17s %-36s %.2f (%.2f..%.2f)   thesis: %s" % (
                pers, label(a) + " / " + label(b), *r, thesis))
            findings.append(dict(pers=pers, a=a, b=b, ratio=r, thesis=thesis,
                                 label=label(a) + " / " + label(b)))
        return r
    for pers in personalities:
        ratio(pers, "write-through", "no-cache", {
            "webservice": "> 1 (all caching policies boost it significantly)",
            "webservice-large": "~1 (primary storage is the bottleneck)",
            "ms_nfs": "1.07", "ms_nfs-small": "0.91", "varmail": "~1"}[pers])
        ratio(pers, "write-back-flush", "write-through", {
            "webservice": "~1", "webservice-large": "~1", "ms_nfs": "> 1 (significantly)",
            "ms_nfs-small": "> 1 (significantly)", "varmail": "0.74"}[pers])
        ratio(pers, "write-back-persist", "write-through", {
            "webservice": "~1 (slightly below)", "webservice-large": "> 1 (marginally)",
            "ms_nfs": "> 1", "ms_nfs-small": "> 1 (much higher)", "varmail": "> 1"}[pers])
        ratio(pers, "write-back-persist", "unsafe-write-back", {
            "webservice": "~1", "webservice-large": "~1", "ms_nfs": "~1",
            "ms_nfs-small": "~1", "varmail": "< 1 (significantly)"}[pers])
        if have_ordered:
            ratio(pers, "ordered-write-back", "write-back-persist", "not in the thesis' Fig. 6.1")
    if any(r["fig"] == "6.3/6.4" for r in results):
        print("\nFigures 6.3 and 6.4: ascending / LRU flush order (median of per-round ratios)")
        for pers in personalities:
            ratio(pers, "write-back-persist", "write-back-persist,flush_order=lru", {
                "webservice": "< 1 (LRU slightly better)", "webservice-large": "> 1 (slightly)",
                "ms_nfs": "> 1 (slightly)", "ms_nfs-small": "< 1 (LRU slightly better)",
                "varmail": "1.13"}[pers])
            ratio(pers, "write-back-flush", "write-back-flush,flush_order=lru", {
                "webservice": "~1", "webservice-large": "~1 (ascending better in 2 of 5)",
                "ms_nfs": "1.39", "ms_nfs-small": "1.19", "varmail": "~1"}[pers])
    if any(r["fig"] == "6.7" for r in results):
        print("\nFigure 6.7: write-back flush, IOPS by maximum dirty epochs, median (min..max)")
        for pers in personalities:
            row = [med(results, "%s|write-back-flush,max_epochs=%d" % (pers, n)) for n in (1, 2)]
            row.append(med(results, "%s|write-back-flush" % pers))
            print("  %-17s 1: %-20s 2: %-20s 4: %-20s" % (pers, *map(fmt, row)))
        for pers in personalities:
            ratio(pers, "write-back-flush", "write-back-flush,max_epochs=1", {
                "webservice": "~1", "webservice-large": "not run (Filebench failed at 1 and 2)",
                "ms_nfs": "> 1 (significantly)", "ms_nfs-small": "> 1 (significantly)",
                "varmail": "> 1 (2 epochs best)"}[pers])
    if any(r["fig"] == "discard" for r in results):
        print("\nms_nfs-small, %d s runs (steady = seconds %d..%d), ext4 without and with -o "
              "discard (TRIM): IOPS, read hit rate, evictions, invalidations (medians)" % (
                  LONG_SECS, LONG_WARM + 1, LONG_SECS))
        for pol in ("write-back-flush", "write-back-persist"):
            for d in (False, True):
                k = "ms_nfs-small|%s,discard=%s,long=True" % (pol, d)
                rr = [r for r in results if r["key"] == k]
                if not rr:
                    continue
                hr = [r["read_hit_rate"] for r in rr if r["read_hit_rate"] is not None]
                cs = {c: statistics.median(r["counters"].get(c, 0) for r in rr)
                      for c in ("evictions", "invalidations", "trims")}
                print("  %-19s %-13s %-20s read hits %s, evictions %.0f, invalidations %.0f"
                      % (pol, "discard" if d else "no discard", fmt(med(results, k)),
                         "%.0f%%" % (100 * statistics.median(hr)) if hr else "-",
                         cs["evictions"], cs["invalidations"]))
            ratio("ms_nfs-small", pol + ",discard=True,long=True",
                  pol + ",discard=False,long=True", "no TRIM in the thesis' cache; "
                  "its hit rates: persist 78 %, flush 49 %")
    json.dump(dict(rounds=ROUNDS, secs=SECS, warm=WARM, cache_mb=CACHE_MB, disk=DISK_ARGS,
                   results=results, findings=findings, elapsed_s=elapsed),
              open(os.path.join(OUT, "ch6.json"), "w"), indent=1)
    with open(os.path.join(OUT, "ch6.csv"), "w") as f:
        f.write("round,figure,personality,policy,options,steady_iops,read_hit_rate,series\n")
        for r in results:
            f.write("%d,%s,%s,%s,%s,%.1f,%s,%s\n" % (
                r["round"], r["fig"], r["pers"], r["policy"],
                ";".join("%s=%s" % kv for kv in sorted(r["opts"].items())), r["iops"],
                "" if r["read_hit_rate"] is None else "%.3f" % r["read_hit_rate"],
                " ".join(str(x) for x in r["series"])))
    with open(os.path.join(OUT, "ch6.md"), "w") as f:
        f.write("| personality | " + " | ".join(policies) + " |\n")
        f.write("|---" * (len(policies) + 1) + "|\n")
        for pers in personalities:
            f.write("| %s | %s |\n" % (pers, " | ".join(
                fmt(med(results, "%s|%s" % (pers, pol))) for pol in policies)))
        f.write("\n| personality | ratio | ember: median (min..max) | thesis |\n"
                "|---|---|---|---|\n")
        for x in findings:
            f.write("| %s | %s | %.2f (%.2f..%.2f) | %s |\n" % (
                x["pers"], x["label"], *x["ratio"], x["thesis"]))
    try:
        import plots
        plots.draw(results, personalities, policies, OUT)
        print("\nwrote %s/ch6.json, ch6.csv and thesis_fig6_*.png" % OUT)
    except ImportError as e:
        print("\nbench/thesis-ch6: no PNGs (%s); wrote %s/ch6.json, ch6.csv" % (e, OUT))
    print("elapsed %.0f s" % elapsed)
    r = per_round_ratio(results, "varmail|write-back-persist", "varmail|write-through")
    sys.path.insert(0, os.path.join(ROOT, "bench", "lib"))
    from record import Record
    rec = Record("thesis-ch6", peer="no cache (nbdkit disk model) and write-through",
                 target="> 1.05",
                 title="Qin's thesis chapter 6 on the real cache: ext4 over ember serve, fio "
                       "personalities, every write policy",
                 ratio_of="varmail: write-back-persist / write-through IOPS, median of "
                          "per-round ratios")
    for k in sorted({x["key"] for x in results}):
        rec.figure(k.replace("|", " "), [x["iops"] for x in results if x["key"] == k],
                   unit="IOPS", who="peer" if k.endswith("|no-cache") else "ember")
    rec.reproduces("Qin, write policies thesis", "Figures 6.1-6.7: ratios of steady IOPS",
                   ["personality", "ratio", "ember: median (min..max)", "thesis"],
                   [[x["pers"], x["label"], "%.2f (%.2f..%.2f)" % tuple(x["ratio"]),
                     x["thesis"]] for x in findings])
    rec.note("%d round(s) of %d s runs, cache %d MiB, disk: %s" % (ROUNDS, SECS, CACHE_MB,
                                                                   DISK_ARGS))
    rec.write(round(r[0], 2) if r else None)
    if r:
        print("varmail: write-back-persist / write-through = %.2f (min %.2f, max %.2f); target "
              "> 1.05 (thesis Fig. 6.1, section 6.5: persist 'significantly' above "
              "write-through on sync-heavy workloads): %s"
              % (*r, "met" if r[0] > 1.05 else "NOT MET"))
        print("ratio: %.2f" % r[0])


if __name__ == "__main__":
    main()
