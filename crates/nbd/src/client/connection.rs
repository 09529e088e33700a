//! A connection in the transmission phase: the [`Client`] handle, what it knows of the
//! export, and closing it (a soft disconnect waits for every reply first). Opening one is
//! `open.rs`; its requests are `requests.rs`; the reader thread is `replies.rs`.
//! Lock order: `writer` and the pending table are never held together here.

use std::io::{self, Write};
use std::net::Shutdown;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use super::connect::detect_dead_peer;
use super::error::ClientError;
use super::info::ExportInfo;
use super::pending::Shared;
use crate::request::{Command, Request};
use crate::stream::Stream;

/// A connection in the transmission phase.
pub struct Client {
    pub(super) info: ExportInfo,
    pub(super) writer: Mutex<Stream>,
    pub(super) shared: Arc<Shared>,
    pub(super) next_cookie: AtomicU64,
    pub(super) reader: Option<JoinHandle<()>>,
    pub(super) disconnected: AtomicBool,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client").field("info", &self.info).finish()
    }
}

impl Client {
    /// What the handshake learned about the export.
    pub fn info(&self) -> &ExportInfo {
        &self.info
    }

    /// Export size in bytes.
    pub fn size(&self) -> u64 {
        self.info.size
    }

    /// Change how long the server's host may stay silent before this connection fails (see
    /// [`ClientBuilder::dead_peer_timeout`](super::ClientBuilder::dead_peer_timeout); `None`:
    /// never). No effect on a Unix socket.
    pub fn set_dead_peer_timeout(&self, after: Option<Duration>) -> io::Result<()> {
        let writer = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        match &*writer {
            Stream::Tcp(s) => detect_dead_peer(s.as_raw_fd(), after),
            Stream::Unix(_) => Ok(()),
        }
    }

    /// Requests sent whose replies have not arrived.
    pub fn in_flight(&self) -> usize {
        self.shared.lock().outstanding
    }

    /// Soft disconnect: wait for every reply, send NBD_CMD_DISC, close.
    pub fn disconnect(mut self) -> Result<(), ClientError> {
        self.close(true)
    }

    fn close(&mut self, wait_idle: bool) -> Result<(), ClientError> {
        if self.disconnected.swap(true, Ordering::SeqCst) {
            return Ok(());
        }
        if wait_idle {
            let mut pending = self.shared.lock();
            while pending.outstanding > 0 && pending.dead.is_none() {
                pending = self.shared.idle.wait(pending).unwrap_or_else(|p| p.into_inner());
            }
        }
        let alive = self.shared.lock().dead.is_none();
        let mut result = Ok(());
        {
            let mut writer = self.writer.lock().unwrap_or_else(|p| p.into_inner());
            if alive {
                let disc = Request {
                    flags: 0,
                    command: Command::Disc,
                    cookie: self.next_cookie.fetch_add(1, Ordering::Relaxed),
                    offset: 0,
                    length: 0,
                };
                if let Err(e) = writer.write_all(&disc.encode()) {
                    result = Err(ClientError::Io(e));
                }
            }
            writer.shutdown(Shutdown::Both);
        }
        if let Some(reader) = self.reader.take() {
            let _ = reader.join();
        }
        result
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        let _ = self.close(false);
    }
}
