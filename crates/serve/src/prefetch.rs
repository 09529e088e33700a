//! NBD_CMD_CACHE answered before its load ends, as the protocol allows ("the server MAY
//! reply before the data is cached") and qemu expects of a prefetch: the reply goes out at
//! once and one loader thread per server loads the range in the background
//! ([`ember_engine::Volume::load`]).
//!
//! Bounded: at most [`QUEUED_LOADS`] CACHE requests wait for the loader, server-wide. Past
//! that a CACHE is loaded before its reply (as a CACHE of an engine without a loader is),
//! so a client that sends CACHE after CACHE waits for its own loads instead of queueing
//! unbounded work; no CACHE is dropped. A waiting load holds a volume handle and two
//! integers, whatever its length.
//!
//! Semantics are the engine's: a load fills only blocks not cached, under the stripe locks
//! of its chunk, so a WRITE sent after the CACHE (even while its load is under way) is never
//! overwritten by the loaded copy; a READ of a block being loaded waits for it. Loads run in
//! pieces of one chunk, so a shutdown or a volume's removal waits for one piece at most.

use ember_engine::{EngineError, Volume, CHUNK_BLOCKS};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};

/// CACHE requests that may wait for the loader at once, over every connection.
pub const QUEUED_LOADS: usize = 64;

/// One CACHE request waiting for the loader.
struct Load {
    volume: Volume,
    offset: u64,
    len: u64,
}

/// The loader of one server: where CACHE requests are queued.
pub struct Loads {
    tx: SyncSender<Load>,
}

impl Loads {
    /// Start the loader thread; `None` if it cannot be started (every CACHE is then loaded
    /// before its reply). The thread ends once every handle to this is dropped and the loads
    /// queued by then are done.
    pub fn start() -> Option<Loads> {
        let (tx, rx) = sync_channel(QUEUED_LOADS);
        std::thread::Builder::new()
            .name("nbd-cache-load".into())
            .spawn(move || run(rx))
            .ok()
            .map(|_| Loads { tx })
    }

    /// Queue the load of `len` bytes at `offset` of `volume` (a range inside the volume).
    /// False if the queue is full (or the loader is gone): the caller loads it itself.
    pub fn queue(&self, volume: &Volume, offset: u64, len: u64) -> bool {
        let load = Load { volume: volume.clone(), offset, len };
        self.tx.try_send(load).is_ok()
    }
}

/// The loader: each queued range, in order, a chunk at a time.
fn run(rx: Receiver<Load>) {
    while let Ok(Load { volume, offset, len }) = rx.recv() {
        // A failed load (backing refused a read, a shutdown) leaves the rest of the range
        // unloaded: CACHE is advice, and its reply is gone.
        let _ = load_in_pieces(&volume, offset, len);
    }
}

/// [`Volume::load`] in pieces of one chunk (the engine's own unit of a load).
pub fn load_in_pieces(volume: &Volume, offset: u64, len: u64) -> Result<u64, EngineError> {
    let piece = CHUNK_BLOCKS * u64::from(volume.block_size());
    let end = offset + len;
    let mut pos = offset;
    let mut loaded = 0;
    while pos < end {
        // Piece boundaries on chunk boundaries, so no block is loaded by two pieces.
        let stop = end.min((pos / piece + 1) * piece);
        loaded += volume.load(pos, stop - pos)?;
        pos = stop;
    }
    Ok(loaded)
}
