#!/usr/bin/python3
"""Self-test of the soak client's crash handling, against a real NBD server (nbdkit's file
plugin) and python3-libnbd; run by crates/cli/tests/soak.rs.

The case: the server is killed while the client is between requests, and the client's next
step is the fifth abrupt kind (drop its libnbd handle with I/O in flight, connect again). Its
new connection reaches the restarted server. A write-back cache may have lost every write
since the last FLUSH in that kill, so the client must check its region under the crash
contract before it holds reads to what it wrote before the kill. The "kill" here: nbdkit is
stopped with SIGKILL and its file is set back to what it held at the last FLUSH (what
write-back persist may legally show after a crash), then it is started again.

Exit 0 and `selftest: PASS` when the client ran its crash check and reported nothing lost.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from soaklib.checker import SECTOR, fill  # noqa: E402
from soaklib.client import Client  # noqa: E402

SECTORS = 2048  # a 1 MiB export


def start_nbdkit(sock: str, image: str) -> subprocess.Popen:
    proc = subprocess.Popen(
        ["nbdkit", "-f", "--exit-with-parent", "-U", sock, "file", image],
        stdin=subprocess.DEVNULL,
    )
    deadline = time.time() + 10
    while not os.path.exists(sock):
        if time.time() > deadline or proc.poll() is not None:
            raise RuntimeError("nbdkit did not start")
        time.sleep(0.02)
    return proc


def main() -> int:
    work = tempfile.mkdtemp(prefix="ember-soak-selftest-")
    proc = None
    try:
        image = os.path.join(work, "disk.img")
        flushed = os.path.join(work, "flushed.img")
        sock = os.path.join(work, "nbd.sock")
        with open(image, "wb") as f:
            f.write(fill(0, 0, [0] * SECTORS))
        proc = start_nbdkit(sock, image)
        ctx = mp.get_context("fork")
        shared = {"gen": [ctx.Value("i", 0)], "up": [ctx.Value("i", 0)]}
        cfg = {"seed": 1, "quarantine": 5.0, "abrupt_rate": 0.0}
        spec = {"server": 0, "export": "", "export_id": 0, "faulty": False, "socket": sock,
                "lo": 0, "n": SECTORS, "strict_crash": False}
        cl = Client(cfg, 0, spec, shared, None)
        cl.connect()
        # Acknowledged and flushed: generation 0 everywhere (the prefill) is durable.
        cl.h.flush()
        cl.model.flushed()
        shutil.copyfile(image, flushed)
        # Acknowledged, not flushed: sectors 64..79 get generations 1..16.
        gens = cl.gens(16)
        cl.h.pwrite(fill(0, 64, gens), 64 * SECTOR)
        cl.model.written(64, gens, certain=True)
        # The client's next step: the libnbd kind of abrupt disconnect (elsewhere in the
        # region). The kill lands after its WRITE and READ went out, before it drops the
        # handle: as the soak harness does it, gen first, then SIGKILL; the restarted server
        # shows the state of the last FLUSH; then up.
        state = {"proc": proc}
        drop = cl.drop

        def kill_then_drop():
            if shared["gen"][0].value == 0:
                shared["gen"][0].value += 1
                state["proc"].send_signal(signal.SIGKILL)
                state["proc"].wait()
                os.unlink(sock)
                shutil.copyfile(flushed, image)
                state["proc"] = start_nbdkit(sock, image)
                shared["up"][0].value = shared["gen"][0].value
            drop()

        cl.drop = kill_then_drop
        try:
            cl.libnbd_close(1024, 8, time.time())
        finally:
            proc = state["proc"]
        # Then a read of the sectors the kill took back.
        time.sleep(0.2)  # the dropped WRITE lands (its sectors are uncertain in the model)
        data = cl.h.pread(16 * SECTOR, 64 * SECTOR)
        cl.check(64, data, crash=False, phase="read")
        print(f"selftest: crash checks {cl.c['crash_checks']}, lost bytes {cl.c['lost_bytes']},"
              f" wrong bytes {cl.c['wrong_bytes']}")
        for f in cl.failures:
            print(f"  ! {f}")
        ok = cl.c["crash_checks"] == 1 and cl.c["lost_bytes"] == 0 and cl.c["wrong_bytes"] == 0
        print("selftest: PASS" if ok else "selftest: FAIL")
        return 0 if ok else 1
    finally:
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
