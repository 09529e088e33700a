//! The client side of a DEMOTE topology as the topology drives it ([`ClientCache`]): Wong and
//! Wilkes' plain LRU cache (every miss allocated, [`Lru`]), or a client tier as `ember serve
//! --demote` runs it ([`SievedClient`]): any replacement policy, an admission sieve and a
//! write policy, built from the same `ember_policy` code the server builds.
//!
//! Per block access a [`SievedClient`] does what the real cache does and the single-cache
//! simulator does (`crate::core::simulate`): [`Replacement::lookup`], then
//! [`Admission::observe`] with the outcome; on a miss the sieve is told the occupancy and
//! asked [`Admission::admit`], and an admitted block is inserted (an allocation-write, which
//! may eject a victim). A write miss under write-around is never allocated (the sieve is not
//! asked). The ejected victim is what the topology DEMOTEs: every victim of a READ miss, and
//! the victims of write misses unless the client writes back (the real cache frees a block
//! for a dirty write through its flusher's clean list, and does not demote it).

use ember_policy::replacement::Lru;
use ember_policy::{Access, Admission, Replacement};
use ember_trace::Op;

/// What one client access did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClientStep {
    /// The block was cached.
    pub hit: bool,
    /// A missed block was allocated (an allocation-write).
    pub allocated: bool,
    /// A missed block the sieve refused.
    pub refused: bool,
    /// The block ejected to make room, to be demoted (`None` too when the client does not
    /// demote it).
    pub ejected: Option<u64>,
}

/// A client cache under a DEMOTE topology.
pub trait ClientCache {
    /// One client access of a block (a READ or a write).
    fn access(&mut self, access: &Access) -> ClientStep;
}

impl ClientCache for Lru {
    /// Wong & Wilkes' client: LRU, every miss allocated.
    #[inline]
    fn access(&mut self, access: &Access) -> ClientStep {
        let (hit, ejected) = Replacement::access(self, access);
        ClientStep { hit, allocated: !hit, refused: false, ejected }
    }
}

/// How a client tier handles writes (`--write-policy`), as far as the topology sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ClientWrites {
    /// Write-through: a write miss is sieved and allocated; the write goes to the array at
    /// once.
    Through,
    /// Write-around: a write miss is never allocated; the write goes to the array at once.
    Around,
    /// A write-back policy: a write miss is sieved and allocated; the write reaches the array
    /// when the flusher writes the block, modelled as at once (the clock decides when).
    Back,
}

/// A client tier: a replacement policy, an admission sieve and a write policy.
pub struct SievedClient {
    policy: Box<dyn Replacement>,
    sieve: Box<dyn Admission>,
    writes: ClientWrites,
    demotes: bool,
}

impl SievedClient {
    /// The client tier `policy` with `sieve`, writing as `writes`.
    pub fn new(
        policy: Box<dyn Replacement>,
        sieve: Box<dyn Admission>,
        writes: ClientWrites,
    ) -> Self {
        Self { policy, sieve, writes, demotes: true }
    }

    /// Whether it demotes its victims (`--demote`; the default) or only drops them.
    pub fn demoting(mut self, demotes: bool) -> Self {
        self.demotes = demotes;
        self
    }

    /// Its write policy.
    pub fn writes(&self) -> ClientWrites {
        self.writes
    }
}

impl ClientCache for SievedClient {
    fn access(&mut self, access: &Access) -> ClientStep {
        let hit = self.policy.lookup(access);
        self.sieve.observe(access, hit);
        if hit {
            return ClientStep { hit, ..ClientStep::default() };
        }
        let write = access.op == Op::Write;
        if write && self.writes == ClientWrites::Around {
            return ClientStep::default();
        }
        self.sieve.set_occupancy(self.policy.len(), self.policy.capacity());
        if !self.sieve.admit(access) {
            return ClientStep { refused: true, ..ClientStep::default() };
        }
        let ejected = self.policy.insert(access);
        // A write-back client frees a block for a dirty write without demoting its victim.
        let ejected =
            ejected.filter(|_| self.demotes && !(write && self.writes == ClientWrites::Back));
        ClientStep { hit: false, allocated: true, refused: false, ejected }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ember_policy::admission::{Aod, Wmna};

    fn acc(key: u64, op: Op) -> Access {
        Access { op, ..Access::read(key, 0) }
    }

    #[test]
    fn sieved_clients_allocate_as_their_write_policy_says() {
        let lru = || ember_policy::replacement::build(ember_policy::Kind::Lru, 1);
        let mut through = SievedClient::new(lru(), Box::new(Aod), ClientWrites::Through);
        assert!(through.access(&acc(1, Op::Read)).allocated);
        let s = through.access(&acc(2, Op::Write));
        assert_eq!((s.allocated, s.ejected), (true, Some(1)));
        assert!(through.access(&acc(2, Op::Read)).hit);
        let mut around = SievedClient::new(lru(), Box::new(Aod), ClientWrites::Around);
        assert_eq!(around.access(&acc(1, Op::Write)), ClientStep::default());
        let mut back = SievedClient::new(lru(), Box::new(Aod), ClientWrites::Back);
        back.access(&acc(1, Op::Read));
        let s = back.access(&acc(2, Op::Write));
        assert_eq!((s.allocated, s.ejected), (true, None), "no DEMOTE for a dirty write");
        let mut wmna = SievedClient::new(lru(), Box::new(Wmna), ClientWrites::Through);
        assert!(wmna.access(&acc(1, Op::Write)).refused);
        let mut quiet =
            SievedClient::new(lru(), Box::new(Aod), ClientWrites::Through).demoting(false);
        quiet.access(&acc(1, Op::Read));
        assert_eq!(quiet.access(&acc(2, Op::Read)).ejected, None);
        let mut plain = Lru::new(1);
        assert!(ClientCache::access(&mut plain, &acc(1, Op::Read)).allocated);
        assert_eq!(ClientCache::access(&mut plain, &acc(2, Op::Read)).ejected, Some(1));
    }
}
