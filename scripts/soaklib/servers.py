"""The processes under test: nbdkit (file plugin, error and delay filters) as the failing
backing, and `ember serve` with its starts, kills, RSS/fd samples and metrics."""

from __future__ import annotations

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
