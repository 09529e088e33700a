//! The client tier's DEMOTE queue (`ember serve --demote`): DEMOTEs go out on the wire at
//! once, in order with the READs after them, and their replies are collected by a thread, so
//! the evicting request never waits for the array. At most `capacity` DEMOTEs are awaiting
//! their replies; a DEMOTE beyond that is dropped (it is a hint) and the caller counts it.

use ember_nbd::{Client, InFlight};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{sync_channel, SyncSender};
use std::sync::Arc;

/// What the reply collector counts.
#[derive(Debug, Default)]
pub struct DemoteReplies {
    /// DEMOTEs the array answered with success ("received", not "kept").
    pub acknowledged: AtomicU64,
    /// DEMOTEs the array answered with an error, or lost with the connection.
    pub failed: AtomicU64,
}

/// A bounded queue of DEMOTEs awaiting their replies.
pub struct DemoteQueue {
    tx: SyncSender<InFlight>,
    waiting: Arc<AtomicUsize>,
    capacity: usize,
    replies: Arc<DemoteReplies>,
}

impl DemoteQueue {
    /// A queue of at most `capacity` (at least 1) DEMOTEs awaiting replies, with its reply
    /// collector thread (it ends when the queue is dropped).
    pub fn new(capacity: usize) -> std::io::Result<Self> {
        let capacity = capacity.max(1);
        let (tx, rx) = sync_channel::<InFlight>(capacity);
        let waiting = Arc::new(AtomicUsize::new(0));
        let replies = Arc::new(DemoteReplies::default());
        let (w, r) = (waiting.clone(), replies.clone());
        std::thread::Builder::new().name("demote-replies".into()).spawn(move || {
            for f in rx {
                match f.wait() {
                    Ok(_) => r.acknowledged.fetch_add(1, Ordering::Relaxed),
                    Err(_) => r.failed.fetch_add(1, Ordering::Relaxed),
                };
                w.fetch_sub(1, Ordering::AcqRel);
            }
        })?;
        Ok(Self { tx, waiting, capacity, replies })
    }

    /// Send a DEMOTE of `data` at `offset` on `client`, unless `capacity` DEMOTEs already
    /// await replies. Returns whether it was sent.
    pub fn send(&self, client: &Client, offset: u64, data: &[u8]) -> bool {
        if self.waiting.fetch_add(1, Ordering::AcqRel) >= self.capacity {
            self.waiting.fetch_sub(1, Ordering::AcqRel);
            return false;
        }
        match client.start_demote(offset, data) {
            Ok(f) => {
                if self.tx.send(f).is_err() {
                    self.waiting.fetch_sub(1, Ordering::AcqRel);
                }
                true
            }
            Err(_) => {
                self.waiting.fetch_sub(1, Ordering::AcqRel);
                false
            }
        }
    }

    /// The replies counted so far.
    pub fn replies(&self) -> Arc<DemoteReplies> {
        self.replies.clone()
    }
}
