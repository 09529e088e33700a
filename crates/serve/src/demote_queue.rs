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

#[cfg(test)]
mod tests {
    use super::*;
    use ember_nbd::{ClientBuilder, Export, ExportError, ExportFlags, ExportMap, Server};
    use std::sync::atomic::AtomicBool;
    use std::time::Duration;

    /// An export that holds each DEMOTE (and the connection's reader with it) until the test
    /// lets it go (at most 30 s).
    struct SlowArray(Arc<AtomicBool>);

    impl Export for SlowArray {
        fn size(&self) -> u64 {
            1 << 20
        }
        fn flags(&self) -> ExportFlags {
            ExportFlags::default()
        }
        fn read(&self, _: u64, buf: &mut [u8]) -> Result<(), ExportError> {
            buf.fill(0);
            Ok(())
        }
        fn accepts_demote(&self) -> bool {
            true
        }
        fn demote(&self, _: u64, _: &[u8]) -> Result<(), ExportError> {
            let t0 = std::time::Instant::now();
            while !self.0.load(Ordering::SeqCst) && t0.elapsed() < Duration::from_secs(30) {
                std::thread::sleep(Duration::from_millis(1));
            }
            Ok(())
        }
        fn write(&self, _: u64, _: &[u8], _: bool) -> Result<(), ExportError> {
            Ok(())
        }
        fn flush(&self) -> Result<(), ExportError> {
            Ok(())
        }
        fn trim(&self, _: u64, _: u64, _: bool) -> Result<(), ExportError> {
            Ok(())
        }
        fn write_zeroes(&self, _: u64, _: u64, _: bool, _: bool) -> Result<(), ExportError> {
            Ok(())
        }
    }

    #[test]
    fn a_full_queue_drops_demotes_without_waiting() {
        let dir = tempfile::tempdir().unwrap();
        let sock = dir.path().join("array.sock");
        let release = Arc::new(AtomicBool::new(false));
        let set = ExportMap::new().with("disk", "slow array", Arc::new(SlowArray(release.clone())));
        let server = Server::builder(Arc::new(set))
            .listen_unix(&sock)
            .unwrap()
            .build()
            .unwrap()
            .spawn()
            .unwrap();
        let client = ClientBuilder::new().export("disk").demote(true).connect_unix(&sock).unwrap();
        assert!(client.info().demote);
        let q = DemoteQueue::new(2).unwrap();
        let t0 = std::time::Instant::now();
        let sent: Vec<bool> = (0..5).map(|i| q.send(&client, i * 4096, &[7u8; 4096])).collect();
        // No reply can come before the release: a send that waited for room would wait the
        // array's 30 s.
        assert!(t0.elapsed() < Duration::from_secs(5), "send waited {:?}", t0.elapsed());
        assert_eq!(sent, [true, true, false, false, false]);
        release.store(true, Ordering::SeqCst);
        while q.replies().acknowledged.load(Ordering::Relaxed) < 2 {
            assert!(t0.elapsed() < Duration::from_secs(10));
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(q.send(&client, 0, &[7u8; 4096]), "room again once the replies came");
        assert_eq!(q.replies().failed.load(Ordering::Relaxed), 0);
        drop(client);
        server.shutdown().unwrap();
    }
}
