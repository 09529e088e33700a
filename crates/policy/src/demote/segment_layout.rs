//! How an array LRU queue is cut into insertion segments (Wong and Wilkes, *My cache or
//! yours?*, USENIX ATC 2002, section 5.1): "dividing the real array LRU queue into a fixed
//! number of segments N_segs (10 in our experiments)", either uniform or exponential ("each
//! segment was twice the size of the preceding one, the smallest being at the head of the
//! array LRU queue").
//!
//! Segment 0 lies at the head (the discard end), segment `N_segs - 1` at the tail (the keep
//! end). [`SegmentLayout::caps`] gives the size of each segment for a queue of a given
//! capacity; segment 0 takes whatever rounding leaves over.

use std::fmt;

/// The default number of segments, N_segs = 10 (section 5.1).
pub const DEFAULT_SEGMENTS: usize = 10;

/// The largest number of segments (segment indices are stored in a byte).
pub const MAX_SEGMENTS: usize = 255;

/// Segment sizes of an array queue.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum SegmentLayout {
    /// `n` segments of equal size (DEMOTE-ADAPT-UNI).
    Uniform(usize),
    /// `n` segments, each twice the size of the one nearer the discard end
    /// (DEMOTE-ADAPT-EXP).
    Exponential(usize),
    /// Two segments, SLRU's probationary (segment 0) and protected (segment 1), the protected
    /// one holding this fraction of the queue (section 5.1's "segmented LRU (SLRU) array
    /// cache").
    Slru {
        /// Fraction of the capacity given to the protected segment, in [0, 1].
        protected: f64,
    },
}

impl SegmentLayout {
    /// The number of segments.
    pub fn segments(&self) -> usize {
        match *self {
            SegmentLayout::Uniform(n) | SegmentLayout::Exponential(n) => n,
            SegmentLayout::Slru { .. } => 2,
        }
    }

    /// Check the layout: 1 to [`MAX_SEGMENTS`] segments, SLRU's fraction in [0, 1].
    pub fn validate(&self) -> Result<(), String> {
        let n = self.segments();
        if n == 0 || n > MAX_SEGMENTS {
            return Err(format!("the number of segments must be in 1..={MAX_SEGMENTS}, got {n}"));
        }
        if let SegmentLayout::Slru { protected } = *self {
            if !(0.0..=1.0).contains(&protected) {
                return Err(format!("the protected fraction must be in [0, 1], got {protected}"));
            }
        }
        Ok(())
    }

    /// Size of each segment, from the discard end (index 0) to the keep end, for a queue of
    /// `capacity` blocks. The sizes sum to `capacity`; segment 0 absorbs the rounding.
    pub fn caps(&self, capacity: usize) -> Vec<usize> {
        let n = self.segments().max(1);
        let weights: Vec<f64> = match *self {
            SegmentLayout::Uniform(_) => vec![1.0; n],
            SegmentLayout::Exponential(_) => (0..n).map(|k| 2f64.powi(k as i32)).collect(),
            SegmentLayout::Slru { protected } => vec![1.0 - protected, protected],
        };
        let total: f64 = weights.iter().sum();
        let mut caps = vec![0usize; n];
        let mut given = 0usize;
        for k in (1..n).rev() {
            let c = ((capacity as f64 * weights[k] / total).round() as usize).min(capacity - given);
            caps[k] = c;
            given += c;
        }
        caps[0] = capacity - given;
        caps
    }
}

impl fmt::Display for SegmentLayout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SegmentLayout::Uniform(n) => write!(f, "uniform({n})"),
            SegmentLayout::Exponential(n) => write!(f, "exponential({n})"),
            SegmentLayout::Slru { protected } => write!(f, "slru(protected {protected})"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uniform_caps_sum_to_capacity() {
        let caps = SegmentLayout::Uniform(10).caps(16384);
        assert_eq!(caps.iter().sum::<usize>(), 16384);
        assert!(caps[1..].iter().all(|&c| c == 1638), "{caps:?}");
        assert_eq!(caps[0], 16384 - 9 * 1638);
    }

    #[test]
    fn exponential_caps_double_towards_the_keep_end() {
        // Section 5.1: each segment twice the preceding one, the smallest at the head.
        let caps = SegmentLayout::Exponential(10).caps(1023 * 16);
        assert_eq!(caps, (0..10).map(|k| 16usize << k).collect::<Vec<_>>());
        let small = SegmentLayout::Exponential(10).caps(5);
        assert_eq!(small.iter().sum::<usize>(), 5);
        assert_eq!(small[9], 3); // 5 * 512 / 1023 rounds to 3
    }

    #[test]
    fn slru_split_and_validation() {
        assert_eq!(SegmentLayout::Slru { protected: 0.25 }.caps(100), vec![75, 25]);
        assert!(SegmentLayout::Slru { protected: 1.5 }.validate().is_err());
        assert!(SegmentLayout::Uniform(0).validate().is_err());
        assert!(SegmentLayout::Exponential(256).validate().is_err());
        assert!(SegmentLayout::Exponential(10).validate().is_ok());
    }
}
