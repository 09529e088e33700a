//! The sequential cutoff ([`crate::seq_cutoff`]) in front of a sieve, as one [`Admission`]:
//! how the simulator runs it. Every access is observed by both; a miss the cutoff cuts is
//! refused without asking the sieve (the real cache asks in the same order, `CacheState` in
//! the engine).

use super::Admission;
use crate::seq_cutoff::{SeqCutoff, SeqCutoffConfig};
use crate::Access;

/// A sieve behind a sequential cutoff.
pub struct CutoffAdmission<A: ?Sized> {
    cutoff: SeqCutoff,
    resident: usize,
    capacity: usize,
    inner: Box<A>,
}

impl<A: Admission + ?Sized> CutoffAdmission<A> {
    /// `inner` behind a cutoff configured by `cfg`.
    pub fn new(cfg: SeqCutoffConfig, inner: Box<A>) -> Self {
        Self { cutoff: SeqCutoff::new(cfg), resident: 0, capacity: 0, inner }
    }

    /// The cutoff (its settings and counts).
    pub fn cutoff(&self) -> &SeqCutoff {
        &self.cutoff
    }

    /// The cutoff, to give a volume settings of its own
    /// ([`SeqCutoff::set_volume_config`]).
    pub fn cutoff_mut(&mut self) -> &mut SeqCutoff {
        &mut self.cutoff
    }

    /// The sieve behind the cutoff.
    pub fn inner(&self) -> &A {
        &self.inner
    }
}

impl<A: Admission + ?Sized> Admission for CutoffAdmission<A> {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    fn observe(&mut self, access: &Access, hit: bool) {
        self.cutoff.observe(access);
        self.inner.observe(access, hit);
    }

    fn admit(&mut self, access: &Access) -> bool {
        if self.cutoff.cuts(access, self.resident, self.capacity) {
            return false;
        }
        self.inner.admit(access)
    }

    fn memory_bytes(&self) -> usize {
        self.inner.memory_bytes()
    }

    fn set_occupancy(&mut self, resident: usize, capacity: usize) {
        self.resident = resident;
        self.capacity = capacity;
        self.inner.set_occupancy(resident, capacity);
    }

    fn admits_every_miss(&self) -> bool {
        !self.cutoff.is_active() && self.inner.admits_every_miss()
    }

    fn prefetch(&self, access: &Access) {
        self.inner.prefetch(access);
    }

    fn end_epoch(&mut self) -> Option<Vec<(u64, u64)>> {
        self.inner.end_epoch()
    }

    fn epoch_origin(&self) -> Option<u64> {
        self.inner.epoch_origin()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::Aod;
    use crate::seq_cutoff::CutoffPolicy;
    use ember_trace::{block_key, Op};

    fn read(block: u64) -> Access {
        Access { key: block_key(0, block), time_ns: 0, op: Op::Read, vtime: 0, next_vtime: 0 }
    }

    #[test]
    fn the_admission_wrapper_refuses_cut_misses_without_asking_the_sieve() {
        let cfg = SeqCutoffConfig {
            policy: CutoffPolicy::Always,
            read_blocks: 2,
            write_blocks: 2,
            streams: 4,
        };
        let mut a = CutoffAdmission::new(cfg, Box::new(Aod));
        assert!(!a.admits_every_miss());
        let admitted: Vec<bool> = (0..4)
            .map(|b| {
                let acc = read(b);
                a.observe(&acc, false);
                a.admit(&acc)
            })
            .collect();
        assert_eq!(admitted, [true, true, false, false]);
        assert_eq!(a.cutoff().cut_total(), 2);
        let off = CutoffAdmission::new(SeqCutoffConfig::default(), Box::new(Aod));
        assert!(off.admits_every_miss(), "off: the simulator's fast path stays");
    }
}
