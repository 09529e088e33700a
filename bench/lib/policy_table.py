"""The replacement-policy table of docs/reference/laboratory.md: its measured columns.

The table lies between the markers BEGIN and END. Its first four columns (policy, paper,
parameters, exactness against libCacheSim) are written by hand in the page; `make report`
(bench/lib/report.py) rewrites the last three from the latest bench results:

- speed against libCacheSim: ember / libCacheSim throughput at 1 % and 10 % of the blocks,
  each the best of the rounds over the best of the rounds, from bench/sim-throughput (LRU,
  FIFO, CLOCK, SIEVE, ARC, S3-FIFO, 2Q) and bench/sim-policies (the others; a policy
  measured in libCacheSim's form names it, CAR, which has no peer, gives ember's throughput);
- bytes per cached block in the simulator: the policy's peak heap per resident block at 10 %
  of the blocks (crates/sim/examples/policy_memory.rs), from the same benches' notes;
- the real cache: the all-in RSS per cached block of `ember serve` filled under the policy
  (bench/serve-scale's per-policy rows: the filled server's anonymous RSS over a ready
  server's, per block); where no such row is recorded, an estimate: the engine's own bytes
  per cache block (ENGINE_BYTES, the sizing docs/reference/limits.md gives) plus the
  simulator's bytes of the policy.

A policy without a recorded figure says so. `render` is a pure function of the page and the
results, so a test can check that the page holds what it writes.
"""

from __future__ import annotations

import re

BEGIN = ("<!-- policy table: the last three columns are written by `make report` "
         "(bench/lib/policy_table.py) from bench/results/; edit the others here -->")
END = "<!-- end of the policy table -->"

# The benches whose results fill the table.
BENCHES = ("sim-throughput", "sim-policies", "serve-scale")

# The engine's state per cache block under LRU (docs/reference/limits.md: the index, each
# block's key, the recency list and free list, flags, pins, persist marks), sized at open.
ENGINE_BYTES = 43

COLUMNS = ["policy", "paper", "parameters (default)", "against libCacheSim 0.3.5",
           "speed against libCacheSim (1 % / 10 % of the blocks)",
           "bytes per cached block, simulator",
           "bytes per cached block, ember serve (all-in RSS)"]

# What a policy's simulator bytes leave out or depend on.
MEMORY_NOTES = {
    "lfu": "+ 24 a distinct count",
    "lfuda": "+ 24 a distinct count",
    "lecar": "+ 24 a distinct count",
    "cacheus": "+ 24 a distinct count",
    "lruk": "k=2, unique priorities",
}

# LHD's class tables: 16 classes x 20,000 ages x 3 counters of 4 bytes, whatever the capacity.
LHD_TABLES = 3_840_000

NOT_RECORDED = "not recorded yet"

SERVE_FIGURE = re.compile(r"all-in RSS per block, (?P<spec>\S+), (?P<m>[0-9.]+)M blocks")

MEMORY_NOTE = re.compile(r"^(?P<spec>\S+) memory \(counting allocator, 10% of the blocks\): "
                         r".*capacity (?P<cap>\d+) blocks.* (?P<bytes>[0-9.]+) bytes per cached "
                         r"block$")


def base(spec: str) -> str:
    """The policy name of a spec (`lfuda:lcs` -> `lfuda`)."""
    return spec.split(":", 1)[0]


def measurements(latest: dict[str, dict]) -> dict[str, dict]:
    """Per policy name: its measured spec, speed ratios and memory, from the benches' latest
    results (a later bench in BENCHES wins for a policy both measure)."""
    out: dict[str, dict] = {}
    for bench in BENCHES:
        doc = latest.get(bench)
        if doc is None:
            continue
        figures = {f["name"]: f for f in doc.get("figures", [])}
        for name, f in figures.items():
            m = re.fullmatch(r"(\S+) (1|10)% ember", name)
            if not m or not f.get("values"):
                continue
            spec, pct = m.group(1), int(m.group(2))
            row = out.setdefault(base(spec), {})
            row["spec"] = spec
            peer = figures.get(f"{spec} {pct}% libCacheSim")
            if peer and peer.get("values"):
                row[pct] = ("ratio", max(f["values"]) / max(peer["values"]))
            else:
                row[pct] = ("alone", max(f["values"]))
        for name, f in figures.items():
            m = SERVE_FIGURE.fullmatch(name)
            if m and f.get("values"):
                row = out.setdefault(base(m.group("spec")), {})
                row["serve"] = (f["values"][0], m.group("m"))
        for note in doc.get("notes", []):
            m = MEMORY_NOTE.match(note)
            if m:
                row = out.setdefault(base(m.group("spec")), {})
                row["memory"] = (float(m.group("bytes")), int(m.group("cap")), m.group("spec"))
    return out


def speed(name: str, row: dict) -> str:
    if 1 not in row and 10 not in row:
        return "-" if name == "opt" else NOT_RECORDED
    kinds = {row[p][0] for p in (1, 10) if p in row}
    cells = [f"{row[p][1]:.1f}" if p in row else "-" for p in (1, 10)]
    text = " / ".join(cells)
    if kinds == {"alone"}:
        text = f"no peer; ember {text} M req/s"
    if row.get("spec", name) != name:
        text += f" (`{row['spec']}`)"
    return text


def memory(name: str, row: dict) -> tuple[str, str]:
    if "memory" not in row:
        return NOT_RECORDED, NOT_RECORDED
    b, cap, spec = row["memory"]
    sim = f"{b:.0f}"
    notes = []
    if name in MEMORY_NOTES:
        notes.append(MEMORY_NOTES[name])
    if name == "lhd":
        notes.append(f"{LHD_TABLES / cap:.0f} of them the fixed {LHD_TABLES / 1e6:.2f} MB of "
                     f"class tables at {cap:,} blocks")
    if spec != name:
        notes.append(f"`{spec}`")
    if notes:
        sim += f" ({'; '.join(notes)})"
    if name == "opt":
        real = "simulation only"
    elif "serve" in row:
        real = f"{row['serve'][0]:.0f} (at {row['serve'][1]} M blocks)"
    elif name == "lru":
        real = f"estimate {ENGINE_BYTES} (the engine's recency list)"
    else:
        real = f"estimate {ENGINE_BYTES + round(b)} (the engine's {ENGINE_BYTES} + the policy's)"
    if name == "lirs":
        real += (" (the paper's form; `lirs:lcs` is simulation only)" if "serve" in row
                 else " (`lirs:lcs`: simulation only)")
    return sim, real


def split_row(line: str) -> list[str]:
    """The cells of a Markdown table row (`\\|` stays inside its cell)."""
    cells, cur, i, s = [], "", 0, line.strip()[1:-1]
    while i < len(s):
        if s[i] == "\\" and i + 1 < len(s) and s[i + 1] == "|":
            cur += "\\|"
            i += 2
            continue
        if s[i] == "|":
            cells.append(cur.strip())
            cur = ""
        else:
            cur += s[i]
        i += 1
    cells.append(cur.strip())
    return cells


def render(page: str, latest: dict[str, dict]) -> str:
    """`page` with the policy table's measured columns written from `latest` (the latest
    result of each bench). Raises ValueError if the page has no table between the markers."""
    start, end = page.find(BEGIN), page.find(END)
    if start < 0 or end < start:
        raise ValueError("no policy table between its markers")
    body = page[start + len(BEGIN):end].strip("\n").splitlines()
    rows = [split_row(line) for line in body if line.startswith("|")][2:]
    found = measurements(latest)
    out = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for cells in rows:
        name = cells[0].strip("`")
        row = found.get(name, {})
        sim, real = memory(name, row)
        out.append("|" + "|".join(f" {c} " if c else " "
                                  for c in cells[:4] + [speed(name, row), sim, real]) + "|")
    table = "\n".join(out)
    return page[:start] + BEGIN + "\n\n" + table + "\n\n" + page[end:]
