//! An upstream NBD server as a device, so ember can front a remote or emulated disk (for
//! example nbdkit's memory plugin behind its delay filter, playing a 5 ms hard disk).

use crate::demote_queue::{DemoteQueue, DemoteReplies};
use ember_engine::device::identity::{digest, digest_bytes};
use ember_engine::device::{check_range, write_zeroes_by_writes, Identity};
use ember_engine::Device;
use ember_nbd::{Client, ClientBuilder, ClientError, NbdUri};
use std::io;
use std::sync::Arc;

/// Largest TRIM / WRITE_ZEROES length sent in one request (NBD lengths are 32-bit).
const MAX_DISCARD: u64 = 1 << 30;

/// An export of an NBD server, reached with ember's pipelining client. The client is shared
/// by every thread: requests from many threads are in flight at once on one connection.
pub struct NbdDevice {
    client: Client,
    uri: String,
    trusted: bool,
    /// With `--demote`, when the export granted `x-ember:demote`.
    demotes: Option<DemoteQueue>,
}

fn to_io(uri: &str, op: &str, e: ClientError) -> io::Error {
    let kind = match &e {
        ClientError::Io(io) => io.kind(),
        ClientError::Invalid(_) => io::ErrorKind::InvalidInput,
        _ => io::ErrorKind::Other,
    };
    io::Error::new(kind, format!("{uri}: {op}: {e}"))
}

impl NbdDevice {
    /// Connect to `uri` (`nbd://host:port/export` or `nbd+unix:///export?socket=PATH`).
    pub fn connect(uri: &str) -> io::Result<Self> {
        Self::connect_demoting(uri, None)
    }

    /// Connect to `uri`; with `demote_queue` = Some(N), ask for ember's DEMOTE extension and,
    /// if the export grants it, send DEMOTEs with at most N awaiting replies
    /// ([`NbdDevice::demotes`] tells whether it was granted).
    pub fn connect_demoting(uri: &str, demote_queue: Option<usize>) -> io::Result<Self> {
        let parsed =
            NbdUri::parse(uri).map_err(|e| to_io(uri, "connect", ClientError::Invalid(e)))?;
        let client = ClientBuilder::new()
            .export(&parsed.export)
            .demote(demote_queue.is_some())
            .connect(&parsed.endpoint)
            .map_err(|e| to_io(uri, "connect", e))?;
        if client.info().read_only() {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!("{uri}: the export is read-only; ember needs to write its backing"),
            ));
        }
        let demotes = match demote_queue {
            Some(n) if client.info().demote => Some(DemoteQueue::new(n)?),
            _ => None,
        };
        Ok(Self { client, uri: uri.to_string(), trusted: false, demotes })
    }

    /// The replies to this device's DEMOTEs, if the export granted them.
    pub fn demotes(&self) -> Option<Arc<DemoteReplies>> {
        self.demotes.as_ref().map(|q| q.replies())
    }

    /// Trust that nobody but ember writes this export, so a warm start may keep its cached
    /// blocks (`ember serve --trust-nbd-backing`). Its identity is then its URI and size;
    /// without this it cannot be identified and never starts warm.
    pub fn trust_unchanged(mut self) -> Self {
        self.trusted = true;
        self
    }

    /// The export's capabilities as the handshake reported them.
    pub fn info(&self) -> &ember_nbd::ExportInfo {
        self.client.info()
    }
}

impl Device for NbdDevice {
    fn size(&self) -> u64 {
        self.client.size()
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        check_range(self.size(), offset, buf.len() as u64, "read")?;
        self.client.read(offset, buf).map_err(|e| to_io(&self.uri, "read", e))
    }

    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        check_range(self.size(), offset, data.len() as u64, "write")?;
        self.client.write(offset, data, false).map_err(|e| to_io(&self.uri, "write", e))
    }

    fn sync(&self) -> io::Result<()> {
        // A server without NBD_FLAG_SEND_FLUSH has no volatile cache to flush.
        if !self.client.info().can_flush() {
            return Ok(());
        }
        self.client.flush().map_err(|e| to_io(&self.uri, "flush", e))
    }

    fn trim(&self, offset: u64, len: u64) -> io::Result<()> {
        check_range(self.size(), offset, len, "trim")?;
        if !self.client.info().can_trim() {
            return Ok(()); // TRIM is advisory
        }
        let mut pos = offset;
        while pos < offset + len {
            let n = MAX_DISCARD.min(offset + len - pos);
            self.client.trim(pos, n as u32, false).map_err(|e| to_io(&self.uri, "trim", e))?;
            pos += n;
        }
        Ok(())
    }

    fn write_zeroes(&self, offset: u64, len: u64) -> io::Result<()> {
        check_range(self.size(), offset, len, "write-zeroes")?;
        if !self.client.info().can_write_zeroes() {
            return write_zeroes_by_writes(self, offset, len);
        }
        let mut pos = offset;
        while pos < offset + len {
            let n = MAX_DISCARD.min(offset + len - pos);
            self.client
                .write_zeroes(pos, n as u32, false, false)
                .map_err(|e| to_io(&self.uri, "write-zeroes", e))?;
            pos += n;
        }
        Ok(())
    }

    fn describe(&self) -> String {
        self.uri.clone()
    }

    fn takes_demotes(&self) -> bool {
        self.demotes.is_some()
    }

    fn demote(&self, offset: u64, data: &[u8]) -> bool {
        self.demotes.as_ref().is_some_and(|q| q.send(&self.client, offset, data))
    }

    fn identity(&self) -> io::Result<Identity> {
        if !self.trusted {
            return Ok(Identity::Unknown(
                "an NBD export: ember cannot tell whether another client wrote it while ember \
                 was stopped (--trust-nbd-backing trusts that only ember writes it)",
            ));
        }
        let medium = digest(&[4, digest_bytes(self.uri.as_bytes()), self.size()]);
        Ok(Identity::Known { medium, state: medium })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ember_nbd::{ExportMap, MemExport, Server};
    use std::sync::Arc;

    #[test]
    fn round_trip_through_an_nbd_server() {
        let dir = tempfile::tempdir().unwrap();
        let sock = dir.path().join("up.sock");
        let mem = Arc::new(MemExport::new(1 << 20));
        let server = Server::builder(Arc::new(ExportMap::new().with("disk", "test", mem.clone())))
            .listen_unix(&sock)
            .unwrap()
            .build()
            .unwrap()
            .spawn()
            .unwrap();
        let uri = format!("nbd+unix:///disk?socket={}", sock.display());
        let d = NbdDevice::connect(&uri).unwrap();
        assert_eq!(d.size(), 1 << 20);
        let data: Vec<u8> = (0..10_000u32).map(|i| (i % 253) as u8).collect();
        d.write_at(12_345, &data).unwrap();
        let mut got = vec![0u8; data.len()];
        d.read_at(12_345, &mut got).unwrap();
        assert_eq!(got, data);
        d.sync().unwrap();
        d.trim(12_345, 100).unwrap();
        d.write_zeroes(20_000, 50).unwrap();
        d.read_at(12_345, &mut got).unwrap();
        assert!(got[7_655..7_705].iter().all(|&b| b == 0), "write-zeroes reads zeros");
        assert!(d.read_at((1 << 20) - 1, &mut [0u8; 2]).is_err());
        let bad = NbdDevice::connect(&format!("nbd+unix:///nope?socket={}", sock.display()));
        assert!(bad.is_err());
        drop(d);
        server.shutdown().unwrap();
    }
}
