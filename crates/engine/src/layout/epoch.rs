//! Epochs as the layout stores them. In memory an epoch is a `u64` that every barrier
//! advances; on the device only its low 16 bits are kept (checkpoint entry flags, bits
//! 16..32; journal insert entries, bits 48..64 of the second word), so stored epochs wrap
//! after 65,536 barriers.
//!
//! Recovery orders them with serial-number arithmetic (RFC 1982): of two stored epochs, the
//! newer is the one the other reaches by adding less than half of the 16-bit space. That is
//! a total order as long as every persisted dirty epoch lies within [`WINDOW`] of the newest;
//! the write-back-persist barrier keeps it so (it asks the flusher for epochs older than half
//! the window and stops advancing the epoch while one is a whole window old).
//!
//! Plain arithmetic on epochs: this file imports nothing. The entry flags that carry a stored
//! epoch are encoded and decoded beside the entries, in `checkpoint.rs`.

/// Bits of an epoch kept on the device.
pub const STORED_BITS: u32 = 16;
/// The span of stored epochs (2^16).
const SPAN: i64 = 1 << STORED_BITS;
/// Largest distance between the oldest persisted dirty epoch and the current one. Less than
/// half of [`SPAN`], which serial-number ordering needs.
pub const WINDOW: u64 = 1 << 14;

/// The stored form of `epoch` (its low 16 bits).
pub fn stored(epoch: u64) -> u16 {
    (epoch & 0xFFFF) as u16
}

/// Maps stored 16-bit epochs back to ordered `u64` epochs. Each result keeps its stored low
/// 16 bits; without a wrap, the results equal the stored values.
#[derive(Clone, Copy, Debug)]
pub struct Unwrap {
    /// A reference epoch (the first one seen) and its unwrapped value.
    reference: Option<(u16, i64)>,
}

impl Unwrap {
    /// The unwrapping of a set of stored epochs (all assumed within [`WINDOW`] of each other).
    pub fn new(stored: impl IntoIterator<Item = u16>) -> Self {
        let mut it = stored.into_iter();
        let Some(first) = it.next() else { return Self { reference: None } };
        let min = it.map(|e| Self::offset(first, e)).min().unwrap_or(0).min(0);
        let base = i64::from(first);
        // Lift everything by one span if the oldest would fall below zero.
        let base = if base + min < 0 { base + SPAN } else { base };
        Self { reference: Some((first, base)) }
    }

    /// Signed distance from `from` to `to` in serial-number arithmetic.
    fn offset(from: u16, to: u16) -> i64 {
        i64::from(to.wrapping_sub(from) as i16)
    }

    /// The ordered epoch of stored epoch `e`.
    pub fn epoch(&self, e: u16) -> u64 {
        match self.reference {
            Some((first, base)) => (base + Self::offset(first, e)).max(0) as u64,
            None => u64::from(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_a_wrap_epochs_are_the_stored_values() {
        let u = Unwrap::new([5u16, 1, 9]);
        assert_eq!([u.epoch(1), u.epoch(5), u.epoch(9)], [1, 5, 9]);
    }

    #[test]
    fn across_the_wrap_the_older_epoch_stays_smaller() {
        for set in [[65_531u16, 6], [6, 65_531]] {
            let u = Unwrap::new(set);
            assert_eq!(u.epoch(65_531), 65_531);
            assert_eq!(u.epoch(6), 65_542);
            assert_eq!(stored(u.epoch(6)), 6);
        }
        let u = Unwrap::new([65_535u16, 0, 65_000, 3_000]);
        let mut e: Vec<u64> = [3_000u16, 65_000, 0, 65_535].iter().map(|&x| u.epoch(x)).collect();
        e.sort_unstable();
        assert_eq!(e, vec![65_000, 65_535, 65_536, 68_536]);
    }

    #[test]
    fn the_window_is_less_than_half_the_stored_span() {
        const { assert!(2 * WINDOW < 1 << STORED_BITS) };
    }
}
