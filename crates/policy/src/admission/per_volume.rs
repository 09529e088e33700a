//! Per-volume sieves: the cache-wide sieve decides for every volume, except the volumes given
//! a sieve of their own ([`VolumeSieves::set_volume`]), as Open CAS's IO classes each carry
//! their own allocation rule. Every access is observed by the sieve that decides its volume
//! only, so a volume's counts (SieveStore-C's IMCT, OCF's hit counts) never mix with
//! another's. With no volume sieve set it is the cache-wide sieve plus one branch per call.
//! The simulator and the real cache route through it the same way.

use super::Admission;
use crate::Access;
use ember_trace::key_volume;

/// The cache-wide sieve and the volumes' own ones.
pub struct VolumeSieves {
    default: Box<dyn Admission>,
    /// By volume number; `None`: the cache-wide sieve decides.
    volumes: Vec<Option<Box<dyn Admission>>>,
    /// Some volume has a sieve of its own.
    any: bool,
}

impl VolumeSieves {
    /// `default` for every volume.
    pub fn new(default: Box<dyn Admission>) -> VolumeSieves {
        VolumeSieves { default, volumes: Vec::new(), any: false }
    }

    /// The cache-wide sieve.
    pub fn default_sieve(&self) -> &dyn Admission {
        self.default.as_ref()
    }

    /// Put `new` in force for the volumes without a sieve of their own; returns the old one.
    pub fn replace_default(&mut self, new: Box<dyn Admission>) -> Box<dyn Admission> {
        std::mem::replace(&mut self.default, new)
    }

    /// Give `volume` the sieve `sieve` (`None`: the cache-wide one again); returns the one it
    /// had. A new sieve starts from nothing.
    pub fn set_volume(
        &mut self,
        volume: u32,
        sieve: Option<Box<dyn Admission>>,
    ) -> Option<Box<dyn Admission>> {
        let i = volume as usize;
        if self.volumes.len() <= i {
            self.volumes.resize_with(i + 1, || None);
        }
        let old = std::mem::replace(&mut self.volumes[i], sieve);
        self.any = self.volumes.iter().any(Option::is_some);
        old
    }

    /// The name of the sieve deciding `volume`'s misses.
    pub fn name_of(&self, volume: u32) -> &'static str {
        self.own(volume).map_or_else(|| self.default.name(), |a| a.name())
    }

    /// True if `volume` has a sieve of its own.
    pub fn has_own(&self, volume: u32) -> bool {
        self.own(volume).is_some()
    }

    fn own(&self, volume: u32) -> Option<&dyn Admission> {
        self.volumes.get(volume as usize).and_then(|a| a.as_deref())
    }

    #[inline]
    fn of(&mut self, key: u64) -> &mut dyn Admission {
        if self.any {
            if let Some(Some(a)) = self.volumes.get_mut(key_volume(key) as usize) {
                return a.as_mut();
            }
        }
        self.default.as_mut()
    }
}

impl Admission for VolumeSieves {
    fn name(&self) -> &'static str {
        self.default.name()
    }

    #[inline]
    fn observe(&mut self, access: &Access, hit: bool) {
        self.of(access.key).observe(access, hit);
    }

    #[inline]
    fn admit(&mut self, access: &Access) -> bool {
        self.of(access.key).admit(access)
    }

    fn memory_bytes(&self) -> usize {
        self.default.memory_bytes()
            + self.volumes.iter().flatten().map(|a| a.memory_bytes()).sum::<usize>()
    }

    fn set_occupancy(&mut self, resident: usize, capacity: usize) {
        self.default.set_occupancy(resident, capacity);
        if self.any {
            for a in self.volumes.iter_mut().flatten() {
                a.set_occupancy(resident, capacity);
            }
        }
    }

    fn admits_every_miss(&self) -> bool {
        !self.any && self.default.admits_every_miss()
    }

    fn prefetch(&self, access: &Access) {
        match self.own(key_volume(access.key)) {
            Some(a) => a.prefetch(access),
            None => self.default.prefetch(access),
        }
    }

    fn end_epoch(&mut self) -> Option<Vec<(u64, u64)>> {
        self.default.end_epoch()
    }

    fn epoch_origin(&self) -> Option<u64> {
        self.default.epoch_origin()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::{Aod, Wmna};
    use ember_trace::{block_key, Op};

    fn acc(vol: u32, op: Op) -> Access {
        Access { key: block_key(vol, 7), time_ns: 0, op, vtime: 0, next_vtime: 0 }
    }

    #[test]
    fn a_volume_with_a_sieve_of_its_own_is_decided_by_it() {
        let mut s = VolumeSieves::new(Box::new(Aod));
        assert!(s.admits_every_miss());
        assert!(s.admit(&acc(1, Op::Write)));
        s.set_volume(1, Some(Box::new(Wmna)));
        assert!(!s.admits_every_miss());
        assert!(!s.admit(&acc(1, Op::Write)), "volume 1 runs WMNA");
        assert!(s.admit(&acc(1, Op::Read)));
        assert!(s.admit(&acc(0, Op::Write)), "volume 0 the cache-wide AOD");
        assert!(s.admit(&acc(2, Op::Write)), "volume 2 too");
        assert_eq!((s.name_of(1), s.name_of(2), s.name()), ("wmna", "aod", "aod"));
        assert!(s.set_volume(1, None).is_some());
        assert!(s.admit(&acc(1, Op::Write)));
        assert!(s.admits_every_miss());
    }
}
