"""Sector stamps and the checker: the set of values the NBD contract allows in each
512-byte sector of a client's region (docs/design/testing.md, "The checker")."""

from __future__ import annotations

import struct
from array import array

SECTOR = 512
MAGIC = b"EMBRSOAK"
ZERO = -1  # the value "all zeros"; generations are >= 0, 0 being the prefill
ZEROS = bytes(SECTOR)


def stamp(export: int, sector: int, gen: int) -> bytes:
    """The 512 bytes generation `gen` of `sector` of export `export` holds."""
    if gen == ZERO:
        return ZEROS
    return struct.pack("<8sQQQ", MAGIC, export, sector, gen) * (SECTOR // 32)


def describe(data: bytes) -> str:
    """What a sector that failed its check holds, for the report."""
    if data == ZEROS:
        return "zeros"
    head = data[:32]
    magic, export, sector, gen = struct.unpack("<8sQQQ", head)
    if magic == MAGIC:
        whole = head * (SECTOR // 32) == data
        return f"stamp(export {export}, sector {sector}, gen {gen}){'' if whole else ' torn'}"
    return "foreign bytes " + data[:16].hex()


def fill(export: int, first: int, gens) -> bytes:
    """Contents of consecutive sectors from `first` holding generations `gens`."""
    return b"".join(stamp(export, first + i, g) for i, g in enumerate(gens))


# ----------------------------------------------------------------------------------------
# The checker


class Model:
    """What each sector of a client's region may hold (see the module doc).

    `cur`: the value while the server runs, `multi` the sectors where it is one of several.
    `dur`/`dur_multi`: the values as of the last acknowledged FLUSH. `pend`: values written
    since (sector -> set). All indices are absolute sector numbers of the export.
    """

    def __init__(self, export: int, lo: int, n: int):
        self.export, self.lo, self.n = export, lo, n
        self.cur = array("q", [0]) * n
        self.multi: dict[int, set] = {}
        self.dur = array("q", [0]) * n
        self.dur_multi: dict[int, set] = {}
        self.pend: dict[int, set] = {}
        self.quarantine: dict[int, float] = {}  # sector -> until when a stray write may land

    def cur_set(self, s: int) -> set:
        m = self.multi.get(s)
        return set(m) if m is not None else {self.cur[s - self.lo]}

    def allowed_after_crash(self, s: int) -> set:
        m = self.dur_multi.get(s)
        base = set(m) if m is not None else {self.dur[s - self.lo]}
        return base | self.pend.get(s, set())

    def written(self, first: int, gens, certain: bool, fua: bool = False):
        """A write of `gens` (or ZERO) from sector `first`: acknowledged (`certain`) or not."""
        for i, g in enumerate(gens):
            s = first + i
            if certain:
                self.cur[s - self.lo] = g
                self.multi.pop(s, None)
                if fua:
                    self.dur[s - self.lo] = g
                    self.dur_multi.pop(s, None)
                    self.pend.pop(s, None)
                    continue
            else:
                self.multi[s] = self.cur_set(s) | {g}
            self.pend.setdefault(s, set()).add(g)

    def trimmed(self, first: int, n: int):
        """A TRIM, acknowledged or not: old value or zeros."""
        self.written(first, [ZERO] * n, certain=False)

    def flushed(self):
        self.dur = array("q", self.cur)
        self.dur_multi = {s: set(v) for s, v in self.multi.items()}
        self.pend.clear()

    def pin(self, s: int, value: int):
        self.cur[s - self.lo] = value
        self.multi.pop(s, None)

    def quarantined(self, first: int, n: int, now: float) -> bool:
        if not self.quarantine:
            return False
        for s in range(first, first + n):
            t = self.quarantine.get(s)
            if t is not None:
                if t > now:
                    return True
                del self.quarantine[s]
        return False

    def value_of(self, s: int, data: bytes, candidates) -> int | None:
        """Which candidate value `data` is, or None."""
        for g in candidates:
            if data == stamp(self.export, s, g):
                return g
        return None
