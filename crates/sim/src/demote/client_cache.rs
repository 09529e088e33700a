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
//! asked). A write hit under a write-back policy takes a new block for its new version
//! (no-overwrite): in a full cache it ejects a victim at once, and the next miss takes the
//! old version's block without an eviction ([`new_version_room`]). The ejected victim is what
//! the topology DEMOTEs: every clean block ejected, for a READ miss, a write miss or a write
//! hit's new version alike (Wong and Wilkes 1.1), as the real client
//! tier demotes it.

use ember_policy::demote::new_version_room;
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
        let write = access.op == Op::Write;
        if hit {
            // A write-back write hit's new version takes a block of its own.
            let ejected = if write && self.writes == ClientWrites::Back {
                new_version_room(self.policy.as_mut(), access.key)
            } else {
                None
            };
            return ClientStep { hit, ejected: self.demoted(ejected), ..ClientStep::default() };
        }
        if write && self.writes == ClientWrites::Around {
            return ClientStep::default();
        }
        self.sieve.set_occupancy(self.policy.len(), self.policy.capacity());
        if !self.sieve.admit(access) {
            return ClientStep { refused: true, ..ClientStep::default() };
        }
        let ejected = self.policy.insert(access);
        let ejected = self.demoted(ejected);
        ClientStep { hit: false, allocated: true, refused: false, ejected }
    }
}

impl SievedClient {
    /// The clean block `ejected`, if the client demotes (every one ejected: Wong and Wilkes
    /// 1.1).
    fn demoted(&self, ejected: Option<u64>) -> Option<u64> {
        ejected.filter(|_| self.demotes)
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
        // Write-back: a dirty write's victim is demoted as a READ miss's is; a write hit in
        // a full cache ejects (and demotes) a victim for its new version, and the next miss
        // takes the old version's block without ejecting anything.
        let mut back = SievedClient::new(lru(), Box::new(Aod), ClientWrites::Back);
        back.access(&acc(1, Op::Read));
        let s = back.access(&acc(2, Op::Write));
        assert_eq!((s.allocated, s.ejected), (true, Some(1)), "a dirty write's victim");
        let two = || ember_policy::replacement::build(ember_policy::Kind::Lru, 2);
        let mut back = SievedClient::new(two(), Box::new(Aod), ClientWrites::Back);
        back.access(&acc(1, Op::Read));
        back.access(&acc(2, Op::Read));
        let s = back.access(&acc(1, Op::Write));
        assert_eq!((s.hit, s.allocated, s.ejected), (true, false, Some(2)), "a new version");
        assert!(back.access(&acc(1, Op::Read)).hit);
        let s = back.access(&acc(3, Op::Read));
        assert_eq!((s.allocated, s.ejected), (true, None), "the old version's block");
        assert_eq!(back.access(&acc(4, Op::Read)).ejected, Some(1));
        let mut through = SievedClient::new(two(), Box::new(Aod), ClientWrites::Through);
        through.access(&acc(1, Op::Read));
        through.access(&acc(2, Op::Read));
        assert_eq!(through.access(&acc(1, Op::Write)).ejected, None, "written in place");
        let mut quiet = SievedClient::new(two(), Box::new(Aod), ClientWrites::Back).demoting(false);
        quiet.access(&acc(1, Op::Read));
        quiet.access(&acc(2, Op::Read));
        assert_eq!(quiet.access(&acc(1, Op::Write)).ejected, None);
        assert!(!quiet.access(&acc(2, Op::Read)).hit, "ejected all the same");
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
