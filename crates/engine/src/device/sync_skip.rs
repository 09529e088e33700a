//! A backing device that skips a sync no write needs: every write, TRIM and WRITE_ZEROES
//! counts one more *write generation* when it returns (failed or not: a failed write may have
//! changed the medium), and a sync is skipped when every counted write was already covered
//! by a successful sync that started after it returned. Barriers sync every backing volume
//! (write-back persist at every FLUSH and FUA); when nothing reached a volume since its
//! last sync (the flusher syncs after each of its batches), that sync is pure cost: on a
//! disk, a cache flush per barrier, which made write-back persist no faster than
//! write-through on the thesis' fsync-heavy varmail (bench/thesis-ch6, docs/benchmarks.md).
//!
//! Correct by construction: a sync is skipped only if no write returned since the newest
//! successful sync began, and a FLUSH concerns only writes that returned before it.

use super::{Device, Identity};
use std::io;
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
use std::sync::Arc;

/// `inner` with its needless syncs skipped.
pub struct SyncSkip {
    inner: Arc<dyn Device>,
    /// Writes returned so far.
    written: AtomicU64,
    /// The largest `written` read before a sync that then succeeded.
    synced: AtomicU64,
    /// Syncs skipped (for tests and metrics).
    skipped: AtomicU64,
}

impl SyncSkip {
    /// Wrap `inner`.
    pub fn new(inner: Arc<dyn Device>) -> Self {
        SyncSkip {
            inner,
            written: AtomicU64::new(0),
            synced: AtomicU64::new(0),
            skipped: AtomicU64::new(0),
        }
    }

    /// Syncs skipped so far.
    pub fn skipped(&self) -> u64 {
        self.skipped.load(SeqCst)
    }

    fn wrote<T>(&self, r: io::Result<T>) -> io::Result<T> {
        self.written.fetch_add(1, SeqCst);
        r
    }
}

impl Device for SyncSkip {
    fn size(&self) -> u64 {
        self.inner.size()
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.inner.read_at(offset, buf)
    }

    fn read_if_cached(&self, offset: u64, buf: &mut [u8]) -> Option<io::Result<()>> {
        self.inner.read_if_cached(offset, buf)
    }

    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        self.wrote(self.inner.write_at(offset, data))
    }

    fn sync(&self) -> io::Result<()> {
        let before = self.written.load(SeqCst);
        if before == self.synced.load(SeqCst) {
            self.skipped.fetch_add(1, SeqCst);
            return Ok(());
        }
        self.inner.sync()?;
        self.synced.fetch_max(before, SeqCst);
        Ok(())
    }

    fn trim(&self, offset: u64, len: u64) -> io::Result<()> {
        self.wrote(self.inner.trim(offset, len))
    }

    fn write_zeroes(&self, offset: u64, len: u64) -> io::Result<()> {
        self.wrote(self.inner.write_zeroes(offset, len))
    }

    fn describe(&self) -> String {
        self.inner.describe()
    }

    fn reads_from_memory(&self) -> bool {
        self.inner.reads_from_memory()
    }

    fn takes_demotes(&self) -> bool {
        self.inner.takes_demotes()
    }

    fn demote(&self, offset: u64, data: &[u8]) -> bool {
        // A DEMOTE hands the array a clean copy; it changes nothing a FLUSH concerns.
        self.inner.demote(offset, data)
    }

    fn identity(&self) -> io::Result<Identity> {
        self.inner.identity()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::MemDevice;
    use std::sync::atomic::AtomicU64;

    /// Counts the syncs that reach the device.
    struct Counting(MemDevice, AtomicU64);

    impl Device for Counting {
        fn size(&self) -> u64 {
            self.0.size()
        }
        fn read_at(&self, o: u64, b: &mut [u8]) -> io::Result<()> {
            self.0.read_at(o, b)
        }
        fn write_at(&self, o: u64, d: &[u8]) -> io::Result<()> {
            self.0.write_at(o, d)
        }
        fn sync(&self) -> io::Result<()> {
            self.1.fetch_add(1, SeqCst);
            self.0.sync()
        }
        fn trim(&self, o: u64, l: u64) -> io::Result<()> {
            self.0.trim(o, l)
        }
        fn describe(&self) -> String {
            "counting".into()
        }
    }

    #[test]
    fn a_sync_reaches_the_device_only_after_a_write() {
        let dev = Arc::new(Counting(MemDevice::new(1 << 20), AtomicU64::new(0)));
        let s = SyncSkip::new(dev.clone());
        let reached = || dev.1.load(SeqCst);
        s.sync().unwrap();
        assert_eq!((reached(), s.skipped()), (0, 1), "nothing written yet");
        s.write_at(0, &[1; 512]).unwrap();
        s.sync().unwrap();
        s.sync().unwrap();
        assert_eq!((reached(), s.skipped()), (1, 2), "one write, one sync");
        s.trim(0, 4096).unwrap();
        s.sync().unwrap();
        s.write_zeroes(0, 4096).unwrap();
        s.sync().unwrap();
        assert_eq!(reached(), 3, "a TRIM and a WRITE_ZEROES need their syncs too");
        let mut b = [0u8; 512];
        s.read_at(0, &mut b).unwrap();
        assert!(s.demote(0, &b) || !s.takes_demotes());
        s.sync().unwrap();
        assert_eq!(reached(), 3, "reads and DEMOTEs need no sync");
    }
}
