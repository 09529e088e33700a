"""A minimal NBD client over a Unix socket (fixed newstyle, NBD_OPT_EXPORT_NAME, simple
replies) for what a library would not do: drop a connection mid-handshake or mid-request."""

from __future__ import annotations

import socket
import struct


NBD_OPT_EXPORT_NAME = 1
REQ_MAGIC = 0x25609513
CMD_READ, CMD_WRITE = 0, 1


def raw_connect(sock_path: str, export: str, timeout: float = 10.0):
    """Fixed-newstyle handshake with NBD_OPT_EXPORT_NAME; returns the socket."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    s.connect(sock_path)
    hello = recv_exact(s, 18)
    if hello[:16] != b"NBDMAGICIHAVEOPT":
        raise OSError(f"bad greeting {hello[:16]!r}")
    (hflags,) = struct.unpack(">H", hello[16:])
    no_zeroes = hflags & 2
    s.sendall(struct.pack(">I", 1 | (2 if no_zeroes else 0)))
    name = export.encode()
    s.sendall(b"IHAVEOPT" + struct.pack(">II", NBD_OPT_EXPORT_NAME, len(name)) + name)
    recv_exact(s, 10 if no_zeroes else 134)
    return s


def recv_exact(s, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise OSError("connection closed by the server")
        buf += chunk
    return buf


def request(cmd: int, handle: int, offset: int, length: int) -> bytes:
    return struct.pack(">IHHQQI", REQ_MAGIC, 0, cmd, handle, offset, length)
