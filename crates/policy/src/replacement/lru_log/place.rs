//! A place of the LRU log: a key as stored, 4 bytes while every key fits in 32 bits and 8
//! bytes from the first key that does not (see [`super::LruLog`]'s module documentation). A
//! narrow key is its own index tag ([`narrow_tag`], a bijection never 0); a wide key is tagged
//! by its [`fingerprint`].

use crate::keymap::{fingerprint, narrow_key, narrow_tag};

/// A log place's width: the key as stored (see the module documentation).
pub(super) trait Place: Copy + std::fmt::Debug + Send + 'static {
    /// The empty place.
    const ZERO: Self;
    /// `key` as stored, if it fits.
    fn of(key: u64) -> Option<Self>;
    /// The stored key.
    fn key(self) -> u64;
    /// Places of a log of `capacity` blocks (0 or more than `capacity`).
    fn places(capacity: usize) -> usize;
    /// Whether [`Place::tag`] is injective, so a tag match in the index is the key itself.
    const EXACT: bool;
    /// The index tag of `key` (a key that fits, [`Place::of`]): never 0.
    fn tag(key: u64) -> u32;
}

impl Place for u32 {
    const ZERO: Self = 0;
    const EXACT: bool = true;
    /// Keys below `u32::MAX` (whose `+ 1` is a non-zero `u32`).
    #[inline(always)]
    fn of(key: u64) -> Option<Self> {
        narrow_key(key)
    }
    #[inline(always)]
    fn tag(key: u64) -> u32 {
        narrow_tag(key as u32)
    }
    #[inline(always)]
    fn key(self) -> u64 {
        u64::from(self)
    }
    fn places(capacity: usize) -> usize {
        capacity.saturating_mul(3).saturating_add(capacity.div_ceil(2)).max(capacity + 1)
    }
}

impl Place for u64 {
    const ZERO: Self = 0;
    const EXACT: bool = false;
    #[inline(always)]
    fn tag(key: u64) -> u32 {
        fingerprint(key)
    }
    #[inline(always)]
    fn of(key: u64) -> Option<Self> {
        Some(key)
    }
    #[inline(always)]
    fn key(self) -> u64 {
        self
    }
    fn places(capacity: usize) -> usize {
        if capacity == 0 {
            0
        } else {
            2 * capacity - capacity / 16
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The narrow tags are a bijection (a tag match is the key itself): distinct on a million
    /// consecutive keys and on a million spread ones, never 0.
    #[test]
    fn narrow_tags_are_distinct_and_never_zero() {
        for spread in [1u64, 4099] {
            let mut tags: Vec<u32> = (0..1_000_000u64)
                .map(|i| (i * spread) % u64::from(u32::MAX))
                .map(<u32 as Place>::tag)
                .collect();
            assert!(tags.iter().all(|&t| t != 0));
            tags.sort_unstable();
            tags.dedup();
            assert_eq!(tags.len(), 1_000_000, "spread {spread}");
        }
        assert_eq!(<u32 as Place>::of(u64::from(u32::MAX)), None);
        assert_eq!(<u32 as Place>::of(u64::from(u32::MAX) - 1), Some(u32::MAX - 1));
        assert_ne!(<u32 as Place>::tag(u64::from(u32::MAX) - 1), 0);
    }
}
