"""Running the ember binary from emberlab's tests (a module of its own: tests/peer has a
conftest too, and both suites may run in one pytest session)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path


def run(ember: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(ember), *map(str, args)], check=True, capture_output=True,
                          text=True)


def cli_json(ember: Path, tmp: Path, *args: str):
    out = tmp / "cli.json"
    run(ember, *args, "--json", out, "-q")
    return json.loads(out.read_text())
