"""Shared fixtures of the peer tests: the ember binary and the peer data of `make setup`."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PEER_DATA = ROOT / ".cache" / "peer"


@pytest.fixture(scope="session")
def ember() -> Path:
    """The release ember binary (built by `make test` before pytest runs)."""
    path = Path(os.environ.get("EMBER", ROOT / "target" / "release" / "ember"))
    if not path.exists():
        subprocess.run(["cargo", "build", "--release", "--bin", "ember"], cwd=ROOT, check=True)
    assert path.exists(), f"{path} missing after cargo build"
    return path


@pytest.fixture(scope="session")
def peer_data() -> Path:
    """libCacheSim's sample traces, unpacked by scripts/setup.sh. Never skipped: absent data
    is a failure, because `make test` runs the setup first."""
    needed = ["cloudPhysicsIO.vscsi", "cloudPhysicsIO.oracleGeneral.bin"]
    missing = [n for n in needed if not (PEER_DATA / n).exists()]
    assert not missing, f"peer data {missing} missing in {PEER_DATA}: run `make setup`"
    return PEER_DATA
