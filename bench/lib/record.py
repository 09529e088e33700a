#!/usr/bin/env python3
"""Record a benchmark's result as JSON: bench/results/<bench>-<commit>-<machine>.json.

Every bench in bench/ records the same way, through this one helper, so `make report`
(bench/lib/report.py) can turn the latest result of each into docs/benchmarks.md. A result
holds the figures (each with its spread over the rounds: min, max, median, rounds and the
values), the `ratio:` the bench prints last with what it divides and its target, the peer,
the machine (CPU model, cores, memory, kernel, from /proc), the commit, the date and the
command line.

From Python (the benches written in Python):

    sys.path.insert(0, str(ROOT / "bench" / "lib"))
    from record import Record
    rec = Record("sim-throughput", peer="libCacheSim", target=">= 5",
                 ratio_of="ember / libCacheSim throughput, the worst cell")
    rec.figure("LRU 1% ember", [9.1, 9.3, 9.2], unit="M req/s", who="ember")
    rec.write(ratio)

From the shell (the benches written in bash):

    REC=$(bench/lib/record.py start serve --peer "nbdkit" --target ">= 1" \
          --ratio-of "ember / nbdkit-file IOPS" -- "$0" "$@")
    bench/lib/record.py figure "$REC" "ember iodepth 1" --unit IOPS --who ember 1 2 3
    bench/lib/record.py finish "$REC" 0.93

`start` prints the path of a small state file that `figure` and `note` add to and `finish`
turns into the result (and removes). Env: EMBER_BENCH_RESULTS (directory, default
bench/results), EMBER_BENCH_MACHINE (the machine's name in the file name, default the host
name).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = 1


def results_dir() -> Path:
    return Path(os.environ.get("EMBER_BENCH_RESULTS") or ROOT / "bench" / "results")


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def machine() -> dict:
    """The machine the bench ran on, from /proc (what can be read; nothing is guessed)."""
    cpu = ""
    for line in _read("/proc/cpuinfo").splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    mem_kib = 0
    m = re.search(r"^MemTotal:\s+(\d+) kB", _read("/proc/meminfo"), re.M)
    if m:
        mem_kib = int(m.group(1))
    name = os.environ.get("EMBER_BENCH_MACHINE") or socket.gethostname().split(".")[0]
    return {
        "name": re.sub(r"[^A-Za-z0-9_.-]", "_", name) or "machine",
        "cpu": cpu,
        "cores": os.cpu_count() or 0,
        "memory_gib": round(mem_kib / 1048576, 1),
        "kernel": _read("/proc/sys/kernel/osrelease").strip() or os.uname().release,
    }


def commit() -> tuple[str, bool]:
    """The checked-out commit and whether tracked files differ from it."""
    def git(*args: str) -> str:
        try:
            return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True,
                                  text=True, check=True).stdout.strip()
        except (OSError, subprocess.CalledProcessError):
            return ""
    head = git("rev-parse", "HEAD") or "unknown"
    dirty = bool(git("status", "--porcelain", "--untracked-files=no"))
    return head, dirty


def parse_target(target: str | None) -> tuple[str, float] | None:
    """">= 5" -> (">=", 5.0); None for no target."""
    if not target:
        return None
    m = re.fullmatch(r"\s*(<=|>=|<|>|==)\s*(-?[0-9.]+)\s*", target)
    if not m:
        raise ValueError(f"a target is an operator and a number (e.g. '>= 5'), not {target!r}")
    return m.group(1), float(m.group(2))


def meets(value: float | None, target: str | None) -> bool | None:
    """Whether `value` meets `target`; None when there is no target or no value."""
    t = parse_target(target)
    if t is None or value is None:
        return None
    op, bound = t
    return {"<=": value <= bound, ">=": value >= bound, "<": value < bound,
            ">": value > bound, "==": value == bound}[op]


def spread(values: list[float]) -> dict:
    """min, max, median and rounds of a figure's values."""
    v = [float(x) for x in values]
    if not v:
        return {"rounds": 0, "min": None, "max": None, "median": None, "values": []}
    return {"rounds": len(v), "min": min(v), "max": max(v), "median": statistics.median(v),
            "values": v}


class Record:
    """One run of one bench, written as JSON by `write`."""

    def __init__(self, bench: str, *, title: str | None = None, peer: str | None = None,
                 target: str | None = None, ratio_of: str | None = None,
                 argv: list[str] | None = None):
        parse_target(target)
        self.data = {
            "schema": SCHEMA,
            "bench": bench,
            "title": title,
            "peer": peer,
            "ratio": {"value": None, "of": ratio_of, "target": target, "met": None},
            "figures": [],
            "notes": [],
            "command": list(argv if argv is not None else sys.argv),
            "started": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        }

    def figure(self, name: str, values: list[float], *, unit: str | None = None,
               who: str | None = None, target: str | None = None) -> None:
        """A measured quantity over the rounds. `who` says whose it is (`ember`, `peer`, or
        `ratio` for a ratio computed round by round); `target` is its own target, if any."""
        s = spread([x for x in values if x is not None])
        entry = {"name": name, "who": who, "unit": unit, **s}
        if target:
            entry["target"] = target
            entry["met"] = meets(s["median"], target)
        self.data["figures"].append(entry)

    def reproduces(self, paper: str, what: str, columns: list[str],
                   rows: list[list]) -> None:
        """A published table or figure beside ember's numbers: `columns` names the cells of
        each row (e.g. case, ember, paper); docs/reproductions.md shows it."""
        self.data.setdefault("reproductions", []).append(
            {"paper": paper, "what": what, "columns": columns, "rows": rows})

    def note(self, text: str) -> None:
        self.data["notes"].append(text)

    def write(self, ratio: float | None) -> Path:
        """Write the result; returns its path (also printed on stderr, so `ratio:` stays last
        on stdout)."""
        head, dirty = commit()
        mach = machine()
        d = dict(self.data)
        d["ratio"] = dict(d["ratio"], value=ratio, met=meets(ratio, d["ratio"]["target"]))
        d["commit"] = head
        d["dirty"] = dirty
        d["date"] = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
        d["machine"] = mach
        out = results_dir()
        out.mkdir(parents=True, exist_ok=True)
        path = out / f"{d['bench']}-{head[:12]}-{mach['name']}.json"
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(d, indent=2) + "\n")
        tmp.replace(path)
        print(f"{d['bench']}: recorded {path}", file=sys.stderr)
        return path


def _numbers(values: list[str]) -> list[float]:
    """The numeric values of a shell list ("-" and empty ones are not measurements)."""
    out = []
    for v in values:
        try:
            out.append(float(v))
        except ValueError:
            pass
    return out


def load(state: str) -> Record:
    """The result a shell bench's `start` began (its state file)."""
    rec = Record.__new__(Record)
    rec.data = json.loads(Path(state).read_text())
    return rec


def _save(rec: Record, state: str) -> None:
    Path(state).write_text(json.dumps(rec.data))


def _parser(cmd: str) -> argparse.ArgumentParser:
    """The arguments of one subcommand (each parsed intermixed, so values may follow
    options)."""
    ap = argparse.ArgumentParser(prog=f"record.py {cmd}")
    if cmd == "start":
        ap.add_argument("bench")
        for opt in ("--title", "--peer", "--target", "--ratio-of"):
            ap.add_argument(opt)
    elif cmd in ("figure", "grep"):
        ap.add_argument("state")
        ap.add_argument("name")
        if cmd == "grep":
            ap.add_argument("log")
            ap.add_argument("regex")
        for opt in ("--unit", "--who", "--target"):
            ap.add_argument(opt)
        if cmd == "figure":
            ap.add_argument("values", nargs="*")
    elif cmd == "note":
        ap.add_argument("state")
        ap.add_argument("text")
    elif cmd == "finish":
        ap.add_argument("state")
        ap.add_argument("ratio", nargs="?")
    return ap


USAGE = """usage: record.py start BENCH [--title T] [--peer P] [--target T] [--ratio-of T] -- ARGV...
       record.py figure STATE NAME [--unit U] [--who W] [--target T] VALUES...
       record.py grep STATE NAME LOG REGEX [--unit U] [--who W] [--target T]
       record.py note STATE TEXT
       record.py finish STATE [RATIO]"""


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in ("start", "figure", "grep", "note", "finish"):
        print(USAGE, file=sys.stderr)
        return 2
    cmd, argv = argv[0], argv[1:]
    # `start ... -- ARGV`: the bench's own command line is not parsed here.
    bench_argv: list[str] = []
    if cmd == "start" and "--" in argv:
        i = argv.index("--")
        argv, bench_argv = argv[:i], argv[i + 1:]
    a = _parser(cmd).parse_intermixed_args(argv)
    if cmd == "start":
        rec = Record(a.bench, title=a.title, peer=a.peer, target=a.target, ratio_of=a.ratio_of,
                     argv=bench_argv)
        fd, state = tempfile.mkstemp(prefix=f"ember-record-{a.bench}.", suffix=".json")
        os.close(fd)
        _save(rec, state)
        print(state)
        return 0
    rec = load(a.state)
    if cmd == "figure":
        rec.figure(a.name, _numbers(a.values), unit=a.unit, who=a.who, target=a.target)
    elif cmd == "grep":
        pattern = re.compile(a.regex)
        values = [m.group(1) for line in Path(a.log).read_text().splitlines()
                  if (m := pattern.search(line))]
        if not values:
            print(f"record: no line of {a.log} matches {a.regex!r}", file=sys.stderr)
        rec.figure(a.name, _numbers(values), unit=a.unit, who=a.who, target=a.target)
    elif cmd == "note":
        rec.note(a.text)
    elif cmd == "finish":
        ratio = _numbers([a.ratio] if a.ratio is not None else [])
        rec.write(ratio[0] if ratio else None)
        os.unlink(a.state)
        return 0
    _save(rec, a.state)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
