//! A discrete (epoch) sieve — SieveStore-D, RandSieve-BlkD — as the per-miss
//! [`Admission`] a real cache asks (SieveStore, ISCA 2010, section 3.2): it counts every
//! access of the epoch and admits no miss; at the end of each epoch the cache's batch mover
//! takes [`Admission::end_epoch`]'s choice and installs it. Within an epoch nothing is
//! replaced, as the paper specifies.
//!
//! Bounded memory: the paper logs accesses and counts them offline; here the counts live in
//! memory, at most `max_bytes` of them per epoch (the sieve's own accounting,
//! [`EpochSieve::memory_bytes`]). Once an epoch's counts reach the bound, its further
//! accesses are not counted ([`EpochAdmission::uncounted`] says how many), so the blocks
//! first seen after that cannot be chosen.

use super::{Admission, EpochSieve};

/// A discrete sieve behind the per-miss interface.
pub struct EpochAdmission {
    sieve: Box<dyn EpochSieve>,
    max_bytes: usize,
    origin: Option<u64>,
    uncounted: u64,
}

impl EpochAdmission {
    /// Wrap `sieve`, counting at most `max_bytes` of accesses per epoch. An oracle sieve
    /// (the ideal one) needs the epoch's accesses in advance and cannot run in a real cache.
    pub fn new(sieve: Box<dyn EpochSieve>, max_bytes: usize) -> Result<Self, String> {
        if sieve.oracle() {
            return Err(format!(
                "{} knows each epoch's accesses in advance: it runs only in the simulator",
                sieve.name()
            ));
        }
        Ok(EpochAdmission { sieve, max_bytes, origin: None, uncounted: 0 })
    }

    /// Accesses not counted since the start because an epoch's counts were at the bound.
    pub fn uncounted(&self) -> u64 {
        self.uncounted
    }
}

impl Admission for EpochAdmission {
    fn name(&self) -> &'static str {
        self.sieve.name()
    }

    fn observe(&mut self, access: &crate::Access, _hit: bool) {
        self.origin.get_or_insert(access.time_ns);
        if self.sieve.memory_bytes() < self.max_bytes {
            self.sieve.observe(access);
        } else {
            self.uncounted += 1;
        }
    }

    fn admit(&mut self, _access: &crate::Access) -> bool {
        false
    }

    fn memory_bytes(&self) -> usize {
        self.sieve.memory_bytes()
    }

    fn end_epoch(&mut self) -> Option<Vec<(u64, u64)>> {
        Some(self.sieve.end_epoch())
    }

    fn epoch_origin(&self) -> Option<u64> {
        self.origin
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::{Ideal, SieveStoreD};
    use crate::Access;

    #[test]
    fn counts_admits_nothing_and_chooses_at_the_epoch_end() {
        let mut a = EpochAdmission::new(Box::new(SieveStoreD::new(2).unwrap()), 1 << 20).unwrap();
        for (i, k) in [1u64, 1, 1, 2, 3, 3, 3, 3].iter().enumerate() {
            let acc = Access::read(*k, i as u64);
            a.observe(&acc, false);
            assert!(!a.admit(&acc), "no miss is admitted inside an epoch");
        }
        assert_eq!(a.epoch_origin(), Some(0));
        let chosen: Vec<u64> = a.end_epoch().unwrap().into_iter().map(|(k, _)| k).collect();
        assert_eq!(chosen, vec![3, 1], "more than t = 2 accesses, most wanted first");
        assert!(a.end_epoch().unwrap().is_empty(), "counts reset each epoch");
        assert!(EpochAdmission::new(Box::new(Ideal::new(0.1).unwrap()), 1).is_err());
    }

    #[test]
    fn counting_stops_at_the_memory_bound() {
        let mut a = EpochAdmission::new(Box::new(SieveStoreD::new(1).unwrap()), 1).unwrap();
        for k in 0..100u64 {
            a.observe(&Access::read(k, k), false);
        }
        assert!(a.uncounted() > 0 && a.uncounted() < 100, "{}", a.uncounted());
    }
}
