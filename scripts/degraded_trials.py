#!/usr/bin/python3
"""Trials of `ember serve` losing its cache device to a real fault (docs/reference/degraded.md).

One trial (every process is started here and stopped by its pid):

* the cache file lives on a file system that starts failing: nbdkit's file plugin over
  `cache.img` behind its `error` filter (EIO on every request once `error-file` exists) and its
  `pause` filter (every request hangs once paused: a hung device), exported through nbdfuse;
* `ember serve` uses that file as its cache device, in front of a plain backing file, under a
  write policy drawn at random, with a state directory beside it;
* one verifying client (python3-libnbd, one request at a time) writes and reads whole blocks
  of a small region (every block carries its number and a generation, so a wrong block is
  seen), and FLUSHes under write-through and write-around; at a random request the fault is
  turned on (EIO, or a hang with `--io-timeout`).

What a trial checks:

* no wrong bytes: every successful read returns the last acknowledged write of that block (or,
  after a write that failed, its old or its new bytes);
* under write-through and write-around no request fails at all; under the write-back policies
  no request fails once the state file says degraded, except reads of listed blocks (EIO);
* the lost list in the state file at the switch equals the blocks dirty at the failure (the
  write-back policies run with min-dirty above anything written and no FLUSH, so every block
  written successfully before the switch is dirty; a block whose write failed, or whose write
  was the one in flight at the switch, may be either);
* after SIGTERM, a restart on the failed device is refused; with `--reformat-failed-cache` it
  starts, a volume with lost blocks is refused until `ember ctl clear-lost`, and then every
  block reads back as backing holds it.

With `--replace serve`, the degraded server then gets a new cache file while it serves (`ember
ctl replace-cache`): it must say healthy, a block read twice must hit, every byte must be right,
listed blocks must still read EIO, the state file must name the new device and the same lost
list, and a restart configured with the failed device must run on the new one (the volume
refused until `clear-lost` when blocks are listed). With `--replace kill`, the server is killed
with SIGKILL at a random point of the replacement while the client writes and FLUSHes: the
restart must run on the new device if the state file names it, else be refused on the failed
device's record (and run once configured with the new device); either way the lost list is
the one before the replacement, less blocks rewritten while degraded, and every block not
listed holds its last FLUSHed write or a later one.

Usage: scripts/degraded_trials.py --ember target/release/ember --trials 20 [--seed N]
[--policy P] [--fault eio|hang] [--replace none|serve|kill].
Prints one `trial-json:` line per trial and a `degraded-json:` summary; exits 1 on a failure.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

try:
    import nbd  # python3-libnbd, installed by scripts/setup.sh
except ImportError:  # a pyenv or venv python3 without the Debian module: use the system one
    if os.path.exists("/usr/bin/python3") and os.path.realpath(sys.executable) != os.path.realpath(
        "/usr/bin/python3"
    ):
        os.execv("/usr/bin/python3", ["/usr/bin/python3"] + sys.argv)
    raise

BS = 4096
REGION = 192  # blocks the client writes and reads
BACKING_BLOCKS = 1024
POLICIES = [
    "write-through",
    "write-around",
    "write-back-flush",
    "write-back-persist",
    "ordered-write-back",
    "unsafe-write-back",
]
WRITE_BACK = {"write-back-flush", "write-back-persist", "ordered-write-back", "unsafe-write-back"}


def block(b: int, gen: int) -> bytes:
    return struct.pack("<QQ", b, gen) * (BS // 16)


def parse(buf: bytes) -> tuple[int, int] | None:
    head = buf[:16]
    if head * (BS // 16) != bytes(buf):
        return None
    return struct.unpack("<QQ", head)


def wait_for(pred, timeout: float, what: str):
    end = time.time() + timeout
    while time.time() < end:
        if pred():
            return
        time.sleep(0.02)
    raise RuntimeError(f"timed out waiting for {what}")


class Ember:
    """One `ember serve`, its output collected by a thread."""

    def __init__(self, args: list[str]):
        self.proc = subprocess.Popen(
            args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        self.lines: list[str] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def output(self) -> str:
        return "\n".join(self.lines)

    def wait_ready(self, timeout: float = 30.0) -> bool:
        end = time.time() + timeout
        while time.time() < end:
            if any(line.endswith("ready") for line in self.lines):
                return True
            if self.proc.poll() is not None:
                self.reader.join(2)
                return False
            time.sleep(0.02)
        return False

    def stop(self, timeout: float = 60.0) -> int | None:
        if self.proc.poll() is None:
            self.proc.send_signal(15)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            return None


class Trial:
    def __init__(self, ember: str, policy: str, fault: str, seed: int, root: str, replace: str = "none"):
        self.ember, self.policy, self.fault, self.seed = ember, policy, fault, seed
        self.replace = replace
        self.rng = random.Random(seed)
        self.dir = tempfile.mkdtemp(prefix=f"trial-{seed}-", dir=root)
        p = lambda n: os.path.join(self.dir, n)  # noqa: E731
        self.backing, self.image, self.mnt = p("backing.img"), p("cache.img"), p("mnt")
        self.trigger, self.pause_sock = p("fail-now"), p("pause.sock")
        self.kit_sock, self.sock, self.ctl, self.state = (
            p("nbdkit.sock"),
            p("ember.sock"),
            p("ctl.sock"),
            p("state"),
        )
        self.procs: list[subprocess.Popen] = []
        self.result: dict = {"policy": policy, "fault": fault, "seed": seed, "replace": replace}
        self.problems: list[str] = []

    # -- the failing file system ----------------------------------------------------------
    def start_device(self):
        with open(self.backing, "wb") as f:
            for b in range(BACKING_BLOCKS):
                f.write(block(b, 0))
        with open(self.image, "wb") as f:
            f.truncate(32 << 20)
        os.mkdir(self.mnt)
        kit = subprocess.Popen(
            [
                "nbdkit", "-f", "-U", self.kit_sock,
                "--filter=error", "--filter=pause",
                "file", self.image,
                "error=EIO", "error-rate=100%", f"error-file={self.trigger}",
                f"pause-control={self.pause_sock}",
            ]
        )
        self.procs.append(kit)
        wait_for(lambda: os.path.exists(self.kit_sock), 10, "nbdkit")
        fuse = subprocess.Popen(["nbdfuse", os.path.join(self.mnt, "cache.img"), "--unix", self.kit_sock])
        self.procs.append(fuse)
        cache = os.path.join(self.mnt, "cache.img")
        wait_for(lambda: os.path.exists(cache) and os.path.getsize(cache) > 0, 10, "nbdfuse")
        self.cache = cache

    def fail(self):
        if self.fault == "eio":
            open(self.trigger, "w").close()
        else:
            self.pause("p")

    def pause(self, what: str):
        s = socket.socket(socket.AF_UNIX)
        s.connect(self.pause_sock)
        s.sendall(what.encode())
        s.settimeout(0.5)
        try:
            s.recv(1)
        except OSError:
            pass  # the 'P' waits for requests in flight: do not wait for it
        s.close()

    def heal(self):
        if os.path.exists(self.trigger):
            os.remove(self.trigger)
        if self.fault == "hang":
            self.pause("r")

    def stop_device(self):
        subprocess.run(["fusermount3", "-u", self.mnt], capture_output=True)
        for p in reversed(self.procs):
            if p.poll() is None:
                p.terminate()
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()

    # -- ember ----------------------------------------------------------------------------
    def serve_args(self, *extra: str, cache: str | None = None) -> list[str]:
        return [
            self.ember, "serve",
            "--cache", cache or self.cache, "--format-if-needed",
            "--backing", f"disk={self.backing}",
            "--write-policy", self.policy,
            "--unix", self.sock, "--control", self.ctl, "--state-dir", self.state,
            "--min-dirty", "90%", "--max-dirty", "95%",
            "--io-error-limit", "4",
            "--io-timeout", "1s" if self.fault == "hang" else "0",
            *extra,
        ]

    def state_record(self) -> dict | None:
        path = os.path.join(self.state, "ember.state.json")
        try:
            with open(path) as f:
                return json.load(f)
        except (FileNotFoundError, json.JSONDecodeError):
            return None

    def ctl_cmd(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [self.ember, "ctl", "--control", self.ctl, *args], capture_output=True, text=True, timeout=60
        )

    def connect(self) -> nbd.NBD:
        h = nbd.NBD()
        h.set_export_name("disk")
        h.connect_unix(self.sock)
        return h

    # -- the trial ------------------------------------------------------------------------
    def run(self):
        wb = self.policy in WRITE_BACK
        self.start_device()
        srv = Ember(self.serve_args())
        if not srv.wait_ready():
            self.problems.append("ember serve did not start:\n" + srv.output())
            srv.stop()
            return
        h = self.connect()
        model = {b: {0} for b in range(REGION)}
        dirty: set[int] = set()
        uncertain: set[int] = set()
        gen = 0
        switched = False
        lost_first: set[int] = set()
        lost_now: set[int] = set()
        trigger_at = self.rng.randint(40, 200)
        errors_before, errors_after, lost_eio, wrong = 0, 0, 0, 0
        ops = 320
        i = 0
        t_fail = None
        while i < ops or not switched:
            if i == trigger_at:
                self.fail()
                t_fail = time.time()
            if i >= ops + 400:
                break
            b = self.rng.randrange(REGION)
            r = self.rng.random()
            failed = False
            if i >= ops:
                # Not switched yet: misses (allocation-writes) and, under write-through and
                # write-around, FLUSHes (a cache sync) reach the failing device.
                b = REGION + (i - ops) % (BACKING_BLOCKS - REGION)
                r = 0.99 if not wb and i % 10 == 0 else 0.5
            if r < 0.45:
                gen += 1
                try:
                    h.pwrite(block(b, gen), b * BS)
                    model[b] = {gen}
                    if wb and not switched:
                        dirty.add(b)
                    if switched:
                        lost_now.discard(b)
                except nbd.Error:
                    failed = True
                    model[b] = model[b] | {gen}
                    uncertain.add(b)
            elif r < 0.95:
                try:
                    got = parse(h.pread(BS, b * BS))
                    want = model.get(b, {0})
                    if got is None or got[0] != b or got[1] not in want:
                        wrong += BS
                    else:
                        model[b] = {got[1]}
                except nbd.Error:
                    if switched and b in lost_now:
                        lost_eio += 1
                    else:
                        failed = True
            else:
                if wb:
                    i += 1
                    continue
                try:
                    h.flush()
                except nbd.Error:
                    failed = True
            if failed:
                if switched:
                    errors_after += 1
                else:
                    errors_before += 1
            if not switched:
                rec = self.state_record()
                if rec and rec.get("degraded"):
                    switched = True
                    self.result["switch_op"] = i
                    self.result["switch_ms"] = round(1000 * (time.time() - (t_fail or time.time())))
                    lost_first = {o // BS for o in rec.get("lost", {}).get("disk", [])}
                    lost_now = set(lost_first)
                    uncertain.add(b)  # the request in flight at the switch
            i += 1
        self.result.update(
            trigger_at=trigger_at,
            errors_before_switch=errors_before,
            errors_after_switch=errors_after,
            lost_reads=lost_eio,
            lost=len(lost_first),
            dirty=len(dirty),
        )
        if not switched:
            self.problems.append("the cache never went degraded")
        if not wb and errors_before:
            self.problems.append(f"{errors_before} client errors before the switch")
        if errors_after:
            self.problems.append(f"{errors_after} client errors after the switch")
        equal = (lost_first - uncertain) == (dirty - uncertain) and lost_first <= (dirty | uncertain)
        self.result["lost_equals_dirty"] = equal
        if not equal:
            self.problems.append(
                f"lost list {sorted(lost_first)} != dirty at the failure {sorted(dirty)} "
                f"(either way: {sorted(uncertain)})"
            )
        if not wb and lost_first:
            self.problems.append(f"blocks listed under {self.policy}: {sorted(lost_first)}")
        status = self.ctl_cmd("--json", "status")
        try:
            state = json.loads(status.stdout)["health"]["state"]
        except (ValueError, KeyError):
            state = f"no status: {status.stdout} {status.stderr}"
        if state != "degraded":
            self.problems.append(f"ember ctl status says {state!r}")
        # Every block of the region once more.
        for b in range(REGION):
            try:
                got = parse(h.pread(BS, b * BS))
                if got is None or got[0] != b or got[1] not in model[b]:
                    wrong += BS
            except nbd.Error:
                if b not in lost_now:
                    self.problems.append(f"block {b}: a read failed, and it is not listed")
        self.result["wrong_bytes"] = wrong
        if wrong:
            self.problems.append(f"{wrong} wrong bytes")
        if self.replace == "serve":
            self.replace_serving(srv, h, model, lost_now)
            return
        if self.replace == "kill":
            self.replace_killed(srv, h, model, lost_now)
            return
        h.shutdown()
        # A hung device first resumes: a thread stuck in it would hold the process.
        self.heal()
        srv.stop()
        self.restart(lost_now, model)

    def restart(self, lost_now: set[int], model: dict[int, set[int]]):
        again = Ember(self.serve_args())
        if again.wait_ready(15):
            self.problems.append("a restart on the failed device was not refused")
            again.stop()
            return
        if "--reformat-failed-cache" not in again.output():
            self.problems.append("the refusal does not name --reformat-failed-cache:\n" + again.output())
        srv = Ember(self.serve_args("--reformat-failed-cache"))
        if not srv.wait_ready():
            self.problems.append("--reformat-failed-cache did not start:\n" + srv.output())
            srv.stop()
            return
        self.check_after_restart(srv, lost_now, model)
        if self.state_record() is not None:
            self.problems.append("the state file is still there once nothing is lost")


    # -- replacing the cache device while serving ------------------------------------------
    def new_device(self) -> str:
        new = os.path.join(self.dir, "new.img")
        with open(new, "wb") as f:
            f.truncate(32 << 20)
        return new

    def status(self) -> dict:
        out = self.ctl_cmd("--json", "status")
        try:
            return json.loads(out.stdout)
        except ValueError:
            return {}

    def check_region(self, h: nbd.NBD, model: dict[int, set[int]], listed: set[int], when: str) -> int:
        """Read every block of the region: the model's bytes, EIO for a listed block."""
        wrong = 0
        for b in range(REGION):
            try:
                got = parse(h.pread(BS, b * BS))
                if b in listed:
                    self.problems.append(f"{when}: listed block {b} was read")
                elif got is None or got[0] != b or got[1] not in model[b]:
                    wrong += BS
                else:
                    model[b] = {got[1]}
            except nbd.Error:
                if b not in listed:
                    self.problems.append(f"{when}: block {b}: a read failed, and it is not listed")
        return wrong

    def replace_serving(self, srv: Ember, h: nbd.NBD, model: dict[int, set[int]], lost: set[int]):
        new = self.new_device()
        t0 = time.time()
        out = self.ctl_cmd("replace-cache", new)
        self.result["replace_ms"] = round(1000 * (time.time() - t0))
        if out.returncode != 0:
            self.problems.append(f"replace-cache failed: {out.stdout} {out.stderr}")
            h.shutdown()
            srv.stop()
            return
        st = self.status()
        if st.get("health", {}).get("state") != "healthy":
            self.problems.append(f"after replace-cache the status says {st.get('health')}")
        rec = self.state_record() or {}
        if rec.get("cache-device") != new or rec.get("replaced") != [self.cache] or rec.get("degraded"):
            self.problems.append(f"the state file after the replacement: {rec}")
        if {o // BS for o in rec.get("lost", {}).get("disk", [])} != lost:
            self.problems.append(f"the lost list changed: {rec.get('lost')} != {sorted(lost)}")
        hits = lambda: sum(v.get("read_hits", 0) for v in self.status().get("volumes", []))  # noqa: E731
        before = hits()
        b = next(x for x in range(REGION) if x not in lost)
        for _ in range(2):
            got = parse(h.pread(BS, b * BS))
            if got is None or got[0] != b or got[1] not in model[b]:
                self.result["wrong_bytes"] += BS
        self.result["hits_after_replace"] = hits() - before
        if hits() <= before:
            self.problems.append("no read hit after the replacement: the new device does not cache")
        gen = 1 << 40
        for _ in range(150):
            b = self.rng.randrange(REGION)
            if self.rng.random() < 0.5:
                gen += 1
                h.pwrite(block(b, gen), b * BS)
                model[b] = {gen}
                if self.rng.random() < 0.2:
                    h.flush()
            elif b not in lost:
                got = parse(h.pread(BS, b * BS))
                if got is None or got[0] != b or got[1] not in model[b]:
                    self.result["wrong_bytes"] += BS
        h.flush()
        self.result["wrong_bytes"] += self.check_region(h, model, lost, "after the replacement")
        h.shutdown()
        # A hung device first resumes: a thread stuck in it would hold the process.
        self.heal()
        srv.stop()
        # A restart configured with the failed device runs on the new one.
        again = Ember(self.serve_args())
        if not again.wait_ready():
            self.problems.append("the restart after the replacement did not start:\n" + again.output())
            again.stop()
            return
        if "replaced by" not in again.output():
            self.problems.append("the restart does not say it runs on the replacement")
        self.verify_restarted(again, model, lost, set())
        if self.result["wrong_bytes"]:
            self.problems.append(f"{self.result['wrong_bytes']} wrong bytes")

    def verify_restarted(self, srv: Ember, model: dict[int, set[int]], lost: set[int], either: set[int]):
        """Blocks `lost` must be listed and the volume refused until clear-lost (blocks in
        `either` may be listed or not), then every block not listed holds a model value."""
        rec = self.state_record() or {}
        listed = {o // BS for o in rec.get("lost", {}).get("disk", [])}
        self.result["listed_after_restart"] = len(listed)
        if not (lost - either) <= listed <= lost:
            self.problems.append(f"lost list after the restart {sorted(listed)}, want {sorted(lost)} (either way {sorted(either)})")
        self.check_after_restart(srv, listed, model)

    def check_after_restart(self, srv: Ember, listed: set[int], model: dict[int, set[int]]):
        """After a restart: a volume with listed blocks is refused until `clear-lost`, then
        every block holds its own bytes, and every unlisted block a generation written to it
        (a wrong one counted in wrong_bytes); stops the server."""
        if listed:
            try:
                self.connect().shutdown()
                self.problems.append("a volume with lost blocks was served after the restart")
            except nbd.Error:
                pass
            out = self.ctl_cmd("clear-lost", "disk")
            if out.returncode != 0:
                self.problems.append(f"clear-lost failed: {out.stderr}")
        h = self.connect()
        for b in range(REGION):
            got = parse(h.pread(BS, b * BS))
            if got is None or got[0] != b:
                self.problems.append(f"block {b} after the restart: not its own bytes")
            elif b not in listed and got[1] not in model[b]:
                self.result["wrong_bytes"] += BS
                self.problems.append(f"block {b} after the restart: generation {got[1]}, want {sorted(model[b])}")
        h.shutdown()
        srv.stop()

    def replace_killed(self, srv: Ember, h: nbd.NBD, model: dict[int, set[int]], lost: set[int]):
        new = self.new_device()
        ctl = subprocess.Popen(
            [self.ember, "ctl", "--control", self.ctl, "replace-cache", new],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        kill_at = self.rng.uniform(0, 0.3)
        t0 = time.time()
        gen = 1 << 40
        written: set[int] = set()
        window: dict[int, set[int]] = {}
        # Write and FLUSH until the kill: what a FLUSH acknowledged must survive it.
        while time.time() - t0 < kill_at:
            b = self.rng.randrange(REGION)
            gen += 1
            window[b] = window.get(b, set(model[b])) | {gen}
            try:
                h.pwrite(block(b, gen), b * BS)
                h.flush()
                model[b] = {gen}
            except nbd.Error:
                model[b] = model[b] | {gen}
            written.add(b)
        if self.policy in ("ordered-write-back", "unsafe-write-back"):
            # A FLUSH promises no durability there: any value since the window began.
            for b, gens in window.items():
                model[b] = gens
        model_after = dict(model)
        self.heal()
        srv.proc.kill()
        srv.proc.wait()
        ctl.wait(30)
        self.result["kill_ms"] = round(1000 * kill_at)
        try:
            h.shutdown()
        except nbd.Error:
            pass
        rec = self.state_record() or {}
        committed = rec.get("cache-device") == new
        self.result["replaced_before_kill"] = committed
        if committed:
            again = Ember(self.serve_args())
            if not again.wait_ready():
                self.problems.append("the restart on the committed replacement did not start:\n" + again.output())
                again.stop()
                return
        else:
            if not rec.get("degraded"):
                self.problems.append(f"killed before the replacement was recorded, the state file says {rec}")
            again = Ember(self.serve_args())
            if again.wait_ready(15):
                self.problems.append("a restart on the failed device was not refused")
                again.stop()
                return
            again = Ember(self.serve_args(cache=new))
            if not again.wait_ready():
                self.problems.append("a restart on the new device did not start:\n" + again.output())
                again.stop()
                return
        self.verify_restarted(again, model_after, lost, written)
        if self.result["wrong_bytes"]:
            self.problems.append(f"{self.result['wrong_bytes']} wrong bytes")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ember", required=True)
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--policy", choices=POLICIES, help="every trial under this policy")
    ap.add_argument("--fault", choices=["eio", "hang"], help="every trial with this fault")
    ap.add_argument(
        "--replace", choices=["none", "serve", "kill"], default="none",
        help="then replace the cache device while serving (kill: SIGKILL during it)",
    )
    a = ap.parse_args()
    rng = random.Random(a.seed)
    failed = 0
    summary = {"trials": 0, "failed": 0, "wrong_bytes": 0, "errors_after_switch": 0, "policies": {}}
    with tempfile.TemporaryDirectory(prefix="ember-degraded-") as root:
        for n in range(a.trials):
            policy = a.policy or rng.choice(POLICIES)
            fault = a.fault or rng.choice(["eio", "eio", "hang"])
            t = Trial(a.ember, policy, fault, a.seed * 1000 + n, root, a.replace)
            try:
                t.run()
            except Exception as e:  # noqa: BLE001  a harness failure fails the trial
                t.problems.append(f"harness: {e!r}")
            finally:
                t.stop_device()
            t.result["problems"] = t.problems
            print("trial-json: " + json.dumps(t.result), flush=True)
            summary["trials"] += 1
            summary["wrong_bytes"] += t.result.get("wrong_bytes", 0)
            summary["errors_after_switch"] += t.result.get("errors_after_switch", 0)
            summary["policies"][policy] = summary["policies"].get(policy, 0) + 1
            if t.problems:
                failed += 1
    summary["failed"] = failed
    print("degraded-json: " + json.dumps(summary), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
