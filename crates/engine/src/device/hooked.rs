//! The engine's test device: [`Hooked`] passes every call of the [`Device`] trait to the
//! device it wraps, after the test's [`Hooks`] for that kind of call: a hook sleeps, counts,
//! records, fails the call, or holds it. A test writes only the hooks it needs; every other
//! call is answered as the wrapped device answers it. [`Door`] is ready-made hooks (reads or
//! writes wait while it is closed); a [`Trap`] holds the one call that comes after it was
//! armed.
//!
//! | call | hook run first |
//! |---|---|
//! | `read_at`, each read of `read_many`, each part of `start_read` | [`Hooks::before_read`] |
//! | `write_at`, `write_zeroes` | [`Hooks::before_write`] |
//! | `sync` | [`Hooks::before_sync`] |
//! | `trim` | [`Hooks::before_trim`] |
//! | `describe`, `identity` | answered by [`Hooks::describe`], [`Hooks::identity`] |
//!
//! `read_if_cached` answers `None`: a read hook may wait, which that call must not, so every
//! read through a hooked device runs its hook. A hook's error fails the call without it
//! reaching the wrapped device.
//!
//! [`Hooked`] implements each method of [`Device`] itself (`clippy::missing_trait_methods`
//! is denied on it), so a method added to the trait cannot pass by its default unnoticed.

use super::{Device, Identity, ReadBuf, ReadPart, ReadsDone};
use parking_lot::{Condvar, Mutex};
use std::io;
use std::ops::Deref;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What a test does before the calls of a [`Hooked`] device. Every hook but
/// [`Hooks::describe`] has a default that lets the call pass unchanged.
pub(crate) trait Hooks: Send + Sync {
    /// The device's description, for messages.
    fn describe(&self) -> String;

    /// Before a read of `len` bytes at `offset`; an error fails the read.
    fn before_read(&self, offset: u64, len: u64) -> io::Result<()> {
        let _ = (offset, len);
        Ok(())
    }

    /// Before a write (or WRITE_ZEROES) of `len` bytes at `offset`; an error fails it.
    fn before_write(&self, offset: u64, len: u64) -> io::Result<()> {
        let _ = (offset, len);
        Ok(())
    }

    /// Before a sync; an error fails it.
    fn before_sync(&self) -> io::Result<()> {
        Ok(())
    }

    /// Before a TRIM of `len` bytes at `offset`; an error fails it.
    fn before_trim(&self, offset: u64, len: u64) -> io::Result<()> {
        let _ = (offset, len);
        Ok(())
    }

    /// The device's identity: by default `inner`'s; [`unidentified`] makes a device that
    /// cannot be identified.
    fn identity(&self, inner: &dyn Device) -> io::Result<Identity> {
        inner.identity()
    }
}

/// What a device that cannot be identified answers (the [`Device::identity`] default): a
/// backing that never starts warm.
pub(crate) fn unidentified() -> io::Result<Identity> {
    Ok(Identity::Unknown("the device cannot be identified"))
}

/// A device that runs its hooks `H` before passing each call to the device it wraps; derefs
/// to the hooks, so a test reaches their state (a gate to open, the writes recorded).
pub(crate) struct Hooked<H> {
    inner: Arc<dyn Device>,
    hooks: H,
}

impl<H: Hooks> Hooked<H> {
    /// `inner` with `hooks`.
    pub(crate) fn wrap(inner: Arc<dyn Device>, hooks: H) -> Self {
        Hooked { inner, hooks }
    }

    /// The wrapped device, for a test that reads or writes past the hooks.
    pub(crate) fn inner(&self) -> &dyn Device {
        self.inner.as_ref()
    }
}

impl<H> Deref for Hooked<H> {
    type Target = H;
    fn deref(&self) -> &H {
        &self.hooks
    }
}

// The calls the hooks precede or answer first, then those passed as they are.
#[deny(clippy::missing_trait_methods)]
impl<H: Hooks> Device for Hooked<H> {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.hooks.before_read(offset, buf.len() as u64)?;
        self.inner.read_at(offset, buf)
    }

    /// The reads whose hook passed go to the wrapped device together; the others are done
    /// with their hook's error.
    fn read_many(
        &self,
        reads: &mut [(u64, &mut [u8])],
        done: &mut dyn FnMut(usize, io::Result<()>),
    ) {
        let mut passed = Vec::with_capacity(reads.len());
        let mut ready: Vec<(u64, &mut [u8])> = Vec::with_capacity(reads.len());
        for (i, (offset, buf)) in reads.iter_mut().enumerate() {
            match self.hooks.before_read(*offset, buf.len() as u64) {
                Ok(()) => {
                    passed.push(i);
                    ready.push((*offset, &mut **buf));
                }
                Err(e) => done(i, Err(e)),
            }
        }
        self.inner.read_many(&mut ready, &mut |k, outcome| done(passed[k], outcome));
    }

    /// Starts nothing (the caller then reads another way, where the hook runs) when the
    /// wrapped device has no room for the parts `p`, or a part's hook fails.
    fn start_read(&self, buf: ReadBuf, p: &[ReadPart], tag: u64, now: bool) -> Result<(), ReadBuf> {
        if self.inner.read_room() < p.len()
            || p.iter().any(|part| self.hooks.before_read(part.offset, part.len as u64).is_err())
        {
            return Err(buf);
        }
        self.inner.start_read(buf, p, tag, now)
    }

    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        self.hooks.before_write(offset, data.len() as u64)?;
        self.inner.write_at(offset, data)
    }

    fn write_zeroes(&self, offset: u64, len: u64) -> io::Result<()> {
        self.hooks.before_write(offset, len)?;
        self.inner.write_zeroes(offset, len)
    }

    fn sync(&self) -> io::Result<()> {
        self.hooks.before_sync()?;
        self.inner.sync()
    }

    fn trim(&self, offset: u64, len: u64) -> io::Result<()> {
        self.hooks.before_trim(offset, len)?;
        self.inner.trim(offset, len)
    }

    fn describe(&self) -> String {
        self.hooks.describe()
    }

    fn identity(&self) -> io::Result<Identity> {
        self.hooks.identity(self.inner.as_ref())
    }

    /// Never answers from here (the module's doc says why).
    fn read_if_cached(&self, _: u64, _: &mut [u8]) -> Option<io::Result<()>> {
        None
    }

    fn size(&self) -> u64 {
        self.inner.size()
    }

    fn read_room(&self) -> usize {
        self.inner.read_room()
    }

    fn reap_reads(&self, wait: usize, wake: Option<RawFd>, done: &mut ReadsDone<'_>) -> usize {
        self.inner.reap_reads(wait, wake, done)
    }

    fn register_read_buffer(&self, buf: &mut ReadBuf) -> bool {
        self.inner.register_read_buffer(buf)
    }

    fn unregister_read_buffer(&self, buf: &mut ReadBuf) -> bool {
        self.inner.unregister_read_buffer(buf)
    }

    fn reads_from_memory(&self) -> bool {
        self.inner.reads_from_memory()
    }

    fn volatile(&self) -> bool {
        self.inner.volatile()
    }

    fn takes_demotes(&self) -> bool {
        self.inner.takes_demotes()
    }

    fn demote(&self, offset: u64, data: &[u8]) -> bool {
        self.inner.demote(offset, data)
    }
}

/// Which calls a [`Door`] holds.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Held {
    /// Reads.
    Reads,
    /// Writes (and WRITE_ZEROES).
    Writes,
}

/// Hooks that hold one kind of call while the door is closed, until it opens, counting the
/// calls of that kind that arrived since it closed; a device with a door cannot be
/// identified ([`unidentified`]).
pub(crate) struct Door {
    holds: Held,
    name: &'static str,
    closed: Mutex<bool>,
    cv: Condvar,
    /// The calls it holds that arrived since it closed (or since it was made).
    pub(crate) arrived: AtomicU64,
}

impl Door {
    /// An open door on `holds`, the device described as `name`.
    pub(crate) fn new(holds: Held, name: &'static str) -> Door {
        Door { holds, name, closed: Mutex::new(false), cv: Condvar::new(), arrived: 0.into() }
    }

    /// Close it: the calls it holds wait from now on, and are counted afresh.
    pub(crate) fn close(&self) {
        self.arrived.store(0, SeqCst);
        *self.closed.lock() = true;
    }

    /// Open it, letting the waiting calls go.
    pub(crate) fn open(&self) {
        *self.closed.lock() = false;
        self.cv.notify_all();
    }

    /// If the door holds calls of `kind`: count this one, and wait while the door is closed.
    fn pass(&self, kind: Held) -> io::Result<()> {
        if kind == self.holds {
            self.arrived.fetch_add(1, SeqCst);
            let mut closed = self.closed.lock();
            while *closed {
                self.cv.wait(&mut closed);
            }
        }
        Ok(())
    }
}

impl Hooks for Door {
    fn describe(&self) -> String {
        self.name.into()
    }
    fn before_read(&self, _: u64, _: u64) -> io::Result<()> {
        self.pass(Held::Reads)
    }
    fn before_write(&self, _: u64, _: u64) -> io::Result<()> {
        self.pass(Held::Writes)
    }
    fn identity(&self, _: &dyn Device) -> io::Result<Identity> {
        unidentified()
    }
}

/// A trap for hooks: once armed, it catches the next call that passes ([`Trap::pass`]) and
/// holds it until released; every other call passes at once.
#[derive(Default)]
pub(crate) struct Trap {
    armed: AtomicBool,
    /// Whether a caught call is held, and how many times a held call was let go: a call
    /// caught before a let-go leaves on it even when the trap holds again at once.
    held: Mutex<(bool, u64)>,
    cv: Condvar,
    caught: AtomicU64,
}

impl Trap {
    /// Arm it for the next call (forgetting the calls caught before).
    pub(crate) fn arm(&self) {
        self.caught.store(0, SeqCst);
        self.held.lock().0 = true;
        self.armed.store(true, SeqCst);
    }

    /// Let the caught call go (and the next one, if it was not caught yet).
    pub(crate) fn release(&self) {
        let mut held = self.held.lock();
        *held = (false, held.1 + 1);
        self.cv.notify_all();
    }

    /// Let the caught call go and catch the next one: no call passes between the two.
    pub(crate) fn release_and_arm(&self) {
        let mut held = self.held.lock();
        self.caught.store(0, SeqCst);
        self.armed.store(true, SeqCst);
        *held = (true, held.1 + 1);
        self.cv.notify_all();
    }

    /// Caught and held, if armed.
    pub(crate) fn pass(&self) {
        if self.armed.swap(false, SeqCst) {
            // Counted under the lock: once `wait_caught` saw it, a let-go finds it waiting.
            let mut held = self.held.lock();
            self.caught.fetch_add(1, SeqCst);
            let released = held.1;
            while held.0 && held.1 == released {
                self.cv.wait(&mut held);
            }
        }
    }

    /// Wait until the armed trap caught a call, at most 10 s; past that, panic with `what`.
    pub(crate) fn wait_caught(&self, what: &str) {
        let t0 = Instant::now();
        while self.caught.load(SeqCst) == 0 {
            assert!(t0.elapsed() < Duration::from_secs(10), "{what}");
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::MemDevice;

    /// Records the calls its hooks saw; fails the reads at offset 0.
    #[derive(Default)]
    struct Log(Mutex<Vec<String>>);

    impl Log {
        fn push(&self, s: String) -> io::Result<()> {
            self.0.lock().push(s);
            Ok(())
        }
    }

    impl Hooks for Log {
        fn describe(&self) -> String {
            "log".into()
        }
        fn before_read(&self, offset: u64, len: u64) -> io::Result<()> {
            self.push(format!("read {offset} {len}"))?;
            if offset == 0 {
                return Err(io::Error::other("hooked failure"));
            }
            Ok(())
        }
        fn before_write(&self, offset: u64, len: u64) -> io::Result<()> {
            self.push(format!("write {offset} {len}"))
        }
        fn before_sync(&self) -> io::Result<()> {
            self.push("sync".into())
        }
        fn before_trim(&self, offset: u64, len: u64) -> io::Result<()> {
            self.push(format!("trim {offset} {len}"))
        }
    }

    #[test]
    fn each_call_runs_its_hook_then_reaches_the_wrapped_device() {
        let mem = Arc::new(MemDevice::new(1 << 16));
        let dev = Hooked::wrap(mem.clone(), Log::default());
        dev.write_at(4096, &[7; 512]).unwrap();
        dev.write_zeroes(4096, 100).unwrap();
        dev.trim(8192, 4096).unwrap();
        dev.sync().unwrap();
        let mut buf = [0u8; 512];
        dev.read_at(4096, &mut buf).unwrap();
        assert_eq!(&buf[..100], &[0; 100][..]);
        assert_eq!(&buf[100..], &[7; 412][..]);
        assert!(dev.read_at(0, &mut buf).is_err(), "the hook's error fails the read");
        let (mut a, mut b) = ([0u8; 8], [0u8; 8]);
        let mut outcomes = Vec::new();
        dev.read_many(&mut [(0, &mut a[..]), (4196, &mut b[..])], &mut |i, r| {
            outcomes.push((i, r.is_ok()))
        });
        outcomes.sort_unstable();
        assert_eq!(outcomes, vec![(0, false), (1, true)]);
        assert_eq!(b, [7; 8]);
        assert!(dev.read_if_cached(4096, &mut buf).is_none(), "never answered without the hook");
        assert_eq!(
            *dev.0.lock(),
            [
                "write 4096 512",
                "write 4096 100",
                "trim 8192 4096",
                "sync",
                "read 4096 512",
                "read 0 512",
                "read 0 8",
                "read 4196 8",
            ]
        );
        assert_eq!(dev.describe(), "log");
        assert_eq!(dev.size(), mem.size());
        assert_eq!(dev.identity().unwrap(), mem.identity().unwrap(), "the wrapped one's");
        assert_eq!(dev.volatile(), mem.volatile());
        assert_eq!(dev.reads_from_memory(), mem.reads_from_memory());
    }

    #[test]
    fn a_trap_holds_only_the_call_after_it_was_armed_until_released() {
        let trap = Arc::new(Trap::default());
        trap.pass(); // not armed: passes
        trap.arm();
        let t = trap.clone();
        let held = std::thread::spawn(move || t.pass());
        trap.wait_caught("never caught");
        trap.pass(); // the trap caught one call already
        assert!(!held.is_finished());
        trap.release();
        held.join().unwrap();
    }

    #[test]
    fn a_closed_door_holds_the_calls_of_its_kind_until_it_opens() {
        let mem = Arc::new(MemDevice::new(1 << 16));
        let dev = Arc::new(Hooked::wrap(mem, Door::new(Held::Writes, "door")));
        dev.write_at(0, &[1; 8]).unwrap();
        dev.close();
        assert_eq!(dev.arrived.load(SeqCst), 0, "counted afresh");
        let d = dev.clone();
        let held = std::thread::spawn(move || d.write_at(0, &[2; 8]));
        dev.read_at(0, &mut [0; 8]).unwrap(); // a read passes
        while dev.arrived.load(SeqCst) == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
        std::thread::sleep(Duration::from_millis(20));
        assert!(!held.is_finished());
        dev.open();
        held.join().unwrap().unwrap();
        assert_eq!(dev.arrived.load(SeqCst), 1);
        assert_eq!(dev.identity().unwrap(), unidentified().unwrap());
    }
}
