//! A trace as block accesses: the one input every analysis reads.

use ember_trace::{Op, Request, Trace};

/// Every block access of a trace (or of one volume of it), in trace order: block key
/// ([`ember_trace::block_key`]), time and op per access.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Accesses {
    /// Block key of each access.
    pub keys: Vec<u64>,
    /// Time of each access in nanoseconds (the time of its request).
    pub times: Vec<u64>,
    /// Whether each access is a write.
    pub writes: Vec<bool>,
    /// Requests that touched at least one block.
    pub requests: u64,
    /// Bytes the requests asked for (the *Size* column of Bonfire Table 1).
    pub total_bytes: u64,
    /// Block size in bytes.
    pub block_size: u64,
}

impl Accesses {
    /// An empty access list for `block_size`-byte blocks (at least 1).
    pub fn new(block_size: u64) -> Self {
        Self { block_size: block_size.max(1), ..Self::default() }
    }

    /// Split every request of `trace` into `block_size`-byte block accesses.
    pub fn from_trace(trace: &Trace, block_size: u64) -> Self {
        Self::from_requests(trace.requests.iter(), block_size)
    }

    /// Split the requests of one `volume` of `trace`.
    pub fn from_volume(trace: &Trace, volume: u32, block_size: u64) -> Self {
        Self::from_requests(trace.requests.iter().filter(|r| r.volume == volume), block_size)
    }

    /// Split `requests` into block accesses.
    pub fn from_requests<'a>(requests: impl Iterator<Item = &'a Request>, block_size: u64) -> Self {
        let mut a = Self::new(block_size);
        for r in requests {
            a.push(r);
        }
        a
    }

    /// Append the block accesses of one request (none if its length is 0).
    pub fn push(&mut self, r: &Request) {
        let before = self.keys.len();
        for k in r.block_keys(self.block_size) {
            self.keys.push(k);
            self.times.push(r.time_ns);
            self.writes.push(r.op == Op::Write);
        }
        if self.keys.len() > before {
            self.requests += 1;
            self.total_bytes += r.length as u64;
        }
    }

    /// Number of block accesses.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// True if there is no block access.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Time of the first access (0 if empty).
    pub fn start_ns(&self) -> u64 {
        self.times.first().copied().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_split_into_blocks() {
        let r = |t, off, len, op| Request { time_ns: t, volume: 0, op, offset: off, length: len };
        let a = Accesses::from_requests(
            [r(5, 0, 8192, Op::Read), r(6, 4096, 0, Op::Read), r(7, 100, 10, Op::Write)].iter(),
            4096,
        );
        assert_eq!(a.keys, vec![0, 1, 0]);
        assert_eq!(a.times, vec![5, 5, 7]);
        assert_eq!(a.writes, vec![false, false, true]);
        assert_eq!((a.requests, a.total_bytes), (2, 8202));
    }
}
