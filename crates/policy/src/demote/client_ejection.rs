//! The client side of exclusive caching: which clean blocks a client tier ejects, and which
//! of them it demotes, decided alike by `ember serve --demote` and the laboratory's client
//! caches (`ember sim --deployment`).
//!
//! Wong and Wilkes, *My cache or yours?*, section 1.1: "when a client is about to eject a
//! clean block from its cache (e.g., to make space for a READ), it first tries to return the
//! block to the array using a DEMOTE". The READ is the paper's example, not a condition (its
//! workloads are READs only): the array is to hold what the client drops, so a demoting
//! client demotes every clean block it ejects, whether a READ miss, a write miss or a write
//! hit's new version took its room.
//!
//! Under a write-back policy a write takes a new cache block even when it hits (Qin's
//! thesis, 4.1, no-overwrite: the old version stays valid until the new one is written). In
//! a full cache that block is a victim's, ejected at the write hit; once the new version is
//! written the old version's block is free, and the next miss takes it without ejecting
//! anything. [`new_version_room`] is that step on a replacement policy: the laboratory's
//! client takes it at a write-back write hit, where the real cache frees its oldest clean
//! block for the new version (with LRU, the block the policy would evict).

use crate::replacement::Replacement;

/// Room for the new version of `key`, resident in `policy` and just looked up, at a write
/// hit under a write-back policy: if the policy is full, it evicts the block it would evict
/// next, never `key`, and returns it (a clean block ejected, so demoted).
/// `key` stays resident; the policy then has one free slot, the old version's block, which
/// the next insertion takes without an eviction.
///
/// None if the policy has a free slot (the new version takes it, and frees the old one's),
/// or cannot evict on demand ([`Replacement::evict_where`]): the write hit then takes no
/// room, and the next insertion into the full policy ejects the victim instead.
pub fn new_version_room(policy: &mut dyn Replacement, key: u64) -> Option<u64> {
    if policy.len() < policy.capacity() {
        return None;
    }
    policy.evict_where(&mut |k| k != key).flatten()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replacement::{build, Lru};
    use crate::{Access, Kind};

    /// A full LRU of 1, 2, 3: a write hit of 1 ejects 2 (the least recent but 1), keeps 1,
    /// and leaves a free slot, so the next miss ejects nothing and the one after ejects 3.
    #[test]
    fn a_write_hit_in_a_full_policy_ejects_the_next_victim_and_leaves_a_free_slot() {
        let mut lru = Lru::new(3);
        for k in 1..=3 {
            assert_eq!(lru.insert(&Access::read(k, 0)), None);
        }
        assert!(lru.lookup(&Access::read(1, 0)));
        assert_eq!(new_version_room(&mut lru, 1), Some(2));
        assert!(lru.contains(1) && !lru.contains(2));
        assert_eq!(new_version_room(&mut lru, 1), None, "a free slot: no room to make");
        assert_eq!(lru.insert(&Access::read(4, 0)), None);
        assert_eq!(lru.insert(&Access::read(5, 0)), Some(3));
        // Never the written block itself, even when the policy would evict it next.
        let mut one = build(Kind::Lru, 2);
        one.insert(&Access::read(7, 0));
        one.insert(&Access::read(8, 0));
        assert_eq!(new_version_room(one.as_mut(), 7), Some(8));
        assert!(one.contains(7));
    }
}
