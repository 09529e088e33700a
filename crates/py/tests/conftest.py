"""Fixtures of emberlab's tests: the ember binary (to compare against) and small traces it
generates. `make test` builds the binary and installs the wheel first."""

from __future__ import annotations

from pathlib import Path

import pytest

from cli_helpers import ember_binary, run

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="session")
def ember() -> Path:
    return ember_binary(ROOT)


@pytest.fixture(scope="session")
def traces(ember: Path, tmp_path_factory) -> dict:
    d = tmp_path_factory.mktemp("traces")
    t = {}
    t["zipf"] = d / "zipf.oracleGeneral.bin"
    run(ember, "trace", "gen", "zipf", "--alpha", "0.9", "--blocks", "5000", "--requests",
        "60000", "--seed", "3", "-o", t["zipf"])
    t["msr"] = d / "multi.csv"
    run(ember, "trace", "gen", "multi-client", "--clients", "3", "--blocks-per-client", "300",
        "--write-ratio", "0.2", "-o", t["msr"], "--format", "msr")
    t["ensemble"] = d / "ensemble.csv"
    run(ember, "trace", "gen", "ensemble", "-o", t["ensemble"], "--volumes", "4", "--days", "2",
        "--accesses-per-day", "20000")
    t["bonfire"] = d / "bonfire.csv"
    run(ember, "trace", "gen", "bonfire", "--days", "2.5", "--rate", "0.2", "--seed", "4",
        "--hourly", "0.8", "--daily-regions", "0", "--hourly-mean-age", "1800", "-o",
        t["bonfire"])
    return t
