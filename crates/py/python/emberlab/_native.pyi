"""Type stubs of emberlab._native, the Rust extension (crates/py/src/lib.rs). Each function
takes the argument list of its `ember` subcommand (without program and subcommand names)."""

from typing import Any, Dict, List, Optional, Tuple, Union

__version__: str

class EmberError(Exception):
    """An error reported by ember: a bad argument, an unreadable file, or a malformed trace
    record (the message names the file and line)."""

def sim(argv: List[str]) -> Tuple[str, Optional[str]]:
    """`ember sim`: (the CSV `--csv` writes, the timeline CSV or None)."""

def sim_plugin(argv: List[str], factory: Any, name: str) -> Tuple[str, Optional[str]]:
    """`ember sim` with a policy class written in Python (called with the capacity in
    blocks; see emberlab.plugin) named `name` in the policy column."""

def analyze(argv: List[str]) -> str:
    """`ember analyze`: the JSON document `--json` writes."""

def warmup(argv: List[str]) -> str:
    """`ember warmup run`: the JSON document `--json` writes."""

def demote(argv: List[str]) -> str:
    """`ember demote`: the JSON document `--json` writes, plus a `trace` object."""

def sievestore(argv: List[str]) -> Tuple[str, str]:
    """`ember sievestore`: ("experiment" or "runs", the JSON document)."""

def read_trace(argv: List[str]) -> Dict[str, Union[bytes, List[str], int]]:
    """Little-endian column buffers time_ns (u64), volume (u32), op (u8), offset (u64),
    length (u32), plus `volumes` (names) and `skipped` (records skipped)."""

def write_trace(
    path: str,
    format: Optional[str],
    block_size: int,
    n: int,
    time_ns: bytes,
    volume: bytes,
    op: bytes,
    offset: bytes,
    length: bytes,
    volumes: List[str],
) -> None:
    """Write `n` requests from the column buffers of `read_trace` to `path`."""
