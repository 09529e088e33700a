"""Running the ember binary from emberlab's tests (a module of its own: tests/peer has a
conftest too, and both suites may run in one pytest session)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path


def ember_binary(root: Path) -> Path:
    """The ember binary: $EMBER, else the release build under `root`, built if missing."""
    path = Path(os.environ.get("EMBER", root / "target" / "release" / "ember"))
    if not path.exists():
        subprocess.run(["cargo", "build", "--release", "--bin", "ember"], cwd=root, check=True)
    assert path.exists(), f"{path} missing after cargo build"
    return path


def run(ember: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(ember), *map(str, args)], check=True, capture_output=True,
                          text=True)


def cli_json(ember: Path, tmp: Path, *args: str):
    out = tmp / "cli.json"
    run(ember, *args, "--json", out, "-q")
    return json.loads(out.read_text())
