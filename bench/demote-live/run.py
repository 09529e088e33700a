#!/usr/bin/env python3
"""bench/demote-live: Wong & Wilkes' DEMOTE between two real `ember serve` tiers.

Part 1, Table 2 live: for RANDOM and ZIPF (`ember trace gen ww-random|ww-zipf`, N_c = N_a =
the capacity of a `mem:MEM` cache), schemes NONE-LRU, DEMOTE-LRU and DEMOTE: a client tier
(`--demote`, mem cache) over an array tier (`--array-scheme`, mem cache) over a file backing;
the warm-up requests are replayed first and left out (counters scraped before and after the
timed requests, as the paper reports only the timed READS). Prints the live client and array
hit rates beside `ember demote` at the same sizes and warm-up, and the paper's numbers.

Part 2, latency: RANDOM again with the backing behind nbdkit's delay filter (rdelay=DELAY),
NONE-LRU and DEMOTE alternately, ROUNDS rounds; the mean READ latency at the client as
`ember replay` measures it (queue depth 1), over the timed requests. Prints each round, the
medians and spreads, and last `ratio: X` = NONE-LRU mean latency / DEMOTE mean latency
(median of the per-round ratios).

Records the result in bench/results/ (bench/lib/record.py).

Env: MEM (cache size of each tier, default 70168K: 16384 blocks, the paper's N_c = N_a),
MULT (timed requests = MULT x working set, default 10, the paper's), LAT_MULT (the same for
part 2, default 2), DELAY (default 3ms), ROUNDS (default 3), PARTS ("table latency"), EMBER.
"""
import json, os, re, shutil, signal, statistics, subprocess, sys, tempfile, time, urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EMBER = os.environ.get("EMBER", os.path.join(ROOT, "target/release/ember"))
MEM = os.environ.get("MEM", "70168K")
MULT = os.environ.get("MULT", "10")
LAT_MULT = os.environ.get("LAT_MULT", "2")
DELAY = os.environ.get("DELAY", "3ms")
ROUNDS = int(os.environ.get("ROUNDS", "3"))
PARTS = os.environ.get("PARTS", "table latency").split()
PAPER = {"ww-random": (50, {"none-lru": 8, "demote-lru": 21, "demote": 46}),
         "ww-zipf": (86, {"none-lru": 2, "demote-lru": 4, "demote": 9})}
WORK = tempfile.mkdtemp(prefix="ember-demote-live.")
sys.path.insert(0, os.path.join(ROOT, "bench", "lib"))
from record import Record  # noqa: E402
REC = Record("demote-live", peer="ember NONE-LRU tiers", target=">= 3",
             title="Wong & Wilkes' DEMOTE between two live ember serve tiers",
             ratio_of="NONE-LRU mean READ latency / DEMOTE mean READ latency (median of "
                      "per-round ratios)")
PROCS = []


def serve(args):
    p = subprocess.Popen([EMBER, "serve", *args, "--listen", "127.0.0.1:0", "--metrics", "127.0.0.1:0"],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    PROCS.append(p)
    out, nbd, metrics = [], None, None
    for line in p.stdout:
        out.append(line)
        m = re.search(r"nbd://([^/ ]+)/", line)
        nbd = nbd or (m and m.group(1))
        m = re.search(r"metrics (http://\S+)", line)
        metrics = metrics or (m and m.group(1))
        if line.strip() == "ember serve: ready":
            return p, nbd, metrics, "".join(out)
    sys.exit("ember serve failed:\n" + "".join(out))


def stop(p):
    p.send_signal(signal.SIGTERM)
    p.wait(60)
    PROCS.remove(p)


def scrape(url):
    text = urllib.request.urlopen(url).read().decode()
    vals = {}
    for line in text.splitlines():
        if line.startswith("#") or not line:
            continue
        name, value = line.rsplit(" ", 1)
        name = name.split("{")[0]
        vals[name] = vals.get(name, 0.0) + float(value)
    return vals


def gen(workload, cap, mult):
    path = os.path.join(WORK, f"{workload}.csv")
    out = subprocess.run([EMBER, "trace", "gen", workload, "--client-blocks", str(cap), "--array-blocks", str(cap),
                          "--timed-multiplier", mult, "-o", path], check=True, capture_output=True, text=True)
    warm = int(re.search(r"warm-up: (\d+) requests", out.stdout + out.stderr).group(1))
    lines = open(path).read().splitlines(keepends=True)
    for name, part in (("warm", lines[:warm]), ("timed", lines[warm:])):
        open(os.path.join(WORK, f"{workload}.{name}.csv"), "w").writelines(part)
    return path, warm


def replay(trace, nbd):
    out = subprocess.run([EMBER, "replay", trace, "--server", f"nbd://{nbd}", "--queue-depth", "1",
                          "--connections", "1", "--json"], check=True, capture_output=True, text=True)
    d = json.loads(out.stdout)
    assert d["verification"]["reads_failed"] == 0, d["verification"]
    return d


def tiers(workload, scheme, backing):
    a, a_nbd, a_m, _ = serve(["--cache", f"mem:{MEM}", "--backing", backing, "--array-scheme", scheme])
    c, c_nbd, c_m, said = serve(["--cache", f"mem:{MEM}", "--backing", f"client0_0=nbd://{a_nbd}/disk", "--demote"])
    replay(os.path.join(WORK, f"{workload}.warm.csv"), c_nbd)
    c0, a0 = scrape(c_m), scrape(a_m)
    d = replay(os.path.join(WORK, f"{workload}.timed.csv"), c_nbd)
    c1, a1 = scrape(c_m), scrape(a_m)
    stop(c)
    stop(a)
    diff = lambda x, y, k: y.get(k, 0) - x.get(k, 0)
    reads = diff(c0, c1, "ember_cache_read_hits_total") + diff(c0, c1, "ember_cache_read_misses_total")
    return {
        "client": 100 * diff(c0, c1, "ember_cache_read_hits_total") / reads,
        "array": 100 * diff(a0, a1, "ember_cache_read_hits_total") / reads,
        "stored": diff(a0, a1, "ember_cache_demotes_stored_total"),
        "dropped": diff(c0, c1, "ember_cache_demotes_dropped_total"),
        "mean_us": d["ops"][0]["latency"]["mean_us"],
        "said": said,
    }


def capacity():
    p, _, m, _ = serve(["--cache", f"mem:{MEM}", "--backing", f"disk={BACKING}"])
    cap = int(scrape(m)["ember_cache_capacity_blocks"])
    stop(p)
    return cap


def simulate(trace, cap, warm, scheme):
    out = os.path.join(WORK, "sim.json")
    subprocess.run([EMBER, "demote", trace, "--scheme", scheme, "--client-size", str(cap), "--array-size", str(cap),
                    "--warmup", str(warm), "--quiet", "--json", out], check=True, capture_output=True)
    want = scheme.replace("-", "")
    runs = json.load(open(out))["schemes"]
    c = next(r for r in runs if r["scheme"].lower() == want)["result"]["clients"][0]
    return 100 * c["client_hits"] / c["reads"], 100 * sum(c["array_hits"]) / c["reads"]


def main():
    global BACKING
    BACKING = os.path.join(WORK, "disk.img")
    with open(BACKING, "wb") as f:
        f.truncate(1 << 30)
    cap = capacity()
    print(f"bench/demote-live: N_c = N_a = {cap} blocks (mem:{MEM} each), MULT {MULT}, LAT_MULT {LAT_MULT}")
    if "table" in PARTS:
        print(f"{'workload':10} {'scheme':11} {'client live/sim/paper':>24} {'array live/sim/paper':>24} stored dropped")
        table = []
        for workload in ("ww-random", "ww-zipf"):
            trace, warm = gen(workload, cap, MULT)
            for scheme in ("none-lru", "demote-lru", "demote"):
                live = tiers(workload, scheme, f"disk={BACKING}")
                sc, sa = simulate(trace, cap, warm, scheme)
                pc, pa = PAPER[workload][0], PAPER[workload][1][scheme]
                table.append([workload, scheme, f"{live['client']:.2f}", f"{sc:.2f}", pc,
                              f"{live['array']:.2f}", f"{sa:.2f}", pa])
                print(f"{workload:10} {scheme:11} {live['client']:7.2f} {sc:7.2f} {pc:7} %"
                      f" {live['array']:7.2f} {sa:7.2f} {pa:7} % {live['stored']:6.0f} {live['dropped']:4.0f}",
                      flush=True)
        REC.reproduces("Wong & Wilkes, USENIX ATC 2002", "Table 2: client and array hit rates (%)",
                       ["workload", "scheme", "client live", "client sim", "client paper",
                        "array live", "array sim", "array paper"], table)
    ratio = None
    if "latency" in PARTS:
        shutil.which("nbdkit") or sys.exit("bench/demote-live: nbdkit is required")
        sock, pid = os.path.join(WORK, "nbdkit.sock"), os.path.join(WORK, "nbdkit.pid")
        subprocess.run(["nbdkit", "-P", pid, "-U", sock, "--filter=delay", "file", BACKING, f"rdelay={DELAY}"],
                       check=True)
        for _ in range(200):
            if os.path.exists(sock):
                break
            time.sleep(0.05)
        gen("ww-random", cap, LAT_MULT)
        backing = f"disk=nbd+unix:///?socket={sock}"
        means = {"none-lru": [], "demote": []}
        ratios = []
        try:
            for r in range(ROUNDS):
                order = ["none-lru", "demote"] if r % 2 == 0 else ["demote", "none-lru"]
                got = {s: tiers("ww-random", s, backing) for s in order}
                for s in order:
                    means[s].append(got[s]["mean_us"])
                ratios.append(got["none-lru"]["mean_us"] / got["demote"]["mean_us"])
                print(f"round {r + 1}: NONE-LRU {got['none-lru']['mean_us'] / 1000:.3f} ms "
                      f"(array {got['none-lru']['array']:.1f} %), DEMOTE {got['demote']['mean_us'] / 1000:.3f} ms "
                      f"(array {got['demote']['array']:.1f} %), ratio {ratios[-1]:.2f}", flush=True)
        finally:
            subprocess.run(["kill", open(pid).read().strip()])
        for s, v in means.items():
            print(f"{s}: mean READ latency median {statistics.median(v) / 1000:.3f} ms "
                  f"({min(v) / 1000:.3f}..{max(v) / 1000:.3f})")
        print(f"ratio spread: {min(ratios):.2f}..{max(ratios):.2f}")
        for s, v in means.items():
            REC.figure(f"{s} mean READ latency", [x / 1000 for x in v], unit="ms",
                       who="peer" if s == "none-lru" else "ember")
        REC.figure("NONE-LRU / DEMOTE latency", ratios, who="ratio")
        ratio = statistics.median(ratios)
    REC.note(f"N_c = N_a = {cap} blocks (mem:{MEM} each), MULT {MULT}, LAT_MULT {LAT_MULT}, "
             f"DELAY {DELAY}, {ROUNDS} rounds")
    REC.write(None if ratio is None else round(ratio, 2))
    if ratio is not None:
        print(f"ratio: {ratio:.2f}")


try:
    main()
finally:
    for p in PROCS:
        p.kill()
    shutil.rmtree(WORK, ignore_errors=True)
