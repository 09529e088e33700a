//! What identifies the medium behind a device, so a warm start can tell whether a backing
//! volume was replaced or modified while ember was stopped.
//!
//! Both digests are stored in the superblock (`VolumeRecord::backing_medium`,
//! `backing_state`), so they are computed with a fixed function ([`digest`], FNV-1a over
//! little-endian words), never with a hasher that may change between builds.

/// The identity of a device's medium.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Identity {
    /// Identifiable: `medium` names which medium it is (a file's device and inode, a block
    /// device's number, a memory device's instance) and stays the same whatever is written to
    /// it; `state` also changes whenever the medium is modified (size, modification and change
    /// times; a memory device's write count). Neither is ever 0.
    Known {
        /// Which medium.
        medium: u64,
        /// Which medium, in which state.
        state: u64,
    },
    /// Cannot be known (for example an NBD export: another client may write it while ember is
    /// stopped, and nothing tells). The text says why, and what would let ember trust it.
    Unknown(&'static str),
}

impl Identity {
    /// The medium digest, or 0 if unknown.
    pub fn medium_digest(&self) -> u64 {
        match self {
            Identity::Known { medium, .. } => *medium,
            Identity::Unknown(_) => 0,
        }
    }

    /// The state digest, or 0 if unknown.
    pub fn state_digest(&self) -> u64 {
        match self {
            Identity::Known { state, .. } => *state,
            Identity::Unknown(_) => 0,
        }
    }
}

/// FNV-1a (64-bit) over the little-endian bytes of `words`; never 0 (0 means "none").
pub fn digest(words: &[u64]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for w in words {
        for b in w.to_le_bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    h.max(1)
}

/// Digest of a byte string (an NBD URI, say), for [`digest`]'s words.
pub fn digest_bytes(bytes: &[u8]) -> u64 {
    let words: Vec<u64> = bytes.iter().map(|&b| u64::from(b)).collect();
    digest(&words)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pinned: the digest is stored on the device, so it must not change between versions.
    #[test]
    fn digest_is_pinned() {
        assert_eq!(digest(&[]), 0xcbf2_9ce4_8422_2325);
        assert_eq!(digest(&[1, 2, 3]), digest(&[1, 2, 3]));
        assert_ne!(digest(&[1, 2, 3]), digest(&[1, 2, 4]));
        assert_eq!(digest(&[0x0102_0304_0506_0708]), 0x0c6d_4496_e178_59d5);
    }
}
