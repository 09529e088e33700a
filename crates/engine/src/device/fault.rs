//! A fault-injecting wrapper for tests: fail the n-th I/O, and simulate a power cut that loses
//! writes not yet made durable by a sync (each lost or kept per 512-byte sector, so writes
//! may also be torn and reordered, as a real disk's volatile write cache allows).

use super::{check_range, Device};
use parking_lot::Mutex;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::io;
use std::sync::Arc;

/// Sector size of the simulated volatile write cache.
pub const SECTOR: u64 = 512;

/// Kinds of I/O a fault rule can match.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IoKind {
    /// A read.
    Read,
    /// A write.
    Write,
    /// A sync (flush of the volatile write cache).
    Sync,
    /// A trim or write-zeroes.
    Discard,
}

/// What happens to unsynced writes at a power cut.
#[derive(Clone, Copy, Debug)]
pub struct PowerCut {
    /// Probability that each unsynced sector reached the medium anyway (0 drops them all).
    pub survive: f64,
    /// Seed choosing which sectors survive.
    pub seed: u64,
}

impl PowerCut {
    /// Drop every unsynced write.
    pub const DROP_ALL: PowerCut = PowerCut { survive: 0.0, seed: 0 };
}

#[derive(Clone, Debug)]
struct FailRule {
    kinds: Vec<IoKind>,
    nth: u64,
    seen: u64,
    sticky: bool,
}

#[derive(Default)]
struct State {
    /// The volatile write cache: sector number → content not yet durable.
    pending: BTreeMap<u64, Box<[u8]>>,
    ios: u64,
    fail: Option<FailRule>,
    cut_at: Option<(u64, PowerCut)>,
    dead: bool,
}

/// Wraps a device (the durable medium) with a volatile write cache and fault injection.
/// Every operation holds one lock: meant for tests, not speed.
pub struct FaultDevice {
    inner: Arc<dyn Device>,
    state: Mutex<State>,
}

fn injected(what: &str) -> io::Error {
    io::Error::other(format!("injected fault: {what}"))
}

impl FaultDevice {
    /// Wrap `inner`, whose size must be a multiple of [`SECTOR`].
    pub fn new(inner: Arc<dyn Device>) -> io::Result<Self> {
        if !inner.size().is_multiple_of(SECTOR) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("fault device needs a size multiple of {SECTOR}, got {}", inner.size()),
            ));
        }
        Ok(Self { inner, state: Mutex::new(State::default()) })
    }

    /// The durable medium underneath.
    pub fn inner(&self) -> &Arc<dyn Device> {
        &self.inner
    }

    /// I/Os issued so far (reads, writes, syncs, discards), failed ones included.
    pub fn io_count(&self) -> u64 {
        self.state.lock().ios
    }

    /// Make the `nth` (1-based, counted from now) I/O of one of `kinds` fail; with `sticky`,
    /// every later one of those kinds fails too.
    pub fn fail_nth(&self, nth: u64, kinds: &[IoKind], sticky: bool) {
        self.state.lock().fail = Some(FailRule { kinds: kinds.to_vec(), nth, seen: 0, sticky });
    }

    /// Remove the failure rule.
    pub fn clear_faults(&self) {
        self.state.lock().fail = None;
    }

    /// Cut the power when the `nth` (1-based, counted from now) I/O of any kind arrives: that
    /// I/O and every later one fail until [`FaultDevice::revive`].
    pub fn cut_power_at(&self, nth: u64, cut: PowerCut) {
        let mut st = self.state.lock();
        let at = st.ios + nth;
        st.cut_at = Some((at, cut));
    }

    /// Cut the power now: unsynced sectors are kept or lost as `cut` says, and the device
    /// fails every I/O until [`FaultDevice::revive`].
    pub fn power_cut(&self, cut: PowerCut) {
        let mut st = self.state.lock();
        self.do_cut(&mut st, cut);
    }

    /// Power back on: I/O works again, on what reached the medium.
    pub fn revive(&self) {
        let mut st = self.state.lock();
        st.dead = false;
        st.cut_at = None;
        st.fail = None;
    }

    /// True if the power is cut.
    pub fn is_dead(&self) -> bool {
        self.state.lock().dead
    }

    fn do_cut(&self, st: &mut State, cut: PowerCut) {
        let mut rng = rand::rngs::StdRng::seed_from_u64(cut.seed);
        let pending = std::mem::take(&mut st.pending);
        for (sector, data) in pending {
            if cut.survive > 0.0 && rng.gen_bool(cut.survive.min(1.0)) {
                // A sector that made it: the medium is in memory or a file, so this cannot
                // fail in the tests this wrapper serves; if it does, the sector is lost,
                // which a power cut allows.
                let _ = self.inner.write_at(sector * SECTOR, &data);
            }
        }
        st.dead = true;
        st.cut_at = None;
    }

    /// Count one I/O and apply the rules; Err if it must fail.
    fn gate(&self, st: &mut State, kind: IoKind) -> io::Result<()> {
        st.ios += 1;
        if let Some((at, cut)) = st.cut_at {
            if st.ios >= at {
                self.do_cut(st, cut);
            }
        }
        if st.dead {
            return Err(injected("power is cut"));
        }
        if let Some(rule) = st.fail.as_mut() {
            if rule.kinds.contains(&kind) {
                rule.seen += 1;
                if rule.seen == rule.nth || (rule.sticky && rule.seen > rule.nth) {
                    return Err(injected(&format!("{kind:?} #{}", rule.seen)));
                }
            }
        }
        Ok(())
    }

    fn sector_content(&self, st: &State, sector: u64) -> io::Result<Box<[u8]>> {
        if let Some(d) = st.pending.get(&sector) {
            return Ok(d.clone());
        }
        let mut b = vec![0u8; SECTOR as usize].into_boxed_slice();
        self.inner.read_at(sector * SECTOR, &mut b)?;
        Ok(b)
    }

    fn buffer_write(&self, st: &mut State, offset: u64, data: &[u8]) -> io::Result<()> {
        let mut pos = offset;
        let end = offset + data.len() as u64;
        while pos < end {
            let sector = pos / SECTOR;
            let s_start = sector * SECTOR;
            let s_end = s_start + SECTOR;
            let n = (end.min(s_end) - pos) as usize;
            let src = &data[(pos - offset) as usize..(pos - offset) as usize + n];
            let mut content = if n as u64 == SECTOR {
                vec![0u8; SECTOR as usize].into_boxed_slice()
            } else {
                self.sector_content(st, sector)?
            };
            let o = (pos - s_start) as usize;
            content[o..o + n].copy_from_slice(src);
            st.pending.insert(sector, content);
            pos += n as u64;
        }
        Ok(())
    }
}

impl Device for FaultDevice {
    fn size(&self) -> u64 {
        self.inner.size()
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let mut st = self.state.lock();
        check_range(self.size(), offset, buf.len() as u64, "read")?;
        self.gate(&mut st, IoKind::Read)?;
        self.inner.read_at(offset, buf)?;
        let end = offset + buf.len() as u64;
        let first = offset / SECTOR;
        for (&sector, data) in st.pending.range(first..end.div_ceil(SECTOR)) {
            let s_start = sector * SECTOR;
            let lo = s_start.max(offset);
            let hi = (s_start + SECTOR).min(end);
            buf[(lo - offset) as usize..(hi - offset) as usize]
                .copy_from_slice(&data[(lo - s_start) as usize..(hi - s_start) as usize]);
        }
        Ok(())
    }

    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        let mut st = self.state.lock();
        check_range(self.size(), offset, data.len() as u64, "write")?;
        self.gate(&mut st, IoKind::Write)?;
        self.buffer_write(&mut st, offset, data)
    }

    fn sync(&self) -> io::Result<()> {
        let mut st = self.state.lock();
        self.gate(&mut st, IoKind::Sync)?;
        let pending = std::mem::take(&mut st.pending);
        for (sector, data) in &pending {
            self.inner.write_at(sector * SECTOR, data)?;
        }
        self.inner.sync()
    }

    fn trim(&self, offset: u64, len: u64) -> io::Result<()> {
        self.write_zeroes(offset, len)
    }

    fn write_zeroes(&self, offset: u64, len: u64) -> io::Result<()> {
        let mut st = self.state.lock();
        check_range(self.size(), offset, len, "write-zeroes")?;
        self.gate(&mut st, IoKind::Discard)?;
        self.buffer_write(&mut st, offset, &vec![0u8; len as usize])
    }

    fn volatile(&self) -> bool {
        self.inner.volatile()
    }

    fn describe(&self) -> String {
        format!("fault-injecting {}", self.inner.describe())
    }

    /// The durable medium's identity (what survives a power cut).
    fn identity(&self) -> io::Result<super::Identity> {
        self.inner.identity()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::MemDevice;

    fn dev() -> (Arc<MemDevice>, FaultDevice) {
        let mem = Arc::new(MemDevice::new(16 * 1024));
        let f = FaultDevice::new(mem.clone()).unwrap();
        (mem, f)
    }

    #[test]
    fn unsynced_writes_are_visible_but_not_durable() {
        let (mem, f) = dev();
        f.write_at(1000, b"abc").unwrap();
        let mut b = [0u8; 3];
        f.read_at(1000, &mut b).unwrap();
        assert_eq!(&b, b"abc");
        mem.read_at(1000, &mut b).unwrap();
        assert_eq!(&b, &[0, 0, 0], "not on the medium before sync");
        f.sync().unwrap();
        mem.read_at(1000, &mut b).unwrap();
        assert_eq!(&b, b"abc");
    }

    #[test]
    fn power_cut_drops_unsynced_writes() {
        let (_mem, f) = dev();
        f.write_at(0, b"durable").unwrap();
        f.sync().unwrap();
        f.write_at(0, b"VOLATIL").unwrap();
        f.write_at(5000, b"lost").unwrap();
        f.power_cut(PowerCut::DROP_ALL);
        let mut b = [0u8; 7];
        assert!(f.read_at(0, &mut b).is_err(), "dead until revived");
        f.revive();
        f.read_at(0, &mut b).unwrap();
        assert_eq!(&b, b"durable");
        let mut l = [0u8; 4];
        f.read_at(5000, &mut l).unwrap();
        assert_eq!(l, [0; 4]);
    }

    #[test]
    fn power_cut_may_keep_some_sectors() {
        let (_mem, f) = dev();
        for s in 0..32u64 {
            f.write_at(s * SECTOR, &[s as u8 + 1; SECTOR as usize]).unwrap();
        }
        f.power_cut(PowerCut { survive: 0.5, seed: 7 });
        f.revive();
        let mut kept = 0;
        for s in 0..32u64 {
            let mut b = [0u8; SECTOR as usize];
            f.read_at(s * SECTOR, &mut b).unwrap();
            assert!(b.iter().all(|&x| x == 0) || b.iter().all(|&x| x == s as u8 + 1));
            kept += usize::from(b[0] != 0);
        }
        assert!(kept > 0 && kept < 32, "a torn mix survives, kept {kept}");
    }

    #[test]
    fn nth_io_fails_once_or_sticky() {
        let (_mem, f) = dev();
        f.fail_nth(2, &[IoKind::Write], false);
        f.write_at(0, b"1").unwrap();
        let mut b = [0u8; 1];
        f.read_at(0, &mut b).unwrap(); // reads are not counted by a write rule
        let e = f.write_at(0, b"2").unwrap_err();
        assert!(e.to_string().contains("injected fault"), "{e}");
        f.write_at(0, b"3").unwrap();
        f.fail_nth(1, &[IoKind::Sync, IoKind::Read], true);
        assert!(f.sync().is_err());
        assert!(f.read_at(0, &mut b).is_err());
        assert!(f.sync().is_err());
        f.clear_faults();
        f.read_at(0, &mut b).unwrap();
        assert_eq!(&b, b"3");
    }

    #[test]
    fn power_cut_at_nth_io() {
        let (_mem, f) = dev();
        f.write_at(0, b"a").unwrap();
        f.sync().unwrap();
        f.cut_power_at(2, PowerCut::DROP_ALL);
        f.write_at(0, b"b").unwrap();
        assert!(f.sync().is_err(), "the 2nd I/O meets the cut");
        assert!(f.is_dead());
        f.revive();
        let mut b = [0u8; 1];
        f.read_at(0, &mut b).unwrap();
        assert_eq!(&b, b"a");
        assert_eq!(f.io_count(), 5);
    }
}
