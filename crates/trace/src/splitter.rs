//! Splitting a request into the block accesses it makes ([`crate::Request::blocks`]),
//! appended to a [`BlockChunk`]: the inner step of [`crate::BlockReader`].

use crate::block_chunk::{BlockChunk, FLAG_FIRST, FLAG_WRITE};
use crate::{block_key, Request};

/// How a request becomes block accesses.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Splitter {
    /// Block size in bytes (at least 1).
    pub(crate) block_size: u64,
    /// log2 of the block size, when it is a power of two.
    pub(crate) shift: u32,
    /// True if the block size is a power of two (a shift instead of a division).
    pub(crate) pow2: bool,
    /// Each request is one access keyed by its first block.
    pub(crate) per_request: bool,
    /// Chunks carry each access's request time.
    pub(crate) keep_times: bool,
}

impl Splitter {
    /// A splitter into `block_size`-byte blocks (at least 1).
    pub(crate) fn new(block_size: u64, per_request: bool, keep_times: bool) -> Self {
        Self {
            block_size,
            shift: block_size.trailing_zeros(),
            pow2: block_size.is_power_of_two(),
            per_request,
            keep_times,
        }
    }

    #[inline(always)]
    fn block_of(&self, byte: u64) -> u64 {
        if self.pow2 {
            byte >> self.shift
        } else {
            byte / self.block_size
        }
    }

    /// Append the accesses of `r` (none for a zero-length request).
    #[inline(always)]
    pub(crate) fn push(&self, c: &mut BlockChunk, r: &Request) {
        if r.length == 0 {
            return;
        }
        let first = self.block_of(r.offset);
        let end = if self.per_request {
            first + 1
        } else {
            self.block_of(r.offset.saturating_add(r.length as u64 - 1)) + 1
        };
        let w = if r.op.is_write() { FLAG_WRITE } else { 0 };
        c.keys.push(block_key(r.volume, first));
        c.flags.push(w | FLAG_FIRST);
        for b in first + 1..end {
            c.keys.push(block_key(r.volume, b));
            c.flags.push(w);
        }
        if self.keep_times {
            c.times.extend(std::iter::repeat_n(r.time_ns, (end - first) as usize));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Op;

    /// Power-of-two and other block sizes, whole requests and first blocks only, with and
    /// without times: the accesses are those of [`Request::block_keys`].
    #[test]
    fn splits_like_request_block_keys() {
        let reqs = [
            Request { time_ns: 5, volume: 1, op: Op::Write, offset: 1000, length: 9000 },
            Request { time_ns: 6, volume: 0, op: Op::Read, offset: 0, length: 0 },
            Request { time_ns: 7, volume: 0, op: Op::Read, offset: u64::MAX - 10, length: 10 },
        ];
        for bs in [512, 4096, 3000] {
            for per_request in [false, true] {
                for keep_times in [false, true] {
                    let s = Splitter::new(bs, per_request, keep_times);
                    let mut c = BlockChunk::default();
                    for r in &reqs {
                        s.push(&mut c, r);
                    }
                    let mut want = BlockChunk::default();
                    for r in reqs.iter().filter(|r| r.length > 0) {
                        let keys: Vec<u64> = r.block_keys(bs).collect();
                        let n = if per_request { 1 } else { keys.len() };
                        let w = if r.op.is_write() { FLAG_WRITE } else { 0 };
                        for (i, &k) in keys[..n].iter().enumerate() {
                            want.keys.push(k);
                            want.flags.push(if i == 0 { w | FLAG_FIRST } else { w });
                            if keep_times {
                                want.times.push(r.time_ns);
                            }
                        }
                    }
                    assert_eq!(c, want, "block size {bs}, per request {per_request}");
                }
            }
        }
    }
}
