//! Which bytes of a READ the content chunks of a structured reply have described
//! (`doc/proto.md`, "NBD_CMD_READ", structured replies: content chunks MUST NOT overlap and,
//! when no error is reported, MUST cover the whole request).

/// The bytes of one read request described so far. A reply in one chunk (ember's and
/// nbdkit's usual answer) costs nothing; a fragmented reply keeps a bitmap of one bit per
/// byte (4 MiB for a 32 MiB read), so a hostile server cannot make the check slow or large.
#[derive(Debug, Default)]
pub(crate) struct Coverage {
    /// Request length in bytes.
    len: u64,
    /// Bytes described so far.
    covered: u64,
    /// One bit per byte, allocated on the first chunk that does not cover the whole request.
    bits: Option<Vec<u64>>,
}

/// A chunk describes bytes an earlier chunk already described.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Overlap;

impl Coverage {
    /// Nothing described yet of a `len`-byte request.
    pub(crate) fn new(len: u64) -> Coverage {
        Coverage { len, covered: 0, bits: None }
    }

    /// Bytes described so far.
    pub(crate) fn covered(&self) -> u64 {
        self.covered
    }

    /// Whether every byte has been described.
    pub(crate) fn complete(&self) -> bool {
        self.covered == self.len
    }

    /// Record that `n` bytes at `at` (relative to the request, already checked to lie
    /// inside it) are described; an error if any of them already were.
    pub(crate) fn claim(&mut self, at: u64, n: u64) -> Result<(), Overlap> {
        debug_assert!(at.checked_add(n).is_some_and(|end| end <= self.len));
        if n == 0 {
            return Ok(());
        }
        if self.bits.is_none() {
            if self.covered == 0 && at == 0 && n == self.len {
                self.covered = n;
                return Ok(());
            }
            if self.covered != 0 {
                // The whole request was already described by one chunk.
                return Err(Overlap);
            }
            self.bits = Some(vec![0u64; self.len.div_ceil(64) as usize]);
        }
        let bits = self.bits.as_mut().ok_or(Overlap)?;
        if any_set(bits, at, at + n) {
            return Err(Overlap);
        }
        set(bits, at, at + n);
        self.covered += n;
        Ok(())
    }
}

/// The mask of bits `lo..hi` (0 ≤ lo < hi ≤ 64) of one word.
fn mask(lo: u64, hi: u64) -> u64 {
    let upper = if hi == 64 { u64::MAX } else { (1u64 << hi) - 1 };
    upper & !((1u64 << lo) - 1)
}

/// Visit the words overlapping bits `start..end` with the mask of the bits inside.
fn words(start: u64, end: u64, mut visit: impl FnMut(usize, u64) -> bool) -> bool {
    let mut pos = start;
    while pos < end {
        let word = pos / 64;
        let lo = pos % 64;
        let hi = (end - word * 64).min(64);
        if visit(word as usize, mask(lo, hi)) {
            return true;
        }
        pos = (word + 1) * 64;
    }
    false
}

fn any_set(bits: &[u64], start: u64, end: u64) -> bool {
    words(start, end, |w, m| bits[w] & m != 0)
}

fn set(bits: &mut [u64], start: u64, end: u64) {
    words(start, end, |w, m| {
        bits[w] |= m;
        false
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_whole_chunk_needs_no_bitmap() {
        let mut c = Coverage::new(4096);
        c.claim(0, 4096).unwrap();
        assert!(c.complete());
        assert!(c.bits.is_none());
        assert_eq!(c.claim(100, 1), Err(Overlap));
    }

    #[test]
    fn fragments_in_any_order_complete_without_overlap() {
        let mut c = Coverage::new(200);
        c.claim(130, 70).unwrap();
        c.claim(0, 63).unwrap();
        assert!(!c.complete());
        c.claim(63, 2).unwrap();
        c.claim(65, 65).unwrap();
        assert_eq!(c.covered(), 200);
        assert!(c.complete());
    }

    #[test]
    fn overlaps_are_found_at_every_word_position() {
        for (first, second) in [
            ((0, 64), (63, 1)),
            ((10, 100), (0, 11)),
            ((10, 100), (109, 5)),
            ((64, 64), (0, 65)),
            ((5, 1), (0, 200)),
        ] {
            let mut c = Coverage::new(200);
            c.claim(first.0, first.1).unwrap();
            assert_eq!(c.claim(second.0, second.1), Err(Overlap), "{first:?} then {second:?}");
            // Adjacent ranges do not overlap.
            let mut c = Coverage::new(200);
            c.claim(first.0, first.1).unwrap();
            let after = first.0 + first.1;
            c.claim(after, 200 - after).unwrap();
            if first.0 > 0 {
                c.claim(0, first.0).unwrap();
            }
            assert!(c.complete());
        }
    }
}
