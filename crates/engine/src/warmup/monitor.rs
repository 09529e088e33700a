//! The monitor (Bonfire section 5.1): every request the engine serves is appended to a
//! fixed-capacity lock-free queue (the metadata staging buffer, 256 KiB by default as the
//! paper chose: 8192 records of 32 bytes). No lock and no system call on the request path;
//! when the writer falls behind and the buffer is full, the record is dropped and counted.

use crossbeam::queue::ArrayQueue;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// One served request, as staged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    /// ns since the Unix epoch.
    pub time_ns: u64,
    /// First block.
    pub block: u64,
    /// Blocks covered (at least 1).
    pub blocks: u64,
    /// Superblock volume index.
    pub volume: u32,
    /// A write (else a read).
    pub write: bool,
}

/// The staging buffer.
pub struct Monitor {
    queue: ArrayQueue<Entry>,
    dropped: AtomicU64,
    dropped_writes: AtomicU64,
    staged: AtomicU64,
}

impl Monitor {
    /// A staging buffer of `bytes` (32 bytes a record, at least one record).
    pub fn new(bytes: u64) -> Self {
        let cap = (bytes / ember_trace::formats::warmup_log::RECORD_SIZE as u64).max(1) as usize;
        Monitor {
            queue: ArrayQueue::new(cap),
            dropped: AtomicU64::new(0),
            dropped_writes: AtomicU64::new(0),
            staged: AtomicU64::new(0),
        }
    }

    /// Stage a request of `len` bytes at `offset` (nothing for 0 bytes).
    #[inline]
    pub fn record(&self, volume: u32, write: bool, offset: u64, len: u64, block_size: u64) {
        if len == 0 {
            return;
        }
        let block = offset / block_size;
        let blocks = (offset + len).div_ceil(block_size) - block;
        let e = Entry { time_ns: crate::clock::now_ns(), block, blocks, volume, write };
        if self.queue.push(e).is_err() {
            self.dropped.fetch_add(1, Relaxed);
            if write {
                self.dropped_writes.fetch_add(1, Relaxed);
            }
        } else {
            self.staged.fetch_add(1, Relaxed);
        }
    }

    /// Take what is staged, oldest first, into `out`.
    pub fn drain(&self, out: &mut Vec<Entry>) {
        while let Some(e) = self.queue.pop() {
            out.push(e);
        }
    }

    /// Records dropped because the buffer was full.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Relaxed)
    }

    /// Write records dropped because the buffer was full.
    pub fn dropped_writes(&self) -> u64 {
        self.dropped_writes.load(Relaxed)
    }

    /// Records staged so far.
    pub fn staged(&self) -> u64 {
        self.staged.load(Relaxed)
    }

    /// The buffer's size in bytes.
    pub fn capacity_bytes(&self) -> u64 {
        (self.queue.capacity() * ember_trace::formats::warmup_log::RECORD_SIZE) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stages_block_ranges_and_counts_drops_when_full() {
        let m = Monitor::new(64); // two records
        m.record(3, false, 4096 + 100, 8192, 4096); // blocks 1..4 (touches 3)
        m.record(0, true, 0, 4096, 4096);
        m.record(0, true, 0, 4096, 4096); // full
        m.record(0, false, 0, 0, 4096); // empty: not recorded
        let mut out = Vec::new();
        m.drain(&mut out);
        assert_eq!(out.len(), 2);
        assert_eq!((out[0].volume, out[0].block, out[0].blocks, out[0].write), (3, 1, 3, false));
        assert_eq!((out[1].block, out[1].blocks, out[1].write), (0, 1, true));
        assert_eq!((m.staged(), m.dropped(), m.dropped_writes()), (2, 1, 1));
        assert_eq!(m.capacity_bytes(), 64);
    }
}
