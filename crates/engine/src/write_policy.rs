//! The write policy in force, as every write, FLUSH and discard reads it: one atomic word, so
//! the hot paths pay a load, never a lock. A live switch (`live/switch.rs`) stores a new
//! policy and then waits for every request that read the old one (`quiesce`): a request
//! registers in the word's *phase* when it reads it, and the switch flips the phase, so it
//! waits only for the requests of the phase before, never for the ones that came after.
//!
//! A [`Policy`] is the write mode new requests go through, and, while a switch drains the
//! dirty blocks of a former write-back policy, that policy (`drain`): the rules of the two
//! combine as the methods below say (docs/reference/write-policies.md, "Switching while
//! serving"). Imports only the layout's `WriteMode`.

use crate::layout::WriteMode;
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
use std::time::Duration;

/// The write policy a request runs under.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Policy {
    /// What new writes go through.
    pub mode: WriteMode,
    /// The former write-back policy whose dirty blocks a switch is still writing back.
    pub drain: Option<WriteMode>,
}

impl Policy {
    /// A policy with nothing draining.
    pub fn plain(mode: WriteMode) -> Policy {
        Policy { mode, drain: None }
    }

    /// The policy of a volume whose own write policy is `own` (write-through or
    /// write-around; `None`: the cache-wide one, `self`). Its writes go as `own` says, and
    /// the cache-wide write-back policy is treated as a drain that never ends: the volume's
    /// blocks still dirty from before are written through as during a switch, and its
    /// FLUSHes and FUA writes keep the cache-wide promise (under write-back persist they
    /// commit the persisted dirty map, which also forgets what its writes replaced).
    /// `live/volume_settings.rs` allows an own policy only where that holds: not under
    /// ordered or unsafe write-back, and not while a switch drains.
    pub fn for_volume(self, own: Option<WriteMode>) -> Policy {
        match own {
            Some(mode) if mode != self.mode => {
                let drain = self.drain.or(self.mode.is_write_back().then_some(self.mode));
                Policy { mode, drain }
            }
            _ => self,
        }
    }

    /// Writes take the write-back flow (no-overwrite writes to dirty cache blocks).
    pub fn write_back(self) -> bool {
        self.mode.is_write_back()
    }

    /// Writes take ordered write-back's flow (blocks reserved before any lock, holds on an
    /// epoch for what goes to backing directly): under ordered write-back, and under any
    /// write-back policy while ordered write-back's epochs drain, so backing still receives
    /// them in order.
    pub fn ordered(self) -> bool {
        self.mode == WriteMode::OrderedWriteBack
            || (self.drain == Some(WriteMode::OrderedWriteBack) && self.mode.is_write_back())
    }

    /// Writes and discards wait until the drain is over before they go to backing: a
    /// policy that writes backing directly (write-through, write-around) leaving ordered
    /// write-back, whose older epochs must land first.
    pub fn waits_for_drain(self) -> bool {
        self.drain == Some(WriteMode::OrderedWriteBack) && !self.mode.is_write_back()
    }

    /// A rewrite of a block whose dirty version belongs to a closed epoch keeps that version
    /// until it reached backing: write-back flush and ordered write-back (thesis 4.4.2), and
    /// every policy while a drain runs (the former policy's FLUSHes still in flight, and the
    /// drain itself, need those versions).
    pub fn keeps_closed_epochs(self) -> bool {
        self.mode.keeps_closed_epochs() || self.drain.is_some()
    }

    /// A FLUSH, and a FUA write the policy honours, commit the persisted dirty map:
    /// write-back persist, and any policy while write-back persist's dirty blocks drain (the
    /// device still names them; a commit must forget what reached backing).
    pub fn persisting(self) -> bool {
        self.mode == WriteMode::WriteBackPersist || self.drain == Some(WriteMode::WriteBackPersist)
    }

    /// A FLUSH waits until its epoch and every older one reached backing: write-back flush,
    /// and write-through or write-around while the dirty blocks of write-back flush, ordered
    /// or unsafe write-back drain (the new policy promises every acknowledged write on
    /// backing at a FLUSH).
    pub fn flush_waits(self) -> bool {
        self.mode == WriteMode::WriteBackFlush
            || (!self.mode.is_write_back()
                && matches!(
                    self.drain,
                    Some(
                        WriteMode::WriteBackFlush
                            | WriteMode::OrderedWriteBack
                            | WriteMode::UnsafeWriteBack
                    )
                ))
    }
}

/// Why `mode` cannot run on a cache device that forgets everything when ember stops
/// ([`crate::Device::volatile`], a memory cache), if it cannot: only the policies whose
/// acknowledged writes reach backing at a FLUSH (or are never promised) are safe there.
pub(crate) fn refused_on_volatile(mode: WriteMode) -> Option<&'static str> {
    match mode {
        // Ordered write-back promises only a consistent backing after the loss of the cache,
        // which a memory cache is at every crash.
        WriteMode::WriteThrough
        | WriteMode::WriteAround
        | WriteMode::WriteBackFlush
        | WriteMode::OrderedWriteBack => None,
        WriteMode::WriteBackPersist => Some(
            "write-back-persist keeps acknowledged writes only on the cache device across a \
             FLUSH, and a memory cache loses them at every stop or crash; use write-back-flush \
             (dirty blocks reach backing at each FLUSH) or a cache file",
        ),
        WriteMode::UnsafeWriteBack => Some(
            "unsafe-write-back ignores FLUSH, so a memory cache would lose acknowledged writes \
             at every stop; use write-back-flush",
        ),
    }
}

/// Bits of the word holding the mode's code.
const MODE_BITS: u64 = 0xf;
/// Shift of the drain's code + 1 (0: none).
const DRAIN_SHIFT: u32 = 4;
/// Shift of the phase.
const PHASE_SHIFT: u32 = 8;

fn encode(p: Policy) -> u64 {
    u64::from(p.mode.code()) | (u64::from(p.drain.map_or(0, |d| d.code() + 1)) << DRAIN_SHIFT)
}

fn decode(w: u64) -> Policy {
    // Only `encode` writes the word: the codes are valid.
    let mode = WriteMode::from_code((w & MODE_BITS) as u32).unwrap_or_default();
    let drain = match (w >> DRAIN_SHIFT) & MODE_BITS {
        0 => None,
        c => WriteMode::from_code(c as u32 - 1),
    };
    Policy { mode, drain }
}

/// The policy word and the requests registered in each phase's parity.
pub(crate) struct PolicyCell {
    /// The policy's bits, and the phase above them.
    word: AtomicU64,
    /// Requests inside, by the parity of the phase they registered in.
    inside: [AtomicU64; 2],
}

/// A request registered in a phase; leaves on drop.
pub(crate) struct PolicyPass<'a>(&'a AtomicU64);

impl Drop for PolicyPass<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, SeqCst);
    }
}

impl PolicyCell {
    /// A cell holding `mode`, nothing draining.
    pub fn new(mode: WriteMode) -> PolicyCell {
        PolicyCell {
            word: AtomicU64::new(encode(Policy::plain(mode))),
            inside: [AtomicU64::new(0), AtomicU64::new(0)],
        }
    }

    /// The policy now (for reports; a request uses [`PolicyCell::enter`]).
    pub fn load(&self) -> Policy {
        decode(self.word.load(SeqCst))
    }

    /// Read the policy and register in its phase, so a switch that stores another waits
    /// until this request dropped the pass. The registration is checked against the word
    /// read (all `SeqCst`): if a switch came between the read and the registration, the
    /// request reads again, so no request runs the old policy unseen by the switch.
    pub fn enter(&self) -> (Policy, PolicyPass<'_>) {
        loop {
            let w = self.word.load(SeqCst);
            let count = &self.inside[((w >> PHASE_SHIFT) & 1) as usize];
            count.fetch_add(1, SeqCst);
            if self.word.load(SeqCst) == w {
                return (decode(w), PolicyPass(count));
            }
            count.fetch_sub(1, SeqCst);
        }
    }

    /// Store `p` in a new phase. Returns the old phase's parity, for
    /// [`PolicyCell::quiesce`]. The caller holds the switch lock (one writer of the word).
    pub fn store_new_phase(&self, p: Policy) -> usize {
        let old = self.word.load(SeqCst);
        let phase = (old >> PHASE_SHIFT) + 1;
        self.word.store(encode(p) | (phase << PHASE_SHIFT), SeqCst);
        ((phase - 1) & 1) as usize
    }

    /// Store `p` in the same phase (nothing to wait for: the requests of the phase may run
    /// either policy). The caller holds the switch lock.
    pub fn store_same_phase(&self, p: Policy) {
        let old = self.word.load(SeqCst);
        self.word.store(encode(p) | (old & !((1 << PHASE_SHIFT) - 1)), SeqCst);
    }

    /// Wait until every request registered in the phase of parity `parity` has left, polling
    /// (a request takes micro- to milliseconds; a waiting one ends with its own exits).
    /// Gives up, returning false, once `give_up` says so (a shutdown).
    pub fn quiesce(&self, parity: usize, give_up: impl Fn() -> bool) -> bool {
        let mut pause = Duration::from_micros(20);
        while self.inside[parity].load(SeqCst) != 0 {
            if give_up() {
                return false;
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(2));
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;

    #[test]
    fn every_policy_round_trips_through_the_word() {
        let cell = PolicyCell::new(WriteMode::WriteThrough);
        for mode in WriteMode::ALL {
            for drain in std::iter::once(None).chain(WriteMode::ALL.map(Some)) {
                let p = Policy { mode, drain };
                cell.store_same_phase(p);
                assert_eq!(cell.load(), p);
                cell.store_new_phase(p);
                assert_eq!(cell.enter().0, p);
            }
        }
    }

    #[test]
    fn a_volume_of_its_own_runs_as_a_drain_of_the_cache_wide_write_back_policy() {
        use WriteMode::*;
        let p = Policy::plain(WriteBackPersist).for_volume(Some(WriteThrough));
        assert_eq!(p, Policy { mode: WriteThrough, drain: Some(WriteBackPersist) });
        assert!(p.persisting() && !p.write_back() && !p.flush_waits());
        let p = Policy::plain(WriteBackFlush).for_volume(Some(WriteAround));
        assert!(p.flush_waits() && p.keeps_closed_epochs() && !p.persisting());
        assert_eq!(
            Policy::plain(WriteThrough).for_volume(Some(WriteAround)),
            Policy::plain(WriteAround)
        );
        assert_eq!(
            Policy::plain(WriteBackPersist).for_volume(None),
            Policy::plain(WriteBackPersist)
        );
        let same = Policy::plain(WriteBackFlush).for_volume(Some(WriteBackFlush));
        assert_eq!(same, Policy::plain(WriteBackFlush));
    }

    /// Threads enter and leave while switches store new policies: when a quiesce returns, no
    /// request that read an older policy is still inside (each checks, while inside, that its
    /// policy is at least the one the last finished quiesce saw).
    #[test]
    fn a_quiesce_outlasts_every_request_of_the_old_phase() {
        let cell = Arc::new(PolicyCell::new(WriteMode::WriteThrough));
        let settled = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let ran = Arc::new(AtomicU64::new(0));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let (cell, settled, stop) = (cell.clone(), settled.clone(), stop.clone());
                let ran = ran.clone();
                std::thread::spawn(move || {
                    let mut n = 0u64;
                    while !stop.load(SeqCst) {
                        let (p, _pass) = cell.enter();
                        // The switches count up through the modes' codes.
                        let seen = u64::from(p.mode.code());
                        for _ in 0..50 {
                            assert!(
                                seen >= settled.load(SeqCst),
                                "a request of policy {seen} ran after the quiesce of {}",
                                settled.load(SeqCst)
                            );
                            std::hint::spin_loop();
                        }
                        n += 1;
                        ran.fetch_add(1, SeqCst);
                    }
                    n
                })
            })
            .collect();
        // At least 200 rounds, and on until the requests have run a while (threads a loaded
        // machine schedules late), at most 10 s.
        let t0 = std::time::Instant::now();
        let mut round = 0u32;
        while round < 200 || (ran.load(SeqCst) <= 100 && t0.elapsed() < Duration::from_secs(10)) {
            round += 1;
            let code = (round % 5) + 1;
            let mode = WriteMode::from_code(code).unwrap();
            let parity = cell.store_new_phase(Policy::plain(mode));
            assert!(cell.quiesce(parity, || false));
            settled.store(u64::from(code), SeqCst);
            std::thread::sleep(Duration::from_micros(50));
            // Back to the lowest code, quiesced, before the next round raises it again (every
            // new phase is quiesced before the next: the parities alternate).
            settled.store(0, SeqCst);
            let parity = cell.store_new_phase(Policy::plain(WriteMode::WriteThrough));
            assert!(cell.quiesce(parity, || false));
        }
        stop.store(true, SeqCst);
        let done: u64 = threads.into_iter().map(|t| t.join().unwrap()).sum();
        assert!(done > 100, "the requests ran ({done})");
    }
}
