//! The buffers registered with a thread's io_uring (`uring.rs`), by address. A
//! read into a registered buffer (`IORING_OP_READ_FIXED`) skips pinning and unpinning its
//! pages on every read: the kernel pinned them once, when the buffer was registered.
//!
//! The hazard is a registration that outlives its memory: the kernel keeps the pages it
//! pinned, so a fixed read into a buffer that was freed (and its address range reused or
//! unmapped) would write into pages the program no longer owns or no longer sees. The owner
//! of a buffer registers it when it allocates it and unregisters it before it frees it;
//! this table refuses to let go of a buffer while reads into it are in flight, and refuses a
//! range that overlaps one it holds. An owner whose buffer cannot be unregistered (refused,
//! or asked on another thread, whose ring does not hold it) must leak it, never free it.

/// Entries of a ring's table: buffers registered at once, at most.
pub(super) const SLOTS: u16 = 128;

/// One registered buffer: its address range and its index in the ring's table.
struct Entry {
    start: usize,
    end: usize,
    index: u16,
}

/// The buffers registered with one ring.
pub(super) struct Registered {
    /// Sorted by `start`; no two overlap.
    entries: Vec<Entry>,
    /// Table indexes not in use.
    free: Vec<u16>,
    /// Reads in flight into each table index.
    busy: Vec<u32>,
}

impl Registered {
    /// A ring without a table (its kernel refused a sparse one): nothing can be registered.
    pub(super) fn none() -> Registered {
        Registered { entries: Vec::new(), free: Vec::new(), busy: Vec::new() }
    }

    /// A ring whose table has [`SLOTS`] empty entries.
    pub(super) fn with_table() -> Registered {
        Registered {
            entries: Vec::new(),
            free: (0..SLOTS).rev().collect(),
            busy: vec![0; SLOTS as usize],
        }
    }

    /// Record `len` bytes at `start` under a free index, if `register(index)` (the kernel's
    /// update of that entry) succeeds. False: empty, overlapping a registered range, no free
    /// index, or refused; nothing is recorded then.
    pub(super) fn add(
        &mut self,
        start: usize,
        len: usize,
        register: impl FnOnce(u16) -> bool,
    ) -> bool {
        let Some(end) = start.checked_add(len) else { return false };
        if len == 0 {
            return false;
        }
        let at = self.entries.partition_point(|e| e.start < start);
        let clear_before = at == 0 || self.entries[at - 1].end <= start;
        let clear_after = self.entries.get(at).is_none_or(|e| end <= e.start);
        if !clear_before || !clear_after {
            return false;
        }
        let Some(index) = self.free.pop() else { return false };
        if !register(index) {
            self.free.push(index);
            return false;
        }
        self.entries.insert(at, Entry { start, end, index });
        true
    }

    /// Forget the buffer registered at `start`, if no read into it is in flight and
    /// `unregister(index)` (the kernel's update of its entry to empty) succeeds. False: not
    /// registered here, busy, or refused; the buffer then stays registered.
    pub(super) fn remove(&mut self, start: usize, unregister: impl FnOnce(u16) -> bool) -> bool {
        let Ok(at) = self.entries.binary_search_by_key(&start, |e| e.start) else { return false };
        let index = self.entries[at].index;
        if self.busy[index as usize] > 0 || !unregister(index) {
            return false;
        }
        self.entries.remove(at);
        self.free.push(index);
        true
    }

    /// The table index of the registered buffer that holds all of `len` bytes at `start`.
    pub(super) fn lookup(&self, start: usize, len: usize) -> Option<u16> {
        let end = start.checked_add(len)?;
        let at = self.entries.partition_point(|e| e.start <= start);
        let e = self.entries.get(at.checked_sub(1)?)?;
        (end <= e.end).then_some(e.index)
    }

    /// A read into the buffer at `index` was started.
    pub(super) fn read_started(&mut self, index: u16) {
        if let Some(b) = self.busy.get_mut(index as usize) {
            *b += 1;
        }
    }

    /// A read into the buffer at `index` completed (or was never submitted).
    pub(super) fn read_ended(&mut self, index: u16) {
        if let Some(b) = self.busy.get_mut(index as usize) {
            *b = b.saturating_sub(1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_are_found_only_whole_and_never_overlap() {
        let mut r = Registered::with_table();
        assert!(r.add(8192, 4096, |_| true));
        assert!(r.add(16384, 8192, |_| true));
        assert!(!r.add(12287, 2, |_| true), "overlaps the first");
        assert!(!r.add(4096, 4097, |_| true), "overlaps the first from below");
        assert!(!r.add(20000, 10, |_| true), "inside the second");
        assert!(!r.add(100, 0, |_| true), "empty");
        assert!(r.add(12288, 4096, |_| true), "between them, touching both");
        let first = r.lookup(8192, 4096).unwrap();
        assert_eq!(r.lookup(8192 + 4095, 1), Some(first));
        assert_eq!(r.lookup(8192 + 4095, 2), None, "crosses into the next buffer");
        assert!(r.lookup(8191, 1).is_none());
        assert!(r.lookup(16384 + 8192, 1).is_none());
        assert!(r.lookup(16384 + 4096, 4096).is_some());
        assert_ne!(r.lookup(12288, 4096), Some(first));
    }

    #[test]
    fn a_buffer_being_read_into_is_not_let_go() {
        let mut r = Registered::with_table();
        assert!(r.add(4096, 4096, |_| true));
        let i = r.lookup(4096, 4096).unwrap();
        r.read_started(i);
        let mut asked = false;
        assert!(!r.remove(4096, |_| {
            asked = true;
            true
        }));
        assert!(!asked, "the kernel is not even asked while a read is in flight");
        r.read_ended(i);
        assert!(!r.remove(4096, |_| false), "the kernel refused: still registered");
        assert_eq!(r.lookup(4096, 4096), Some(i));
        assert!(!r.remove(4097, |_| true), "not the start of a registered buffer");
        assert!(r.remove(4096, |j| j == i));
        assert!(r.lookup(4096, 4096).is_none());
    }

    #[test]
    fn the_table_fills_and_refusals_keep_nothing() {
        let mut r = Registered::with_table();
        for k in 0..SLOTS as usize {
            assert!(r.add((k + 1) * 4096, 4096, |_| true));
        }
        assert!(!r.add(1 << 30, 4096, |_| true), "no free index");
        assert!(r.remove(4096, |_| true));
        assert!(!r.add(1 << 30, 4096, |_| false), "refused by the kernel");
        assert!(r.lookup(1 << 30, 4096).is_none());
        assert!(r.add(1 << 30, 4096, |_| true), "the index went back");
        let mut none = Registered::none();
        assert!(!none.add(4096, 4096, |_| true));
    }
}
