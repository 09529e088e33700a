//! Write-around per volume in front of a sieve, as the simulator models the real cache's
//! write policies: a write miss of a volume under write-around is never allocated, and
//! neither the sieve nor a cutoff in front of it is asked (the real cache decides the write
//! policy first). Every access is still observed. Volumes not listed pass through.

use super::Admission;
use crate::Access;
use ember_trace::key_volume;

/// `inner`, with the write misses of some volumes refused.
pub struct WriteAround<A: ?Sized> {
    /// By volume number: its write misses are refused.
    around: Vec<bool>,
    inner: Box<A>,
}

impl<A: Admission + ?Sized> WriteAround<A> {
    /// `inner`, with the write misses of every volume in `volumes` refused.
    pub fn new(volumes: &[u32], inner: Box<A>) -> Self {
        let mut around = Vec::new();
        for &v in volumes {
            let i = v as usize;
            if around.len() <= i {
                around.resize(i + 1, false);
            }
            around[i] = true;
        }
        Self { around, inner }
    }

    /// The sieve behind.
    pub fn inner(&self) -> &A {
        &self.inner
    }
}

impl<A: Admission + ?Sized> Admission for WriteAround<A> {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    fn observe(&mut self, access: &Access, hit: bool) {
        self.inner.observe(access, hit);
    }

    fn admit(&mut self, access: &Access) -> bool {
        if access.op.is_write()
            && self.around.get(key_volume(access.key) as usize).copied().unwrap_or(false)
        {
            return false;
        }
        self.inner.admit(access)
    }

    fn memory_bytes(&self) -> usize {
        self.inner.memory_bytes()
    }

    fn set_occupancy(&mut self, resident: usize, capacity: usize) {
        self.inner.set_occupancy(resident, capacity);
    }

    fn admits_every_miss(&self) -> bool {
        !self.around.contains(&true) && self.inner.admits_every_miss()
    }

    fn prefetch(&self, access: &Access) {
        self.inner.prefetch(access);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::Aod;
    use ember_trace::{block_key, Op};

    #[test]
    fn only_the_listed_volumes_write_misses_are_refused() {
        let mut a = WriteAround::new(&[1], Box::new(Aod));
        let w = |vol| Access { op: Op::Write, ..Access::read(block_key(vol, 3), 0) };
        assert!(!a.admit(&w(1)));
        assert!(a.admit(&Access::read(block_key(1, 3), 0)));
        assert!(a.admit(&w(0)));
        assert!(!a.admits_every_miss());
    }
}
