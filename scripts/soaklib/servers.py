"""The processes under test: nbdkit (file plugin, error and delay filters) as the failing
backing, and `ember serve` with its starts, kills, RSS/fd samples and metrics."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import threading
import time
import urllib.request



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


class FailingCache:
    """A cache file on a file system that fails on demand: nbdkit's file plugin over an image
    behind its `error` filter (EIO on every request while `trigger` exists), exported as a
    file through nbdfuse. `fail()` turns the fault on, `heal()` off (the device comes back;
    ember never trusts it again without `--reformat-failed-cache`)."""

    def __init__(self, work: str, name: str, size: int):
        self.image = os.path.join(work, f"{name}.failing-cache.img")
        self.trigger = os.path.join(work, f"{name}.cache-fails")
        self.socket = os.path.join(work, f"{name}.cache.sock")
        self.mnt = os.path.join(work, f"{name}.cache-mnt")
        self.path = os.path.join(self.mnt, "cache.img")
        self.procs: list[subprocess.Popen] = []
        with open(self.image, "wb") as f:
            f.truncate(size)
        os.makedirs(self.mnt, exist_ok=True)
        log = open(os.path.join(work, f"{name}.cache-nbdkit.log"), "w")
        self.procs.append(subprocess.Popen(
            ["nbdkit", "-f", "--exit-with-parent", "-U", self.socket, "--filter=error", "file",
             self.image, "error=EIO", "error-rate=100%", f"error-file={self.trigger}"],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT))
        self._wait(lambda: os.path.exists(self.socket), "nbdkit")
        log = open(os.path.join(work, f"{name}.nbdfuse.log"), "w")
        self.procs.append(subprocess.Popen(
            ["nbdfuse", self.path, "--unix", self.socket],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT))
        self._wait(lambda: os.path.exists(self.path) and os.path.getsize(self.path) > 0,
                   "nbdfuse")

    def _wait(self, pred, what: str):
        deadline = time.time() + 20
        while not pred():
            if any(p.poll() is not None for p in self.procs) or time.time() > deadline:
                self.stop()
                raise RuntimeError(f"{what} did not start for the failing cache")
            time.sleep(0.05)

    def fail(self):
        open(self.trigger, "w").close()

    def heal(self):
        if os.path.exists(self.trigger):
            os.unlink(self.trigger)

    def stop(self):
        subprocess.run(["fusermount3", "-u", self.mnt], capture_output=True)
        for p in reversed(self.procs):
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()


def can_fail_a_cache() -> bool:
    """nbdkit, nbdfuse and fusermount3 are installed, and FUSE is usable."""
    import shutil
    tools = all(shutil.which(t) for t in ("nbdkit", "nbdfuse", "fusermount3"))
    return tools and os.path.exists("/dev/fuse")


class Server:
    """One `ember serve` and its history. With `failing` (a [`FailingCache`]) its cache file
    lives there, with a state directory so a failure is remembered across restarts."""

    def __init__(self, idx: int, work: str, ember: str, policy: str, cfg, nbdkit: Nbdkit,
                 file_image: str, extra: list[str], failing: FailingCache | None = None):
        self.idx, self.ember, self.policy = idx, ember, policy
        self.name = f"s{idx}-{policy}"
        self.socket = os.path.join(work, f"{self.name}.sock")
        self.cache = failing.path if failing else os.path.join(work, f"{self.name}.cache.img")
        self.log = os.path.join(work, f"{self.name}.log")
        self.failing = failing
        self.state_dir = os.path.join(work, f"{self.name}.state")
        self.args = [
            ember, "serve", "--cache", self.cache, "--cache-size", cfg["cache_size"],
            "--format-if-needed", "--write-policy", policy,
            "--backing", f"nbd=nbd+unix:///?socket={nbdkit.socket}",
            "--backing", f"file={file_image}",
            "--unix", self.socket, "--metrics", "127.0.0.1:0",
        ] + extra
        if failing:
            # A restart after the failure reformats the healed device (it starts cold).
            self.args += ["--state-dir", self.state_dir, "--reformat-failed-cache"]
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

    def degraded(self) -> bool:
        """The state file says the cache device was given up."""
        try:
            with open(os.path.join(self.state_dir, "ember.state.json")) as f:
                return bool(json.load(f).get("degraded", False))
        except (OSError, ValueError):
            return False

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
