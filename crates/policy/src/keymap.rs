//! The hash index every replacement policy uses: block key → slab slot.
//!
//! Open addressing over cache-line *groups*, sized once from the number of entries it must
//! hold, so it never rehashes on the hot path. A group is 64 bytes: seven entries and an
//! overflow counter. A key lives in its home group unless that group is full, in which case
//! it goes to the next group with room, and every group it passed counts one more overflow;
//! a lookup stops at the first group whose overflow counter is zero. Deletion clears the
//! entry and decrements the counters it had raised: no tombstones, nothing ever moves, and
//! a lookup reads one cache line in all but a few percent of cases.
//!
//! Each way holds a 32-bit tag, a fingerprint of the key (the high half of a multiplicative
//! hash), and a 32-bit slot; the tags of a group are compared at once (SSE2 on x86-64). The
//! key itself lives in the caller's slab, which a lookup reads only when a tag matches.
//! Groups are sized for four entries each on average (load 4/7), so the index costs 16 bytes
//! per entry.

/// The tag of an empty way (fingerprints are never 0: see [`fingerprint`]).
const EMPTY_TAG: u32 = 0;

/// Ways per group; the eighth tag word is the overflow counter.
const WAYS: usize = 7;

/// Mask of the ways in an 8-bit lane mask.
const WAY_MASK: u32 = (1 << WAYS) - 1;

/// Average entries per group the map is sized for.
const LOAD_PER_GROUP: usize = 4;

/// One cache line of the table: eight 32-bit tags (seven fingerprints and the overflow
/// counter, the number of keys whose home is this group or an earlier one stored past it)
/// and seven slots.
#[derive(Clone, Copy, Debug)]
#[repr(C, align(64))]
struct Group {
    tags: [u32; 8],
    slots: [u32; 8],
}

const EMPTY_GROUP: Group = Group { tags: [EMPTY_TAG; 8], slots: [u32::MAX; 8] };

impl Group {
    #[inline(always)]
    fn overflow(&self) -> u32 {
        self.tags[WAYS]
    }

    #[inline(always)]
    fn overflow_mut(&mut self) -> &mut u32 {
        &mut self.tags[WAYS]
    }

    /// Bit w set where way w's tag equals `tag`.
    #[inline(always)]
    fn matches(&self, tag: u32) -> u32 {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::x86_64::*;
            // SAFETY: SSE2 is part of the x86-64 baseline; the loads read the 32 bytes of
            // `tags` (unaligned loads, no alignment requirement).
            unsafe {
                let needle = _mm_set1_epi32(tag as i32);
                let p = self.tags.as_ptr().cast::<__m128i>();
                let lo = _mm_cmpeq_epi32(_mm_loadu_si128(p), needle);
                let hi = _mm_cmpeq_epi32(_mm_loadu_si128(p.add(1)), needle);
                let m = _mm_movemask_ps(_mm_castsi128_ps(lo))
                    | (_mm_movemask_ps(_mm_castsi128_ps(hi)) << 4);
                m as u32 & WAY_MASK
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let mut m = 0;
            for w in 0..WAYS {
                m |= u32::from(self.tags[w] == tag) << w;
            }
            m
        }
    }
}

/// Where a missing key goes: returned by [`KeyMap::find`], consumed by [`KeyMap::insert_at`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bucket {
    home: usize,
    group: usize,
    way: usize,
    fp: u32,
}

/// A fixed-size open-addressing map from `u64` keys to `u32` slots.
///
/// The map does not store keys; lookups take the slab's key accessor to confirm a
/// fingerprint match. Every inserted key must be absent (the policies look up first).
#[derive(Clone, Debug)]
pub struct KeyMap {
    groups: Box<[Group]>,
    len: usize,
    max_len: usize,
}

/// The 32-bit fingerprint of `key`: the high half of a multiplicative (Fibonacci) hash of the
/// key folded onto itself, so both volume and block bits reach it, with its lowest bit set so
/// that it is never 0, the empty tag (one instruction; the home group is taken from the high
/// bits).
#[inline(always)]
pub fn fingerprint(key: u64) -> u32 {
    let h = ((key ^ (key >> 29)).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) as u32;
    h | 1
}

/// A bijection of `u32` (xor-shifts and odd multiplications, each invertible; the constants
/// are Chris Wellons' "lowbias32"), so distinct narrow keys get distinct tags, spread over
/// the index's groups. It maps 0 to 0, hence the `+ 1` in [`exact_tag`].
#[inline(always)]
pub fn mix32(mut x: u32) -> u32 {
    x ^= x >> 16;
    x = x.wrapping_mul(0x7feb_352d);
    x ^= x >> 15;
    x = x.wrapping_mul(0x846c_a68b);
    x ^ (x >> 16)
}

/// `key` as a narrow key, one an exact tag can name: below `u32::MAX` (so that its `+ 1` is a
/// non-zero `u32`); `None` for a wider one.
#[inline(always)]
pub fn narrow_key(key: u64) -> Option<u32> {
    u32::try_from(key).ok().filter(|&k| k != u32::MAX)
}

/// The exact tag of a narrow key `k` ([`narrow_key`]): [`mix32`] of `k + 1`, injective and
/// never 0 (the empty tag).
#[inline(always)]
pub fn narrow_tag(k: u32) -> u32 {
    mix32(k.wrapping_add(1))
}

/// An index tag that identifies `key` itself, for a narrow key (`None` for a wider one):
/// [`narrow_tag`] of it, so a map whose every tag is exact finds keys with
/// [`KeyMap::find_exact`], reading no key to confirm.
#[inline(always)]
pub fn exact_tag(key: u64) -> Option<u32> {
    narrow_key(key).map(narrow_tag)
}

impl Bucket {
    /// The fingerprint of the key this bucket was found for (see [`fingerprint`]): a caller
    /// that keeps it beside the key can later remove or prefetch the entry without hashing.
    #[inline(always)]
    pub fn fingerprint(&self) -> u32 {
        self.fp
    }
}

impl KeyMap {
    /// A map able to hold `entries` keys at once (plus one, see [`KeyMap::insert_at`]).
    pub fn with_entries(entries: usize) -> Self {
        let groups = entries.saturating_add(1).div_ceil(LOAD_PER_GROUP).max(2);
        let groups = crate::huge_pages::filled(groups, EMPTY_GROUP).into_boxed_slice();
        Self { groups, len: 0, max_len: entries }
    }

    /// Number of keys in the map.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// True if the map holds no key.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The number of keys the map was sized for.
    pub fn max_len(&self) -> usize {
        self.max_len
    }

    /// Bytes of memory the table occupies.
    pub fn memory_bytes(&self) -> usize {
        std::mem::size_of_val(&*self.groups)
    }

    #[inline(always)]
    fn home(&self, fp: u32) -> usize {
        ((u64::from(fp) * self.groups.len() as u64) >> 32) as usize
    }

    #[inline(always)]
    fn next(&self, g: usize) -> usize {
        let n = g + 1;
        if n == self.groups.len() {
            0
        } else {
            n
        }
    }

    /// Hint the CPU to load the group `key` hashes to, ahead of a lookup (a no-op off
    /// x86-64). Callers replaying a trace call it some accesses ahead.
    #[inline(always)]
    pub fn prefetch(&self, key: u64) {
        self.prefetch_fp(fingerprint(key));
    }

    /// [`KeyMap::prefetch`] of the key whose [`fingerprint`] is `fp`.
    #[inline(always)]
    pub fn prefetch_fp(&self, fp: u32) {
        crate::prefetch::prefetch(&self.groups[self.home(fp)]);
    }

    /// Look up `key`: `Ok(slot)` if present, else `Err(bucket)`, the free way where
    /// [`KeyMap::insert_at`] can put it without probing again. Entries never move, so the
    /// bucket stays valid across removals; it is consumed by the next insertion.
    #[inline(always)]
    pub fn find(&self, key: u64, key_of: impl Fn(u32) -> u64) -> Result<u32, Bucket> {
        self.find_fp(key, fingerprint(key), key_of)
    }

    /// [`KeyMap::find`] with `key`'s [`fingerprint`] already computed (`fp` must be it).
    #[inline(always)]
    pub fn find_fp(&self, key: u64, fp: u32, key_of: impl Fn(u32) -> u64) -> Result<u32, Bucket> {
        debug_assert_eq!(fp, fingerprint(key), "find_fp with another key's fingerprint");
        self.find_confirmed(fp, |slot| key_of(slot) == key)
    }

    /// [`KeyMap::find_fp`] for a map whose tags identify their keys: a caller that tags each
    /// key with an injective, never-zero 32-bit value (the LRU log's narrow keys,
    /// `replacement/lru_log.rs`) needs no key to confirm a tag match, so this reads the
    /// index alone. Mixing such tags with [`fingerprint`]s in one map is a bug.
    #[inline(always)]
    pub fn find_exact(&self, tag: u32) -> Result<u32, Bucket> {
        debug_assert_ne!(tag, EMPTY_TAG, "find_exact of the empty tag");
        self.find_confirmed(tag, |_| true)
    }

    /// The first entry tagged `tag` whose slot `confirm` accepts, or the bucket to insert at.
    #[inline(always)]
    fn find_confirmed(&self, tag: u32, confirm: impl Fn(u32) -> bool) -> Result<u32, Bucket> {
        let home = self.home(tag);
        let mut g = home;
        let mut free: Option<(usize, usize)> = None;
        for _ in 0..self.groups.len() {
            let group = &self.groups[g];
            let mut m = group.matches(tag);
            while m != 0 {
                let slot = group.slots[m.trailing_zeros() as usize];
                if confirm(slot) {
                    return Ok(slot);
                }
                m &= m - 1;
            }
            if free.is_none() {
                let e = group.matches(EMPTY_TAG);
                if e != 0 {
                    free = Some((g, e.trailing_zeros() as usize));
                }
            }
            if group.overflow() == 0 {
                break;
            }
            g = self.next(g);
        }
        let (group, way) = match free {
            Some(f) => f,
            None => self.free_from(g),
        };
        Err(Bucket { home, group, way, fp: tag })
    }

    /// The slot of the first entry of `fp`'s home group whose fingerprint is `fp`, without
    /// confirming its key (a rare false match, or a key past the home group, gives another
    /// slot or none): what a prefetch of a resident key's data needs once its group is loaded
    /// ([`KeyMap::prefetch_fp`]).
    #[inline(always)]
    pub fn first_match(&self, fp: u32) -> Option<u32> {
        let g = &self.groups[self.home(fp)];
        let m = g.matches(fp);
        (m != 0).then(|| g.slots[m.trailing_zeros() as usize])
    }

    /// The slot of `key`, if present. `key_of(slot)` must return the key stored in `slot`.
    #[inline]
    pub fn get(&self, key: u64, key_of: impl Fn(u32) -> u64) -> Option<u32> {
        self.find(key, key_of).ok()
    }

    /// The first free way at or after group `g`. The map is sized so one always exists:
    /// at most `max_len + 1` entries in `7 * ceil((max_len + 1) / 4)` ways.
    #[cold]
    fn free_from(&self, mut g: usize) -> (usize, usize) {
        for _ in 0..self.groups.len() {
            let e = self.groups[g].matches(EMPTY_TAG);
            if e != 0 {
                return (g, e.trailing_zeros() as usize);
            }
            g = self.next(g);
        }
        unreachable!("KeyMap sized for {} entries has no free way", self.max_len)
    }

    /// Map the key [`KeyMap::find`] did not find to `slot`, at the way it returned. The
    /// map has room for one entry more than [`KeyMap::max_len`], so a policy can insert the
    /// new key before removing its victim's.
    ///
    /// # Panics
    /// If the map would exceed its size by more than one entry: a bug in the calling
    /// policy, never a consequence of input.
    #[inline]
    pub fn insert_at(&mut self, bucket: Bucket, slot: u32) {
        assert!(self.len <= self.max_len, "KeyMap overfull");
        let mut g = bucket.home;
        while g != bucket.group {
            *self.groups[g].overflow_mut() += 1;
            g = self.next(g);
        }
        let group = &mut self.groups[bucket.group];
        debug_assert_eq!(group.tags[bucket.way], EMPTY_TAG, "insert_at into a used way");
        group.tags[bucket.way] = bucket.fp;
        group.slots[bucket.way] = slot;
        self.len += 1;
    }

    /// Map `key`, which must be absent, to `slot`.
    ///
    /// # Panics
    /// As [`KeyMap::insert_at`].
    #[inline]
    pub fn insert(&mut self, key: u64, slot: u32) {
        self.insert_fp(fingerprint(key), slot);
    }

    /// [`KeyMap::insert`] of the key tagged `fp` (its [`fingerprint`], or its
    /// [`exact_tag`] in a map of exact tags).
    ///
    /// # Panics
    /// As [`KeyMap::insert_at`].
    #[inline]
    pub fn insert_fp(&mut self, fp: u32, slot: u32) {
        let home = self.home(fp);
        let (group, way) = self.free_from(home);
        self.insert_at(Bucket { home, group, way, fp }, slot);
    }

    /// Remove the entry of `key`, known to map to `slot`. Returns false if it was absent.
    #[inline(always)]
    pub fn remove(&mut self, key: u64, slot: u32) -> bool {
        self.remove_fp(fingerprint(key), slot)
    }

    /// [`KeyMap::remove`] of the key whose [`fingerprint`] is `fp`.
    #[inline(always)]
    pub fn remove_fp(&mut self, fp: u32, slot: u32) -> bool {
        let home = self.home(fp);
        let mut g = home;
        let mut visited = 0;
        loop {
            let group = &mut self.groups[g];
            let mut m = group.matches(fp);
            let mut found = false;
            while m != 0 {
                let w = m.trailing_zeros() as usize;
                if group.slots[w] == slot {
                    group.tags[w] = EMPTY_TAG;
                    group.slots[w] = u32::MAX;
                    found = true;
                    break;
                }
                m &= m - 1;
            }
            if found {
                break;
            }
            visited += 1;
            if group.overflow() == 0 || visited == self.groups.len() {
                return false;
            }
            g = self.next(g);
        }
        let mut h = home;
        while h != g {
            *self.groups[h].overflow_mut() -= 1;
            h = self.next(h);
        }
        self.len -= 1;
        true
    }

    /// Give the entry of `key`, mapped to slot `old`, slot `new` instead (the entry itself
    /// stays where it is). Returns false if there was no such entry.
    pub fn reslot(&mut self, key: u64, old: u32, new: u32) -> bool {
        self.reslot_fp(fingerprint(key), old, new)
    }

    /// [`KeyMap::reslot`] of the key whose [`fingerprint`] is `fp`.
    #[inline(always)]
    pub fn reslot_fp(&mut self, fp: u32, old: u32, new: u32) -> bool {
        let mut g = self.home(fp);
        for _ in 0..self.groups.len() {
            let group = &mut self.groups[g];
            let mut m = group.matches(fp);
            while m != 0 {
                let w = m.trailing_zeros() as usize;
                if group.slots[w] == old {
                    group.slots[w] = new;
                    return true;
                }
                m &= m - 1;
            }
            if group.overflow() == 0 {
                return false;
            }
            g = self.next(g);
        }
        false
    }

    /// Remove every entry.
    pub fn clear(&mut self) {
        self.groups.fill(EMPTY_GROUP);
        self.len = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Keys live in a plain vector "slab"; slot i holds keys[i].
    fn check(map: &KeyMap, keys: &[u64], live: &[bool]) {
        for (slot, (&k, &l)) in keys.iter().zip(live).enumerate() {
            let got = map.get(k, |s| keys[s as usize]);
            assert_eq!(got, if l { Some(slot as u32) } else { None }, "key {k}");
        }
    }

    #[test]
    fn insert_get_remove_roundtrip() {
        let keys: Vec<u64> = (0..100).map(|i| i * 7919 + (i << 48)).collect();
        let mut map = KeyMap::with_entries(100);
        let mut live = vec![false; 100];
        for (i, &k) in keys.iter().enumerate() {
            map.insert(k, i as u32);
            live[i] = true;
        }
        assert_eq!(map.len(), 100);
        check(&map, &keys, &live);
        for i in (0..100).step_by(3) {
            assert!(map.remove(keys[i], i as u32));
            assert!(!map.remove(keys[i], i as u32), "second remove of {i}");
            live[i] = false;
        }
        assert_eq!(map.len(), 100 - 34);
        check(&map, &keys, &live);
        assert_eq!(map.get(123_456_789, |s| keys[s as usize]), None);
    }

    #[test]
    fn overflowing_groups_stay_reachable() {
        // Four groups (28 ways) holding 26 keys: most groups overflow, around the end too.
        let n = 40;
        let keys: Vec<u64> = (0..n as u64).map(|i| i.wrapping_mul(0x1234_5678_9abc)).collect();
        let mut map = KeyMap::with_entries(13);
        assert_eq!(map.groups.len(), 4);
        map.max_len = 26;
        let mut live = vec![true; n];
        for (i, &k) in keys.iter().enumerate().take(26) {
            map.insert(k, i as u32);
        }
        live[26..].iter_mut().for_each(|l| *l = false);
        check(&map, &keys, &live);
        for victim in [3usize, 0, 13, 7, 1] {
            assert!(map.remove(keys[victim], victim as u32));
            live[victim] = false;
            check(&map, &keys, &live);
        }
        assert!(map.groups.iter().map(|g| g.overflow()).sum::<u32>() > 0);
        for victim in [3usize, 0, 30] {
            map.insert(keys[victim], victim as u32);
            live[victim] = true;
        }
        check(&map, &keys, &live);
        // Remove everything: every overflow counter returns to zero.
        for (i, l) in live.iter_mut().enumerate() {
            if *l {
                assert!(map.remove(keys[i], i as u32));
                *l = false;
            }
        }
        assert!(map.is_empty());
        assert!(map.groups.iter().all(|g| g.overflow() == 0 && g.matches(EMPTY_TAG) == WAY_MASK));
    }

    #[test]
    fn colliding_keys_survive_removal() {
        let n = 8;
        let keys: Vec<u64> = (0..n as u64).map(|i| i.wrapping_mul(0x1234_5678_9abc)).collect();
        let mut map = KeyMap::with_entries(n);
        let mut live = vec![true; n];
        for (i, &k) in keys.iter().enumerate() {
            map.insert(k, i as u32);
        }
        for victim in [3usize, 0, 7, 5] {
            assert!(map.remove(keys[victim], victim as u32));
            live[victim] = false;
            check(&map, &keys, &live);
        }
        for victim in [3usize, 0] {
            map.insert(keys[victim], victim as u32);
            live[victim] = true;
        }
        check(&map, &keys, &live);
    }

    #[test]
    fn insert_at_the_bucket_find_returned() {
        let keys = [5u64, 6, 7];
        let mut map = KeyMap::with_entries(2);
        for (i, &k) in keys.iter().enumerate() {
            match map.find(k, |s| keys[s as usize]) {
                Err(b) => map.insert_at(b, i as u32),
                Ok(s) => panic!("{k} found at {s} before insertion"),
            }
        }
        // Three entries in a map sized for two: the one extra the policies rely on.
        assert_eq!(map.len(), 3);
        for (i, &k) in keys.iter().enumerate() {
            assert_eq!(map.find(k, |s| keys[s as usize]), Ok(i as u32));
        }
    }

    #[test]
    fn randomized_against_std_hashmap() {
        use std::collections::HashMap;
        let cap = 500;
        let mut map = KeyMap::with_entries(cap);
        let mut reference: HashMap<u64, u32> = HashMap::new();
        let mut slots: Vec<u64> = vec![0; cap];
        let mut free: Vec<u32> = (0..cap as u32).rev().collect();
        let mut x: u64 = 0x2545_F491_4F6C_DD1D;
        for _ in 0..50_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let key = x % 2000;
            let found = map.get(key, |s| slots[s as usize]);
            assert_eq!(found, reference.get(&key).copied());
            match found {
                Some(slot) => {
                    assert!(map.remove(key, slot));
                    reference.remove(&key);
                    free.push(slot);
                }
                None => {
                    if let Some(slot) = free.pop() {
                        slots[slot as usize] = key;
                        map.insert(key, slot);
                        reference.insert(key, slot);
                    }
                }
            }
            assert_eq!(map.len(), reference.len());
        }
    }

    #[test]
    fn reslot_moves_only_the_slot() {
        let mut keys: Vec<u64> = (0..60).map(|i| i * 0x9E37_79B9).collect();
        let mut map = KeyMap::with_entries(30);
        for (i, &k) in keys.iter().enumerate().take(30) {
            map.insert(k, i as u32);
        }
        // Key 7 moves from slot 7 to slot 45; a wrong old slot or an absent key changes nothing.
        assert!(!map.reslot(keys[7], 8, 45));
        assert!(!map.reslot(keys[50], 50, 45));
        assert!(map.reslot(keys[7], 7, 45));
        keys[45] = keys[7];
        keys[7] = u64::MAX;
        assert_eq!(map.get(keys[45], |s| keys[s as usize]), Some(45));
        assert_eq!(map.get(keys[8], |s| keys[s as usize]), Some(8));
        assert!(map.remove(keys[45], 45));
        assert_eq!(map.len(), 29);
    }

    #[test]
    fn memory_is_sixteen_bytes_per_entry() {
        // 100 001 entries, four per 64-byte group on average: 25 001 groups.
        assert_eq!(KeyMap::with_entries(100_000).memory_bytes(), 25_001 * 64);
        assert_eq!(std::mem::size_of::<Group>(), 64);
    }
}
