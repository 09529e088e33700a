#!/usr/bin/env python3
"""Run the shell and Python blocks of README.md and docs/guide/*.md, so the docs cannot rot.

Every fenced block whose info string starts with ``sh`` or ``python`` is run, in order, one
script per file, in a scratch directory of its own: the blocks of one file share the shell
(variables, background servers), so a tutorial reads top to bottom as a user types it.
``ember`` on the PATH is the built binary (``--ember``, default ``target/release/ember``)
and ``.venv/bin`` comes next, so ``python3`` has emberlab. A ``python`` block runs as one
``python3`` script.

A block that needs what a machine may lack carries its reason in the info string and is not
run::

    ```sh skip="needs the kernel nbd module (/dev/nbd0)"

The runner prints how many blocks ran and how many were skipped (with the reasons), and
exits 1 when an untagged block fails, naming its file and line and printing the end of the
output. As root (with ``unshare``) each file runs in a network namespace of its own, so the
default ports the docs use (127.0.0.1:10809, :9100) cannot meet another program's; whatever a
failing file leaves behind (mounts under its scratch directory, loop devices over its files,
processes) is undone before the next file.

Usage: scripts/doc_blocks.py [--ember PATH] [--timeout SECONDS] [--scratch DIR] [--keep] [-v]
                             [FILE ...]
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional

ROOT = Path(__file__).resolve().parent.parent
RUN_LANGUAGES = {"sh", "python"}
FENCE = re.compile(r"^(`{3,})(.*)$")
ATTR = re.compile(r'\s*([A-Za-z_][A-Za-z0-9_-]*)="([^"]*)"')


@dataclass
class Block:
    """One fenced block: where it is, its language, its attributes and its text."""

    path: Path
    line: int
    language: str
    attrs: Dict[str, str]
    text: str

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT) if self.path.is_relative_to(ROOT) else self.path}:{self.line}"


@dataclass
class FileResult:
    """What happened to the blocks of one file."""

    path: Path
    ran: int = 0
    skipped: List[Block] = field(default_factory=list)
    failed: Optional[Block] = None
    seconds: float = 0.0
    output: str = ""


class DocError(Exception):
    """A block the runner cannot accept (an unclosed fence, an unknown attribute)."""


def parse_blocks(path: Path) -> List[Block]:
    """Every fenced block of `path` in a language the runner runs."""
    blocks: List[Block] = []
    lines = path.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, info = m.group(1), m.group(2).strip()
        start = i + 1
        j = start
        while j < len(lines) and not lines[j].startswith(fence):
            j += 1
        if j == len(lines):
            raise DocError(f"{path}:{i + 1}: the block opened here is never closed")
        language, _, rest = info.partition(" ")
        if language in RUN_LANGUAGES:
            attrs: Dict[str, str] = {}
            pos = 0
            rest = rest.strip()
            while pos < len(rest):
                a = ATTR.match(rest, pos)
                if not a:
                    raise DocError(f"{path}:{i + 1}: cannot read the info string {info!r}")
                attrs[a.group(1)] = a.group(2)
                pos = a.end()
            unknown = set(attrs) - {"skip"}
            if unknown:
                raise DocError(f"{path}:{i + 1}: unknown attribute(s) {sorted(unknown)}")
            if "skip" in attrs and not attrs["skip"].strip():
                raise DocError(f'{path}:{i + 1}: skip="" needs a reason')
            blocks.append(Block(path, i + 1, language, attrs, "\n".join(lines[start:j])))
        i = j + 1
    return blocks


def script_for(blocks: List[Block], state: Path, netns: bool) -> str:
    """The bash script that runs `blocks` in order, recording which one is running."""
    out = [
        "set -euo pipefail",
        f"__doc_block() {{ printf '%s\\n' \"$1\" > {shlex.quote(str(state))}; "
        "printf '\\n::: block %s\\n' \"$2\"; }",
    ]
    if netns:
        out.append("ip link set lo up")
    for n, b in enumerate(blocks):
        out.append(f"__doc_block {n} {shlex.quote(b.where)}")
        if b.language == "python":
            marker = "__EMBER_DOC_PYTHON__"
            if marker in b.text:
                raise DocError(f"{b.where}: a python block may not contain {marker}")
            out.append(f"python3 - <<'{marker}'\n{b.text}\n{marker}")
        else:
            out.append(b.text)
    out.append(f"__doc_block {len(blocks)} end")
    return "\n".join(out) + "\n"


def can_isolate() -> bool:
    """Whether each file can run in a network namespace of its own (root, unshare, ip)."""
    if os.geteuid() != 0 or not shutil.which("unshare") or not shutil.which("ip"):
        return False
    return subprocess.run(["unshare", "--net", "true"], capture_output=True).returncode == 0


def mounts_under(directory: Path) -> List[tuple]:
    """(mount point, file system type) of every mount at or below `directory`, newest first."""
    found = []
    prefix = str(directory)
    with open("/proc/self/mounts", encoding="utf-8") as f:
        for line in f:
            parts = line.split()
            if len(parts) < 3:
                continue
            point = parts[1].replace("\\040", " ")
            if point == prefix or point.startswith(prefix + "/"):
                found.append((point, parts[2]))
    return list(reversed(found))


def loops_over(directory: Path) -> List[str]:
    """Loop devices whose backing file lies below `directory`."""
    if not shutil.which("losetup"):
        return []
    r = subprocess.run(
        ["losetup", "--list", "--noheadings", "--output", "NAME,BACK-FILE"],
        capture_output=True,
        text=True,
    )
    devices = []
    for line in r.stdout.splitlines():
        parts = line.split(None, 1)
        if len(parts) == 2 and parts[1].strip().startswith(str(directory) + "/"):
            devices.append(parts[0])
    return devices


def quiet(cmd: List[str]) -> None:
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=30)


def tear_down(directory: Path, proc: subprocess.Popen) -> None:
    """Undo what the blocks of one file left: mounts, loop devices, then its processes."""
    for point, fstype in mounts_under(directory):
        if not fstype.startswith("fuse"):
            quiet(["umount", point])
    for dev in loops_over(directory):
        quiet(["losetup", "-d", dev])
    for point, fstype in mounts_under(directory):
        if fstype.startswith("fuse"):
            quiet(["fusermount3", "-u", point] if shutil.which("fusermount3") else ["umount", point])
    # The script ran as the leader of its own process group: what it started in the
    # background (servers, nbdfuse) is in that group.
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            try:
                os.killpg(proc.pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.05)


def scratch_base(asked: Optional[Path]) -> Optional[Path]:
    """Where the scratch directories go: `asked`, else a roomy tmpfs (deleting what the
    blocks wrote on a busy disk can take longer than running them), else the default."""
    if asked:
        return asked
    shm = Path("/dev/shm")
    try:
        st = os.statvfs(shm)
    except OSError:
        return None
    return shm if st.f_bavail * st.f_frsize >= 4 << 30 and os.access(shm, os.W_OK) else None


def run_file(path: Path, bin_dir: Path, timeout: float, netns: bool, keep: bool,
             verbose: bool, base: Optional[Path]) -> FileResult:
    result = FileResult(path)
    blocks = parse_blocks(path)
    runnable = [b for b in blocks if "skip" not in b.attrs]
    result.skipped = [b for b in blocks if "skip" in b.attrs]
    if not runnable:
        return result
    scratch = Path(tempfile.mkdtemp(prefix=f"ember-doc-{path.stem}-", dir=base))
    state = Path(tempfile.mkstemp(prefix="ember-doc-state-", dir=base)[1])
    script = scratch.parent / f"{scratch.name}.sh"
    script.write_text(script_for(runnable, state, netns), encoding="utf-8")
    log = scratch.parent / f"{scratch.name}.log"
    env = dict(os.environ)
    venv = ROOT / ".venv" / "bin"
    env["PATH"] = os.pathsep.join([str(bin_dir), str(venv), env.get("PATH", "")])
    env.pop("VIRTUAL_ENV", None)
    cmd = ["bash", str(script)]
    if netns:
        cmd = ["unshare", "--net", "--"] + cmd
    started = time.monotonic()
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, cwd=scratch, env=env, stdin=subprocess.DEVNULL,
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            rc = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            rc = None
        tear_down(scratch, proc)
        if rc is None:
            proc.wait()
    result.seconds = time.monotonic() - started
    result.output = log.read_text(encoding="utf-8", errors="replace")
    reached = state.read_text().strip()
    last = int(reached) if reached.isdigit() else 0
    if rc == 0 and last == len(runnable):
        result.ran = len(runnable)
    else:
        result.ran = last
        result.failed = runnable[min(last, len(runnable) - 1)]
        if rc is None:
            result.output += f"\n(doc_blocks: stopped after {timeout:.0f} s)\n"
    if verbose:
        sys.stdout.write(result.output)
    state.unlink()
    if keep:
        print(f"  kept {scratch} ({script.name}, {log.name} beside it)")
    else:
        shutil.rmtree(scratch, ignore_errors=True)
        script.unlink()
        log.unlink()
    return result


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("files", nargs="*", type=Path,
                   help="markdown files (default: README.md and docs/guide/*.md)")
    p.add_argument("--ember", type=Path, default=ROOT / "target" / "release" / "ember",
                   help="the ember binary the blocks run (default: target/release/ember)")
    p.add_argument("--timeout", type=float, default=300, help="seconds per file (default 300)")
    p.add_argument("--keep", action="store_true", help="keep each file's scratch directory")
    p.add_argument("--scratch", type=Path,
                   help="where the scratch directories go (default: /dev/shm if it has 4 GiB "
                        "free, else the temporary directory)")
    p.add_argument("-v", "--verbose", action="store_true", help="print every block's output")
    args = p.parse_args()
    files = args.files or [ROOT / "README.md"] + sorted((ROOT / "docs" / "guide").glob("*.md"))
    ember = args.ember.resolve()
    if not os.access(ember, os.X_OK):
        print(f"doc_blocks: {ember} is not built; run `make build` first", file=sys.stderr)
        return 2
    netns = can_isolate()
    print(f"doc_blocks: {len(files)} files, ember {ember}, "
          + ("each file in its own network namespace" if netns
             else "no network namespace (not root): the docs' default ports must be free"))
    base = scratch_base(args.scratch)
    bin_dir = Path(tempfile.mkdtemp(prefix="ember-doc-bin-"))
    (bin_dir / "ember").symlink_to(ember)
    results: List[FileResult] = []
    started = time.monotonic()
    try:
        for f in files:
            try:
                r = run_file(f.resolve(), bin_dir, args.timeout, netns, args.keep, args.verbose,
                             base)
            except DocError as e:
                print(f"doc_blocks: {e}", file=sys.stderr)
                return 1
            results.append(r)
            rel = r.path.relative_to(ROOT) if r.path.is_relative_to(ROOT) else r.path
            status = "FAILED" if r.failed else "ok"
            print(f"  {rel}: {r.ran} ran, {len(r.skipped)} skipped, {r.seconds:.1f} s  {status}")
            if r.failed:
                break
    finally:
        shutil.rmtree(bin_dir, ignore_errors=True)
    ran = sum(r.ran for r in results)
    skipped = [b for r in results for b in r.skipped]
    print(f"doc_blocks: {ran} blocks ran, {len(skipped)} skipped, "
          f"in {time.monotonic() - started:.1f} s")
    for b in skipped:
        print(f"  skipped {b.where}: {b.attrs['skip']}")
    failed = [r for r in results if r.failed]
    for r in failed:
        b = r.failed
        tail = "\n".join(r.output.splitlines()[-60:])
        print(f"\ndoc_blocks: FAILED: the {b.language} block at {b.where}:\n{b.text}\n"
              f"--- the end of the file's output ---\n{tail}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
