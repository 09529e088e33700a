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

The checker (`Model`) tracks, per 512-byte sector, the set of values the NBD contract allows:

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
import errno
import json
import multiprocessing as mp
import os
import random
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from array import array

try:
    import nbd  # python3-libnbd, installed by scripts/setup.sh
except ImportError:  # a pyenv or venv python3 without the Debian module: use the system one
    if os.path.exists("/usr/bin/python3") and os.path.realpath(sys.executable) != os.path.realpath(
        "/usr/bin/python3"
    ):
        os.execv("/usr/bin/python3", ["/usr/bin/python3"] + sys.argv)
    raise

SECTOR = 512
MAGIC = b"EMBRSOAK"
ZERO = -1  # the value "all zeros"; generations are >= 0, 0 being the prefill
ZEROS = bytes(SECTOR)
MAX_LEN_SECTORS = 128  # 64 KiB
VERIFY_CHUNK = 256 * 1024

# ----------------------------------------------------------------------------------------
# Sector contents


def stamp(export: int, sector: int, gen: int) -> bytes:
    """The 512 bytes generation `gen` of `sector` of export `export` holds."""
    if gen == ZERO:
        return ZEROS
    return struct.pack("<8sQQQ", MAGIC, export, sector, gen) * (SECTOR // 32)


def describe(data: bytes) -> str:
    """What a sector that failed its check holds, for the report."""
    if data == ZEROS:
        return "zeros"
    head = data[:32]
    magic, export, sector, gen = struct.unpack("<8sQQQ", head)
    if magic == MAGIC:
        whole = head * (SECTOR // 32) == data
        return f"stamp(export {export}, sector {sector}, gen {gen}){'' if whole else ' torn'}"
    return "foreign bytes " + data[:16].hex()


def fill(export: int, first: int, gens) -> bytes:
    """Contents of consecutive sectors from `first` holding generations `gens`."""
    return b"".join(stamp(export, first + i, g) for i, g in enumerate(gens))


# ----------------------------------------------------------------------------------------
# The checker


class Model:
    """What each sector of a client's region may hold (see the module doc).

    `cur`: the value while the server runs, `multi` the sectors where it is one of several.
    `dur`/`dur_multi`: the values as of the last acknowledged FLUSH. `pend`: values written
    since (sector -> set). All indices are absolute sector numbers of the export.
    """

    def __init__(self, export: int, lo: int, n: int):
        self.export, self.lo, self.n = export, lo, n
        self.cur = array("q", [0]) * n
        self.multi: dict[int, set] = {}
        self.dur = array("q", [0]) * n
        self.dur_multi: dict[int, set] = {}
        self.pend: dict[int, set] = {}
        self.quarantine: dict[int, float] = {}  # sector -> until when a stray write may land

    def cur_set(self, s: int) -> set:
        m = self.multi.get(s)
        return set(m) if m is not None else {self.cur[s - self.lo]}

    def allowed_after_crash(self, s: int) -> set:
        m = self.dur_multi.get(s)
        base = set(m) if m is not None else {self.dur[s - self.lo]}
        return base | self.pend.get(s, set())

    def written(self, first: int, gens, certain: bool, fua: bool = False):
        """A write of `gens` (or ZERO) from sector `first`: acknowledged (`certain`) or not."""
        for i, g in enumerate(gens):
            s = first + i
            if certain:
                self.cur[s - self.lo] = g
                self.multi.pop(s, None)
                if fua:
                    self.dur[s - self.lo] = g
                    self.dur_multi.pop(s, None)
                    self.pend.pop(s, None)
                    continue
            else:
                self.multi[s] = self.cur_set(s) | {g}
            self.pend.setdefault(s, set()).add(g)

    def trimmed(self, first: int, n: int):
        """A TRIM, acknowledged or not: old value or zeros."""
        self.written(first, [ZERO] * n, certain=False)

    def flushed(self):
        self.dur = array("q", self.cur)
        self.dur_multi = {s: set(v) for s, v in self.multi.items()}
        self.pend.clear()

    def pin(self, s: int, value: int):
        self.cur[s - self.lo] = value
        self.multi.pop(s, None)

    def quarantined(self, first: int, n: int, now: float) -> bool:
        if not self.quarantine:
            return False
        for s in range(first, first + n):
            t = self.quarantine.get(s)
            if t is not None:
                if t > now:
                    return True
                del self.quarantine[s]
        return False

    def value_of(self, s: int, data: bytes, candidates) -> int | None:
        """Which candidate value `data` is, or None."""
        for g in candidates:
            if data == stamp(self.export, s, g):
                return g
        return None


# ----------------------------------------------------------------------------------------
# Raw NBD (for disconnects a library would not do)

NBD_OPT_EXPORT_NAME = 1
REQ_MAGIC = 0x25609513
CMD_READ, CMD_WRITE = 0, 1


def raw_connect(sock_path: str, export: str, timeout: float = 10.0):
    """Fixed-newstyle handshake with NBD_OPT_EXPORT_NAME; returns the socket."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    s.connect(sock_path)
    hello = recv_exact(s, 18)
    if hello[:16] != b"NBDMAGICIHAVEOPT":
        raise OSError(f"bad greeting {hello[:16]!r}")
    (hflags,) = struct.unpack(">H", hello[16:])
    no_zeroes = hflags & 2
    s.sendall(struct.pack(">I", 1 | (2 if no_zeroes else 0)))
    name = export.encode()
    s.sendall(b"IHAVEOPT" + struct.pack(">II", NBD_OPT_EXPORT_NAME, len(name)) + name)
    recv_exact(s, 10 if no_zeroes else 134)
    return s


def recv_exact(s, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise OSError("connection closed by the server")
        buf += chunk
    return buf


def request(cmd: int, handle: int, offset: int, length: int) -> bytes:
    return struct.pack(">IHHQQI", REQ_MAGIC, 0, cmd, handle, offset, length)


# ----------------------------------------------------------------------------------------
# A client process


# What each client counts (summed over clients in the report).
COUNTERS = [
    "requests", "reads", "writes", "fua_writes", "flushes", "trims", "zeroes",
    "verified_reads", "bytes_verified", "sectors_verified", "eio", "eio_read",
    "eio_write", "eio_trim", "eio_zero", "eio_flush", "in_flight_at_kill",
    "crash_checks", "crash_sectors_checked", "crash_sectors_unflushed_lost",
    "crash_sectors_uncertain",
    "abrupt_handshake", "abrupt_partial_write", "abrupt_write_no_reply",
    "abrupt_reads_no_reply", "abrupt_libnbd_close", "lost_bytes", "wrong_bytes",
    "unexpected_errors", "unexpected_disconnects", "final_sectors_checked",
]


class ServerGone(Exception):
    """The connection broke."""


class Client:
    def __init__(self, cfg, cid, spec, shared, results):
        self.cfg, self.cid, self.spec, self.shared, self.results = cfg, cid, spec, shared, results
        self.server = spec["server"]
        self.export_name = spec["export"]
        self.faulty = spec["faulty"]
        self.sock = spec["socket"]
        self.model = Model(spec["export_id"], spec["lo"], spec["n"])
        self.rng = random.Random(cfg["seed"] * 1000 + cid)
        self.next_gen = 1
        self.h = None
        self.conn_gen = -1
        self.c = {k: 0 for k in COUNTERS}
        self.failures: list[str] = []

    # -- connection

    def fail(self, msg: str):
        if len(self.failures) < 20:
            self.failures.append(f"client {self.cid} ({self.export_name}@{self.server}): {msg}")

    def server_gen(self) -> int:
        return self.shared["gen"][self.server].value

    def wait_up(self, timeout: float = 300.0):
        deadline = time.time() + timeout
        while True:
            g = self.shared["gen"][self.server].value
            if self.shared["up"][self.server].value == g:
                return g
            if time.time() > deadline:
                raise RuntimeError("server did not come back")
            time.sleep(0.05)

    def connect(self):
        while True:
            g = self.wait_up()
            h = nbd.NBD()
            h.set_export_name(self.export_name)
            try:
                h.connect_unix(self.sock)
                self.h, self.conn_gen = h, g
                return
            except nbd.Error as e:
                del h
                if self.server_gen() == g:
                    self.c["unexpected_errors"] += 1
                    self.fail(f"connect: {e}")
                    time.sleep(0.5)

    def drop(self):
        if self.h is not None:
            h, self.h = self.h, None
            del h

    def broken(self, e: nbd.Error) -> bool:
        """True when the handle's connection is gone (not a plain error reply)."""
        try:
            return self.h.aio_is_dead() or self.h.aio_is_closed() or not self.h.aio_is_ready()
        except nbd.Error:
            return True

    def call(self, kind: str, fn, *args):
        """Run one request. Returns (True, result), or (False, None) for an EIO reply.
        Raises ServerGone when the connection broke."""
        self.c["requests"] += 1
        try:
            return True, fn(*args)
        except nbd.Error as e:
            if self.broken(e):
                raise ServerGone(str(e)) from None
            if e.errno in ("EIO", errno.EIO):
                self.c["eio"] += 1
                self.c["eio_" + kind] += 1
                if not self.faulty:
                    self.c["unexpected_errors"] += 1
                    self.fail(f"EIO from the fault-free volume on {kind}: {e}")
                return False, None
            self.c["unexpected_errors"] += 1
            self.fail(f"{kind}: unexpected error {e} (errno {e.errno})")
            return False, None

    # -- checks

    def check(self, first: int, data: bytes, crash: bool, phase: str) -> dict[int, int]:
        """Check sectors read from `first`; returns sector -> value found (for pinning)."""
        m = self.model
        n = len(data) // SECTOR
        found: dict[int, int] = {}
        # Fast path: every sector has one allowed value.
        if not crash and not any(s in m.multi for s in range(first, first + n)):
            expect = fill(m.export, first, m.cur[first - m.lo : first - m.lo + n])
            if expect == data:
                self.c["sectors_verified"] += n
                self.c["bytes_verified"] += len(data)
                return found
        bad: list[tuple[int, str, str, bool]] = []  # (sector, found, allowed, lost)
        for i in range(n):
            s = first + i
            piece = data[i * SECTOR : (i + 1) * SECTOR]
            allowed = m.allowed_after_crash(s) if crash else m.cur_set(s)
            v = m.value_of(s, piece, allowed)
            if v is not None:
                found[s] = v
                self.c["sectors_verified"] += 1
                self.c["bytes_verified"] += SECTOR
                continue
            # A failure: lost (zeros or an older stamp of this very sector) or wrong.
            what = describe(piece)
            own = what.startswith(f"stamp(export {m.export}, sector {s},")
            lost = piece == ZEROS or own
            self.c["lost_bytes" if lost else "wrong_bytes"] += SECTOR
            bad.append((s, what, str(sorted(allowed)), lost))
            # Continue from what is there, so one fault is reported once.
            if piece == ZEROS:
                found[s] = ZERO
            elif own and "torn" not in what:
                found[s] = struct.unpack("<Q", piece[24:32])[0]
            else:
                found[s] = -2  # matches nothing; reported again only if read again
        if bad:
            s0, what, allowed, lost = bad[0]
            self.fail(
                f"{phase}: {len(bad)} bad sector(s) in the {n}-sector read at sector {first}; "
                f"the first, sector {s0} (byte {s0 * SECTOR}), holds {what}, allowed {allowed}"
                f" -> {'LOST' if lost else 'WRONG'}"
            )
        return found

    def read_region(self, crash: bool, phase: str) -> dict[int, int]:
        """Read the whole region (retrying EIOs); check each sector."""
        m = self.model
        found: dict[int, int] = {}
        s = m.lo
        end = m.lo + m.n
        while s < end:
            n = min(VERIFY_CHUNK // SECTOR, end - s)
            for attempt in range(50):
                ok, data = self.call("read", self.h.pread, n * SECTOR, s * SECTOR)
                if ok:
                    break
            else:
                raise RuntimeError(f"{phase}: 50 EIOs in a row reading sector {s}")
            self.c["reads"] += 1
            found.update(self.check(s, data, crash, phase))
            s += n
        return found

    def after_crash(self):
        """The server was killed: reconnect, check the region against the crash contract,
        pin what is there, FLUSH."""
        while True:
            self.drop()
            self.connect()
            try:
                # Write-through promises more than NBD does: every acknowledged write is on
                # backing at once (docs/serve.md), so the region must read as before the kill.
                strict = self.spec["strict_crash"]
                found = self.read_region(
                    crash=not strict,
                    phase="after SIGKILL" + (" (write-through: every acknowledged write)" if strict else ""),
                )
                m = self.model
                changed = uncertain = 0
                for s in range(m.lo, m.lo + m.n):
                    v = found.get(s)
                    if v is None:  # the one value it had (strict mode's fast path)
                        continue
                    if s in m.multi:
                        uncertain += 1
                    elif v != m.cur[s - m.lo]:
                        changed += 1
                    m.pin(s, v)
                m.quarantine.clear()
                self.c["crash_checks"] += 1
                self.c["crash_sectors_checked"] += m.n
                self.c["crash_sectors_unflushed_lost"] += changed
                self.c["crash_sectors_uncertain"] += uncertain
                ok, _ = self.call("flush", self.h.flush)
                self.c["flushes"] += 1
                if ok:
                    m.flushed()
                return
            except ServerGone:
                if self.server_gen() == self.conn_gen:
                    raise

    # -- one request

    def pick_range(self):
        m = self.model
        r = self.rng
        n = r.choice([1, 2, 3, 7, 8, 8, 8, 16, 16, 24, 32, 64, 128])
        n = min(n, m.n)
        hot = max(n, m.n // 5)
        span = hot if r.random() < 0.8 else m.n
        first = r.randrange(0, span - n + 1)
        if n % 8 == 0 and r.random() < 0.7:
            first -= first % 8
        return m.lo + first, n

    def gens(self, n: int):
        g = self.next_gen
        self.next_gen += n
        return list(range(g, g + n))

    def step(self):
        r = self.rng.random()
        m = self.model
        first, n = self.pick_range()
        now = time.time()
        if r < self.cfg["abrupt_rate"]:
            return self.abrupt(first, n, now)
        if r < 0.45:
            ok, data = self.call("read", self.h.pread, n * SECTOR, first * SECTOR)
            self.c["reads"] += 1
            if ok:
                self.check(first, data, crash=False, phase="read")
                self.c["verified_reads"] += 1
            return
        if r < 0.52:
            ok, _ = self.call("flush", self.h.flush)
            self.c["flushes"] += 1
            if ok:
                m.flushed()
            return
        if m.quarantined(first, n, now):
            return
        if r < 0.86:
            gens = self.gens(n)
            fua = self.rng.random() < 0.1
            flags = nbd.CMD_FLAG_FUA if fua else 0
            self.pending = ("write", first, gens)
            ok, _ = self.call(
                "write", self.h.pwrite, fill(m.export, first, gens), first * SECTOR, flags
            )
            self.pending = None
            self.c["writes"] += 1
            self.c["fua_writes"] += fua
            m.written(first, gens, certain=ok, fua=fua and ok)
            return
        if r < 0.93:
            self.pending = ("trim", first, n)
            self.call("trim", self.h.trim, n * SECTOR, first * SECTOR)
            self.pending = None
            self.c["trims"] += 1
            m.trimmed(first, n)
            return
        self.pending = ("zero", first, n)
        ok, _ = self.call("zero", self.h.zero, n * SECTOR, first * SECTOR)
        self.pending = None
        self.c["zeroes"] += 1
        m.written(first, [ZERO] * n, certain=ok)

    def abrupt(self, first: int, n: int, now: float):
        """A connection dropped mid-request; the own connection is not affected, except for
        the libnbd kind, which drops it."""
        m = self.model
        kind = self.rng.choice(["handshake", "partial_write", "write_no_reply", "reads_no_reply",
                                "libnbd_close"])
        if kind in ("write_no_reply", "libnbd_close") and m.quarantined(first, n, now):
            kind = "reads_no_reply"
        try:
            if kind == "handshake":
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                s.settimeout(10)
                s.connect(self.sock)
                recv_exact(s, 18)
                s.sendall(struct.pack(">I", 3) + b"IHAVEOPT")
                s.close()
            elif kind == "partial_write":
                s = raw_connect(self.sock, self.export_name)
                gens = self.gens(n)
                data = fill(m.export, first, gens)
                s.sendall(request(CMD_WRITE, 7, first * SECTOR, len(data)) + data[: len(data) // 2])
                s.close()  # the server must apply nothing: the model does not change
            elif kind == "write_no_reply":
                s = raw_connect(self.sock, self.export_name)
                gens = self.gens(n)
                data = fill(m.export, first, gens)
                s.sendall(request(CMD_WRITE, 8, first * SECTOR, len(data)) + data)
                s.close()
                m.written(first, gens, certain=False)
                for x in range(first, first + n):
                    m.quarantine[x] = now + self.cfg["quarantine"]
            elif kind == "reads_no_reply":
                s = raw_connect(self.sock, self.export_name)
                s.sendall(b"".join(request(CMD_READ, 9 + i, first * SECTOR, n * SECTOR)
                                   for i in range(8)))
                s.close()
            else:  # libnbd_close: a WRITE and a READ in flight, then the handle is dropped
                gens = self.gens(n)
                self.h.aio_pwrite(bytearray(fill(m.export, first, gens)), first * SECTOR)
                self.h.aio_pread(nbd.Buffer(n * SECTOR), first * SECTOR)
                m.written(first, gens, certain=False)
                for x in range(first, first + n):
                    m.quarantine[x] = now + self.cfg["quarantine"]
                self.drop()
                self.connect()
            self.c["abrupt_" + kind] += 1
        except (OSError, nbd.Error) as e:
            if self.server_gen() == self.conn_gen:
                self.c["unexpected_errors"] += 1
                self.fail(f"abrupt {kind}: {e}")
            elif self.h is None:
                self.connect()

    # -- main loop

    def run(self):
        self.pending = None
        self.connect()
        stop = self.shared["stop"]
        while not stop.is_set():
            try:
                self.step()
            except ServerGone as e:
                self.lost_connection(str(e))
        # Final phase 1: the server still runs (faults off): the whole region must read back.
        self.final_check("final check (live)")
        self.results.put(("phase1", self.cid))
        self.shared["final_up"].wait()
        self.drop()
        self.connect()
        # Final phase 2: after a clean SIGTERM and a warm restart.
        self.final_check("final check (after clean restart)")
        self.drop()
        self.results.put(("done", self.cid, self.c, self.failures))

    def final_check(self, phase: str):
        for _ in range(5):
            try:
                found = self.read_region(crash=False, phase=phase)
                self.c["final_sectors_checked"] += self.model.n
                for s, v in found.items():
                    self.model.pin(s, v)
                return
            except ServerGone as e:
                self.lost_connection(str(e))
        self.fail(f"{phase}: could not read the region")

    def lost_connection(self, why: str):
        if self.pending is not None:
            kind, first, x = self.pending
            self.pending = None
            if kind == "write":
                self.model.written(first, x, certain=False)
            elif kind == "trim":
                self.model.trimmed(first, x)
            else:
                self.model.written(first, [ZERO] * x, certain=False)
            self.c["in_flight_at_kill"] += 1
        if self.server_gen() != self.conn_gen:
            self.after_crash()
        else:
            self.c["unexpected_disconnects"] += 1
            self.fail(f"disconnected while the server was not killed: {why}")
            self.drop()
            self.connect()


def client_main(cfg, cid, spec, shared, results):
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    cl = Client(cfg, cid, spec, shared, results)
    try:
        cl.run()
    except Exception as e:  # reported, never swallowed: the soak fails
        cl.c["unexpected_errors"] += 1
        cl.fail(f"client crashed: {type(e).__name__}: {e}")
        results.put(("phase1", cid))
        results.put(("done", cid, cl.c, cl.failures))


# ----------------------------------------------------------------------------------------
# Servers


def proc_stat(pid: int):
    """(RSS bytes, open fds) of `pid`, or None."""
    try:
        with open(f"/proc/{pid}/status") as f:
            rss = next(int(l.split()[1]) * 1024 for l in f if l.startswith("VmRSS:"))
        fds = len(os.listdir(f"/proc/{pid}/fd"))
        return rss, fds
    except (OSError, StopIteration):
        return None


class Nbdkit:
    """nbdkit (file plugin, error and delay filters) in the foreground on a Unix socket."""

    def __init__(self, work: str, name: str, image: str, cfg):
        self.socket = os.path.join(work, f"{name}.nbdkit.sock")
        self.errfile = os.path.join(work, f"{name}.inject")
        self.log = os.path.join(work, f"{name}.nbdkit.log")
        open(self.errfile, "w").close()
        rate = cfg["error_rate"]
        delay = cfg["delay"]
        args = [
            "nbdkit", "-f", "--exit-with-parent", "-U", self.socket,
            "--filter=error", "--filter=delay", "file", image,
            f"error-rate={rate}", f"error-file={self.errfile}", "error=EIO",
            f"rdelay={delay}", f"wdelay={delay}", f"delay-trim={delay}", f"delay-zero={delay}",
        ]
        self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=open(self.log, "w"),
                                     stderr=subprocess.STDOUT)
        deadline = time.time() + 20
        while not os.path.exists(self.socket):
            if self.proc.poll() is not None or time.time() > deadline:
                raise RuntimeError(f"nbdkit did not start: {open(self.log).read()}")
            time.sleep(0.05)

    def faults_off(self):
        if os.path.exists(self.errfile):
            os.unlink(self.errfile)

    def injected(self) -> dict[str, int]:
        """Errors the filter injected, by request kind (its `injecting EIO error into KIND`
        lines)."""
        out: dict[str, int] = {}
        with open(self.log, errors="replace") as f:
            for l in f:
                m = re.search(r"injecting \w+ error into (\w+)", l)
                if m:
                    out[m.group(1)] = out.get(m.group(1), 0) + 1
        return out

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class Server:
    """One `ember serve` and its history."""

    def __init__(self, idx: int, work: str, ember: str, policy: str, cfg, nbdkit: Nbdkit,
                 file_image: str, extra: list[str]):
        self.idx, self.ember, self.policy = idx, ember, policy
        self.name = f"s{idx}-{policy}"
        self.socket = os.path.join(work, f"{self.name}.sock")
        self.cache = os.path.join(work, f"{self.name}.cache.img")
        self.log = os.path.join(work, f"{self.name}.log")
        self.args = [
            ember, "serve", "--cache", self.cache, "--cache-size", cfg["cache_size"],
            "--format-if-needed", "--write-policy", policy,
            "--backing", f"nbd=nbd+unix:///?socket={nbdkit.socket}",
            "--backing", f"file={file_image}",
            "--unix", self.socket, "--metrics", "127.0.0.1:0",
        ] + extra
        self.proc = None
        self.metrics = None
        self.starts: list[str] = []  # the "start …" line of each incarnation
        self.start_failures = 0
        self.restarts = 0
        self.lives: list[dict] = []  # per incarnation: samples of (t, rss, fds)
        self.failures: list[str] = []
        self.engine_total: dict[str, float] = {}  # engine counters summed over past lives

    def start(self):
        for attempt in range(10):
            if os.path.exists(self.socket):
                os.unlink(self.socket)  # left by a SIGKILLed predecessor
            logf = open(self.log, "a")
            logf.write(f"--- start {time.strftime('%H:%M:%S')}\n")
            logf.flush()
            self.proc = subprocess.Popen(self.args, stdin=subprocess.DEVNULL,
                                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                         text=True)
            lines = []
            ok = False
            deadline = time.time() + 120
            while time.time() < deadline:
                line = self.proc.stdout.readline()
                if not line:
                    break
                logf.write(line)
                logf.flush()
                lines.append(line.rstrip())
                m = re.search(r"metrics http://([0-9.:]+)/metrics", line)
                if m:
                    self.metrics = m.group(1)
                if line.startswith("ember serve: cache "):
                    self.starts.append(line.rstrip())
                if line.strip() == "ember serve: ready":
                    ok = True
                    break
            if ok:
                threading.Thread(target=self._drain, args=(self.proc, logf), daemon=True).start()
                self.lives.append({"pid": self.proc.pid, "ready": time.time(), "samples": []})
                return
            self.proc.kill()
            self.proc.wait()
            logf.close()
            self.start_failures += 1
            self.failures.append(f"{self.name}: start failed (attempt {attempt + 1}): "
                                 + " | ".join(lines[-5:]))
            time.sleep(1)
        raise RuntimeError(f"{self.name} did not start 10 times in a row; see {self.log}")

    @staticmethod
    def _drain(proc, logf):
        for line in proc.stdout:
            logf.write(line)
        logf.flush()

    def kill(self):
        for k, v in self.scrape().items():  # a moment before the kill
            self.engine_total[k] = self.engine_total.get(k, 0.0) + v
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        self.restarts += 1

    def sample(self):
        if self.proc is None or self.proc.poll() is not None or not self.lives:
            return
        st = proc_stat(self.proc.pid)
        if st:
            self.lives[-1]["samples"].append((time.time(), st[0], st[1]))

    def scrape(self) -> dict[str, float]:
        out: dict[str, float] = {}
        try:
            with urllib.request.urlopen(f"http://{self.metrics}/metrics", timeout=10) as r:
                for line in r.read().decode().splitlines():
                    if line.startswith("#") or not line.strip():
                        continue
                    name, _, value = line.rpartition(" ")
                    key = name.split("{")[0]
                    if key.startswith("ember_cache_") and key.endswith("_total"):
                        out[key] = out.get(key, 0.0) + float(value)
        except OSError as e:
            self.failures.append(f"{self.name}: metrics: {e}")
        return out

    def stop_clean(self) -> bool:
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(120)
        except subprocess.TimeoutExpired:
            self.failures.append(f"{self.name}: SIGTERM did not stop it within 120 s")
            self.proc.kill()
            self.proc.wait()
            return False
        time.sleep(0.2)
        text = open(self.log, errors="replace").read()
        if rc != 0 or "clean shutdown" not in text.split("--- start")[-1]:
            self.failures.append(f"{self.name}: SIGTERM exit {rc}, no clean shutdown")
            return False
        return True


# ----------------------------------------------------------------------------------------
# The coordinator


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
    p.add_argument("--workdir", help="keep files here (default: a temporary directory)")
    p.add_argument("--warmup", type=float, default=10.0,
                   help="seconds after each start before RSS/fd samples count")
    p.add_argument("--rss-slack", type=int, default=8 << 20,
                   help="bytes of RSS growth allowed within one life (or 25 %%, the larger)")
    p.add_argument("--fd-slack", type=int, default=16)
    p.add_argument("--serve-arg", action="append", default=[],
                   help="extra argument for every ember serve (repeat)")
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
            srv = Server(i, work, ember, pol, cfg, kit, fimg, a.serve_arg)
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
        last_report = time.time()
        while time.time() < end:
            for s in servers:
                s.sample()
            for i, s in enumerate(servers):
                if time.time() >= next_kill[i] and time.time() < end - 5:
                    shared["gen"][i].value += 1  # before the kill: clients see why they broke
                    s.kill()
                    time.sleep(1.0)  # nbdkit finishes what the dead server had in flight
                    s.start()
                    shared["up"][i].value = shared["gen"][i].value
                    print(f"soak: {time.time() - t_start:7.0f} s  SIGKILL #{s.restarts} of "
                          f"{s.name}; restarted: {s.starts[-1].split(', ')[0]}", flush=True)
                    next_kill[i] = time.time() + pause()
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
            time.sleep(1.0)

        # Final phase: faults off, clients check their regions on the live servers, then a
        # clean SIGTERM, a warm restart, and one more check.
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
                    "journal_commits", "persist_checkpoints", "write_through_fallbacks"]:
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
        "start_failures": sum(s.start_failures for s in servers),
        "starts": {s.name: s.starts for s in servers}, "engine": counters,
        "flatness": summary_flat, "warm_restart": warm_starts,
        "lost_or_wrong_bytes": lost + wrong, "problems": problems,
    }))
    for f in failures[:40]:
        print("  ! " + f)
    if problems:
        print("soak: FAIL: " + "; ".join(problems))
        return 1
    if not a.workdir:
        shutil.rmtree(work, ignore_errors=True)
    print("soak: PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
