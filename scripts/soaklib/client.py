"""One client process of the soak: a region of one export, one request at a time through
python3-libnbd, every read checked against `checker.Model`, abrupt disconnects, and the
region check after each SIGKILL of the server."""

from __future__ import annotations

import errno
import random
import signal
import socket
import struct
import time

import nbd  # python3-libnbd
import os

from .checker import SECTOR, ZERO, ZEROS, Model, describe, fill
from .rawnbd import CMD_READ, CMD_WRITE, raw_connect, recv_exact, request

VERIFY_CHUNK = 256 * 1024  # bytes per read of a whole-region check

# EMBER_SOAK_HISTORY=DIR: every client appends one line per request to DIR/client-CID.log
# (time, server life, what, first sector, sectors, outcome, generations), so the history of a
# sector the checker reports can be read back (docs/design/testing.md). Off by default.
HISTORY_DIR = os.environ.get("EMBER_SOAK_HISTORY")



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
        self.history = None
        if HISTORY_DIR:
            os.makedirs(HISTORY_DIR, exist_ok=True)
            self.history = open(os.path.join(HISTORY_DIR, f"client-{cid}.log"), "a", buffering=1 << 16)

    def log(self, t0: float, what: str, first: int, n: int, outcome, extra: str = ""):
        """One line of the request history (EMBER_SOAK_HISTORY): sent at `t0`, answered now."""
        if self.history is not None:
            self.history.write(
                f"{t0:.6f} {time.time():.6f} life {self.conn_gen} {what} {first} {n} {outcome}"
                f" {extra}\n"
            )

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

    def reconnect(self):
        """Drop the handle and connect again. If the server was killed since this client
        last connected, the new connection reaches its next life: the region is checked
        under the crash contract first (`after_crash`), or reads would be held to writes
        the kill was allowed to lose."""
        life = self.conn_gen
        self.drop()
        self.connect()
        if self.conn_gen != life:
            self.after_crash()

    def drop(self):
        """Close the handle without NBD_CMD_DISC (dropping the last reference closes it)."""
        self.h = None

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
            for b in bad:
                self.log(time.time(), "BAD", b[0], 1, "LOST" if b[3] else "WRONG",
                         f"{phase}: holds {b[1]}, allowed {b[2]}".replace(" ", "_"))
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
                t0 = time.time()
                ok, data = self.call("read", self.h.pread, n * SECTOR, s * SECTOR)
                self.log(t0, "region-read", s, n, ok, phase.replace(" ", "_"))
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
                # backing at once (docs/reference/write-policies.md), so the region must read as before the kill.
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
                t0 = time.time()
                ok, _ = self.call("flush", self.h.flush)
                self.log(t0, "flush-after-crash", 0, 0, ok)
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
            self.log(now, "read", first, n, ok)
            self.c["reads"] += 1
            if ok:
                self.check(first, data, crash=False, phase="read")
                self.c["verified_reads"] += 1
            return
        if r < 0.52:
            ok, _ = self.call("flush", self.h.flush)
            self.log(now, "flush", 0, 0, ok)
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
            self.log(now, "fua-write" if fua else "write", first, n, ok, f"g{gens[0]}")
            self.c["writes"] += 1
            self.c["fua_writes"] += fua
            m.written(first, gens, certain=ok, fua=fua and ok)
            return
        if r < 0.93:
            self.pending = ("trim", first, n)
            ok, _ = self.call("trim", self.h.trim, n * SECTOR, first * SECTOR)
            self.pending = None
            self.log(now, "trim", first, n, ok)
            self.c["trims"] += 1
            m.trimmed(first, n)
            return
        self.pending = ("zero", first, n)
        ok, _ = self.call("zero", self.h.zero, n * SECTOR, first * SECTOR)
        self.pending = None
        self.log(now, "zero", first, n, ok)
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
            else:
                self.libnbd_close(first, n, now)
            self.c["abrupt_" + kind] += 1
            gens_of = kind in ("partial_write", "write_no_reply", "libnbd_close")
            self.log(now, "abrupt-" + kind, first, n, "sent",
                     f"g{self.next_gen - n}" if gens_of else "")
        except (OSError, nbd.Error) as e:
            if self.server_gen() == self.conn_gen:
                self.c["unexpected_errors"] += 1
                self.fail(f"abrupt {kind}: {e}")
            elif self.h is None:
                self.reconnect()

    def libnbd_close(self, first: int, n: int, now: float):
        """The fifth abrupt kind: a WRITE and a READ in flight on the own handle, then the
        handle is dropped and the client connects again."""
        m = self.model
        gens = self.gens(n)
        self.h.aio_pwrite(bytearray(fill(m.export, first, gens)), first * SECTOR)
        self.h.aio_pread(nbd.Buffer(n * SECTOR), first * SECTOR)
        m.written(first, gens, certain=False)
        for x in range(first, first + n):
            m.quarantine[x] = now + self.cfg["quarantine"]
        self.reconnect()

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
        if self.history is not None:
            self.history.flush()
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
        self.log(time.time(), "connection-lost", 0, 0, self.pending is not None,
                 str(self.pending).replace(" ", ""))
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
            self.reconnect()


def client_main(cfg, cid, spec, shared, results):
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    cl = Client(cfg, cid, spec, shared, results)
    try:
        cl.run()
    except Exception as e:  # reported, never swallowed: the soak fails
        cl.c["unexpected_errors"] += 1
        cl.fail(f"client crashed: {type(e).__name__}: {e}")
        if cl.history is not None:
            cl.history.flush()
        results.put(("phase1", cid))
        results.put(("done", cid, cl.c, cl.failures))
    finally:
        if cl.history is not None:
            cl.history.close()
