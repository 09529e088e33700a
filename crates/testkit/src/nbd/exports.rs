//! Test exports: ones that wait at a gate, fail a byte, or "start" their READs, and macros
//! that forward the rest of an `Export` to an inner one.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex};
use std::thread::ThreadId;

use ember_nbd::{Export, ExportError, MemExport, ReadBuf, ReadStart};

/// The geometry of an `Export` (size, flags), forwarded to `self.inner`.
#[macro_export]
macro_rules! forward_geometry {
    () => {
        fn size(&self) -> u64 {
            $crate::nbd::ember_nbd::Export::size(&self.inner)
        }
        fn flags(&self) -> $crate::nbd::ember_nbd::ExportFlags {
            $crate::nbd::ember_nbd::Export::flags(&self.inner)
        }
    };
}

/// The write-side methods of an `Export` (write, flush, trim, write_zeroes), forwarded to
/// `self.inner`: test exports differ only in how they read.
#[macro_export]
macro_rules! forward_writes {
    () => {
        fn write(&self, at: u64, data: &[u8], fua: bool) -> $crate::nbd::Outcome {
            self.inner.write(at, data, fua)
        }
        fn flush(&self) -> $crate::nbd::Outcome {
            self.inner.flush()
        }
        fn trim(&self, at: u64, len: u64, fua: bool) -> $crate::nbd::Outcome {
            self.inner.trim(at, len, fua)
        }
        fn write_zeroes(&self, at: u64, len: u64, fua: bool, hole: bool) -> $crate::nbd::Outcome {
            self.inner.write_zeroes(at, len, fua, hole)
        }
    };
}

/// `Export::reap_reads` of a test export that keeps its started READs in `self.pending`
/// (a [`PendingReads`]).
#[macro_export]
macro_rules! reap_pending {
    () => {
        fn reap_reads(
            &self,
            _wait: usize,
            _wake: Option<std::os::fd::RawFd>,
            done: &mut dyn FnMut(u64, $crate::nbd::ember_nbd::ReadBuf, $crate::nbd::Outcome),
        ) -> usize {
            self.pending.reap(done)
        }
    };
}

/// An export whose reads wait at a gate until it is opened, counting waiters.
pub struct GateExport {
    /// The memory behind the gate.
    pub inner: MemExport,
    gate: Mutex<(bool, usize)>,
    changed: Condvar,
}

impl GateExport {
    /// A closed gate before `size` bytes of memory.
    pub fn new(size: u64) -> GateExport {
        GateExport {
            inner: MemExport::new(size),
            gate: Mutex::new((false, 0)),
            changed: Condvar::new(),
        }
    }

    /// Block until at least `n` reads wait at the gate.
    pub fn wait_for_waiters(&self, n: usize) {
        let mut g = self.gate.lock().unwrap();
        while g.1 < n {
            g = self.changed.wait(g).unwrap();
        }
    }

    /// Open the gate: every waiting read and every later one goes through.
    pub fn open(&self) {
        self.gate.lock().unwrap().0 = true;
        self.changed.notify_all();
    }
}

impl Export for GateExport {
    crate::forward_geometry!();
    fn read(&self, offset: u64, buf: &mut [u8]) -> Result<(), ExportError> {
        {
            let mut g = self.gate.lock().unwrap();
            g.1 += 1;
            self.changed.notify_all();
            while !g.0 {
                g = self.changed.wait(g).unwrap();
            }
        }
        self.inner.read(offset, buf)
    }
    crate::forward_writes!();
}

/// An export whose reads touching `[bad, bad + 1)` fail with EIO.
pub struct FaultyExport {
    /// The memory.
    pub inner: MemExport,
    /// The byte whose reads fail.
    pub bad: u64,
}

impl Export for FaultyExport {
    crate::forward_geometry!();
    fn read(&self, offset: u64, buf: &mut [u8]) -> Result<(), ExportError> {
        if offset <= self.bad && self.bad < offset + buf.len() as u64 {
            return Err(ExportError::Io(std::io::Error::from_raw_os_error(5)));
        }
        self.inner.read(offset, buf)
    }
    crate::forward_writes!();
}

/// READs a test export "starts" (`Export::start_read`): read at once from a RAM export, their
/// buffers and tags handed back by the next `Export::reap_reads` on the thread that started
/// them (the contract: a connection reaps only its own READs; another connection's reaper,
/// say one ending, must not take them), and counted.
#[derive(Default)]
pub struct PendingReads {
    reads: Mutex<Vec<(ThreadId, u64, ReadBuf)>>,
    started: AtomicU64,
}

impl PendingReads {
    /// Read `buf.len()` bytes at `offset` of `inner` into `buf` and keep it, with `tag`, for
    /// the next reap on this thread.
    pub fn start(&self, inner: &MemExport, offset: u64, mut buf: ReadBuf, tag: u64) -> ReadStart {
        if inner.read(offset, buf.as_mut_slice()).is_err() {
            return ReadStart::Declined(buf);
        }
        self.reads.lock().unwrap().push((std::thread::current().id(), tag, buf));
        self.started.fetch_add(1, Ordering::SeqCst);
        ReadStart::Started
    }

    /// READs started so far.
    pub fn started(&self) -> u64 {
        self.started.load(Ordering::SeqCst)
    }

    /// Hand back every READ this thread started since its last reap; how many.
    pub fn reap(&self, done: &mut dyn FnMut(u64, ReadBuf, Result<(), ExportError>)) -> usize {
        let here = std::thread::current().id();
        let mine: Vec<(ThreadId, u64, ReadBuf)> = {
            let mut reads = self.reads.lock().unwrap();
            let (mine, others) = std::mem::take(&mut *reads).into_iter().partition(|r| r.0 == here);
            *reads = others;
            mine
        };
        let n = mine.len();
        for (_, tag, buf) in mine {
            done(tag, buf, Ok(()));
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reap hands back only the reaping thread's READs: another thread's reap (a
    /// connection ending while a new one reads) leaves them for their own thread.
    #[test]
    fn a_reap_hands_back_only_this_threads_reads() {
        let inner = MemExport::new(1 << 16);
        let pending = PendingReads::default();
        assert!(matches!(pending.start(&inner, 0, ReadBuf::new(4096), 7), ReadStart::Started));
        let other = std::thread::scope(|s| {
            s.spawn(|| pending.reap(&mut |_, _, _| panic!("another thread's READ"))).join()
        });
        assert_eq!(other.unwrap(), 0, "another thread reaped this thread's READ");
        let mut tags = Vec::new();
        assert_eq!(pending.reap(&mut |tag, _, r| tags.push((tag, r.is_ok()))), 1);
        assert_eq!(tags, [(7, true)]);
    }
}
