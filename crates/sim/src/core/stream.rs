//! The block-access stream: a trace split into block accesses once, then shared read-only by
//! every run of a grid.
//!
//! Virtual time (*vtime*) counts block accesses: the `i`-th block access of the stream (from 0)
//! happens at vtime `i`. A request of three blocks advances vtime by three.

use super::cutter::{Cutter, IntervalStart};
use crate::{Interval, SimError};
use ember_policy::{Access, NEVER};
use ember_trace::{block_key, Op, Request, Trace};
use rustc_hash::{FxHashMap, FxHashSet};
use std::ops::Range;

const WRITE: u8 = 1;
const FIRST: u8 = 2;

/// Every block access of a trace, in order: key, op and time per access, and, for oracle
/// policies, the vtime of the next access to the same block.
#[derive(Clone, Debug)]
pub struct AccessStream {
    keys: Vec<u64>,
    flags: Vec<u8>,
    times: Vec<u64>,
    next: Option<Vec<u64>>,
    requests: u64,
    wss: u64,
    block_size: u64,
    start_ns: u64,
}

/// A stretch of the stream that forms one timeline interval.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Span {
    /// The interval's number (see [`crate::IntervalStats::index`]).
    pub index: u64,
    /// Start in nanoseconds since the stream's first request.
    pub start_ns: u64,
    /// Number of requests before the span's first one.
    pub start_request: u64,
    /// The block accesses (vtimes) of the span.
    pub range: Range<usize>,
}

/// How requests become block accesses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Split {
    /// Every block a request touches is one access (ember's model of a block cache).
    #[default]
    Blocks,
    /// One access per request, keyed by the request's first block: how libCacheSim models a
    /// block trace (an object per request, named by its starting address). Used to compare
    /// with libCacheSim on block traces it reads natively (vscsi), with a block size of the
    /// trace's address unit (512 bytes for vscsi).
    FirstBlock,
}

impl AccessStream {
    /// Split `trace` into `block_size`-byte block accesses. With `oracle`, also compute each
    /// access's next-access vtime (needed by OPT and other oracle policies; costs one backward
    /// pass and 8 bytes per access).
    pub fn from_trace(trace: &Trace, block_size: u64, oracle: bool) -> Result<Self, SimError> {
        Self::from_trace_split(trace, block_size, oracle, Split::Blocks)
    }

    /// [`AccessStream::from_trace`] with a choice of how requests become accesses.
    pub fn from_trace_split(
        trace: &Trace,
        block_size: u64,
        oracle: bool,
        split: Split,
    ) -> Result<Self, SimError> {
        let mut b = AccessStreamBuilder::new(block_size, split)?;
        b.reserve(trace.requests.len());
        for r in &trace.requests {
            b.push(r);
        }
        Ok(b.finish(oracle))
    }

    /// Compute next-access vtimes (and the WSS) if not yet done.
    pub fn compute_next_access(&mut self) {
        if self.next.is_none() {
            let (next, wss) = next_access_times(&self.keys);
            self.next = Some(next);
            self.wss = wss;
        }
    }

    /// Number of block accesses.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// True if the stream has no block access.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Number of requests that touch at least one block.
    pub fn requests(&self) -> u64 {
        self.requests
    }

    /// Working-set size: the number of distinct blocks.
    pub fn wss(&self) -> u64 {
        self.wss
    }

    /// The block size the trace was split with.
    pub fn block_size(&self) -> u64 {
        self.block_size
    }

    /// Time of the first request, in the trace's nanoseconds.
    pub fn start_ns(&self) -> u64 {
        self.start_ns
    }

    /// Block keys, one per access.
    pub fn keys(&self) -> &[u64] {
        &self.keys
    }

    /// Request times, one per access; empty if the stream was built without times
    /// ([`AccessStreamBuilder::without_times`]).
    pub fn times(&self) -> &[u64] {
        &self.times
    }

    /// Time of access `i` in nanoseconds (0 if the stream keeps no times).
    #[inline]
    pub fn time(&self, i: usize) -> u64 {
        self.times.get(i).copied().unwrap_or(0)
    }

    /// Next-access vtimes, one per access ([`NEVER`] for a last access), if computed.
    pub fn next_access(&self) -> Option<&[u64]> {
        self.next.as_deref()
    }

    /// True if access `i` is a write.
    #[inline]
    pub fn is_write(&self, i: usize) -> bool {
        self.flags[i] & WRITE != 0
    }

    /// True if access `i` is the first block of its request.
    #[inline]
    pub fn starts_request(&self, i: usize) -> bool {
        self.flags[i] & FIRST != 0
    }

    /// Raw per-access flags (bit 0: write, bit 1: first block of a request), for hot loops.
    #[inline]
    pub(crate) fn flags(&self) -> &[u8] {
        &self.flags
    }

    /// Access `i` as a policy sees it.
    #[inline]
    pub fn access(&self, i: usize) -> Access {
        Access {
            key: self.keys[i],
            time_ns: self.time(i),
            op: op_of(self.flags[i]),
            vtime: i as u64,
            next_vtime: self.next.as_ref().map_or(NEVER, |n| n[i]),
        }
    }

    /// Cut the stream into timeline intervals; with `None`, one span covering everything.
    /// On a stream built without times, a time interval yields one span.
    /// Intervals are cut only between requests; a request whose time goes back before the
    /// current interval's start stays in the current interval. Intervals holding no access
    /// are left out.
    pub fn spans(&self, interval: Option<Interval>) -> Vec<Span> {
        let n = self.keys.len();
        if interval.is_none() {
            return vec![Span { index: 0, start_ns: 0, start_request: 0, range: 0..n }];
        }
        let mut spans: Vec<Span> = Vec::new();
        for p in Cutter::new(interval).cut_slices(&self.flags, &self.times) {
            match (p.opens, spans.last_mut()) {
                (None, Some(last)) => last.range.end = p.range.end,
                (opens, _) => {
                    let o = opens.unwrap_or(IntervalStart {
                        index: 0,
                        start_ns: 0,
                        start_request: 0,
                        warmup: false,
                    });
                    spans.push(Span {
                        index: o.index,
                        start_ns: o.start_ns,
                        start_request: o.start_request,
                        range: p.range,
                    });
                }
            }
        }
        spans
    }
}

#[inline(always)]
pub(crate) fn op_of(flags: u8) -> Op {
    if flags & WRITE != 0 {
        Op::Write
    } else {
        Op::Read
    }
}

/// For each position `i` of `keys`, the position of the next occurrence of `keys[i]`, or
/// [`NEVER`]; also the number of distinct keys. One backward pass with a hash map: O(n).
pub fn next_access_times(keys: &[u64]) -> (Vec<u64>, u64) {
    let mut next = vec![NEVER; keys.len()];
    let mut last: FxHashMap<u64, u64> = FxHashMap::default();
    last.reserve(keys.len() / 4);
    for (i, &k) in keys.iter().enumerate().rev() {
        if let Some(j) = last.insert(k, i as u64) {
            next[i] = j;
        }
    }
    (next, last.len() as u64)
}

/// Builds an [`AccessStream`] one request at a time, so a trace streams from its reader into
/// the stream without ever being held as requests.
#[derive(Debug)]
pub struct AccessStreamBuilder {
    keys: Vec<u64>,
    flags: Vec<u8>,
    times: Vec<u64>,
    requests: u64,
    block_size: u64,
    shift: u32,
    pow2: bool,
    split: Split,
    keep_times: bool,
}

impl AccessStreamBuilder {
    /// An empty builder for `block_size`-byte blocks.
    pub fn new(block_size: u64, split: Split) -> Result<Self, SimError> {
        if block_size == 0 {
            return Err(SimError::Invalid("block size must be positive".into()));
        }
        Ok(Self {
            keys: Vec::new(),
            flags: Vec::new(),
            times: Vec::new(),
            requests: 0,
            block_size,
            shift: block_size.trailing_zeros(),
            pow2: block_size.is_power_of_two(),
            split,
            keep_times: true,
        })
    }

    /// Keep no per-access times (saves 8 bytes per access) when nothing will read them: no
    /// time-based timeline, and an admission policy that ignores time. Accesses then carry
    /// time 0.
    pub fn without_times(mut self) -> Self {
        self.keep_times = false;
        self
    }

    /// Make room for about `accesses` more block accesses.
    pub fn reserve(&mut self, accesses: usize) {
        self.keys.reserve(accesses);
        self.flags.reserve(accesses);
        if self.keep_times {
            self.times.reserve(accesses);
        }
    }

    #[inline]
    fn block_of(&self, byte: u64) -> u64 {
        if self.pow2 {
            byte >> self.shift
        } else {
            byte / self.block_size
        }
    }

    /// Append the block accesses of one request (none for a zero-length request).
    #[inline]
    pub fn push(&mut self, r: &Request) {
        if r.length == 0 {
            return;
        }
        let first = self.block_of(r.offset);
        let end = match self.split {
            Split::FirstBlock => first + 1,
            Split::Blocks => self.block_of(r.offset.saturating_add(r.length as u64 - 1)) + 1,
        };
        let w = if r.op.is_write() { WRITE } else { 0 };
        self.requests += 1;
        self.keys.push(block_key(r.volume, first));
        self.flags.push(w | FIRST);
        for b in first + 1..end {
            self.keys.push(block_key(r.volume, b));
            self.flags.push(w);
        }
        if self.keep_times {
            let n = (end - first) as usize;
            self.times.extend(std::iter::repeat_n(r.time_ns, n));
        }
    }

    /// Append the block accesses of a chunk read by an [`ember_trace::BlockReader`] (whose
    /// splitting already happened; the builder's own [`Split`] does not apply). The chunk
    /// must carry times if this builder keeps them.
    pub fn push_chunk(&mut self, c: &ember_trace::BlockChunk) {
        self.requests += c.requests();
        self.keys.extend_from_slice(&c.keys);
        self.flags.extend_from_slice(&c.flags);
        if self.keep_times {
            self.times.extend_from_slice(&c.times);
        }
    }

    /// Append one single-block request for `key` (a record of an object-keyed format such as
    /// oracleGeneral, whose object is one block).
    #[inline]
    pub fn push_block(&mut self, key: u64, time_ns: u64, write: bool) {
        self.requests += 1;
        self.keys.push(key);
        self.flags.push(if write { WRITE | FIRST } else { FIRST });
        if self.keep_times {
            self.times.push(time_ns);
        }
    }

    /// The finished stream; with `oracle`, next-access vtimes are computed too.
    pub fn finish(self, oracle: bool) -> AccessStream {
        let start_ns = self.times.first().copied().unwrap_or(0);
        debug_assert!(!self.keep_times || self.times.len() == self.keys.len());
        let mut s = AccessStream {
            keys: self.keys,
            flags: self.flags,
            times: self.times,
            next: None,
            requests: self.requests,
            wss: 0,
            block_size: self.block_size,
            start_ns,
        };
        if oracle {
            s.compute_next_access();
        } else {
            s.wss = distinct_keys(&s.keys);
        }
        s
    }
}

/// Number of distinct keys.
///
/// Block traces address dense ranges, so when the keys of each volume span at most a few
/// times as many blocks as there are accesses, one bit per block of each volume's range counts
/// them in a single cache-friendly pass (about 10x faster than hashing 10M keys); sparse keys
/// (hashed object ids) fall back to a hash set.
pub fn distinct_keys(keys: &[u64]) -> u64 {
    // Per volume: (min block, max block), volumes indexed by the key's high bits.
    let mut ranges: FxHashMap<u32, (u64, u64)> = FxHashMap::default();
    let mut last_vol = u32::MAX;
    let mut cur = (u64::MAX, 0u64);
    for &k in keys {
        let v = ember_trace::key_volume(k);
        let b = ember_trace::key_block(k);
        if v != last_vol {
            if last_vol != u32::MAX {
                let e = ranges.entry(last_vol).or_insert((u64::MAX, 0));
                *e = (e.0.min(cur.0), e.1.max(cur.1));
            }
            last_vol = v;
            cur = ranges.get(&v).copied().unwrap_or((u64::MAX, 0));
        }
        cur = (cur.0.min(b), cur.1.max(b));
    }
    if last_vol != u32::MAX {
        let e = ranges.entry(last_vol).or_insert((u64::MAX, 0));
        *e = (e.0.min(cur.0), e.1.max(cur.1));
    }
    let span: u64 = ranges.values().map(|&(lo, hi)| hi - lo + 1).sum();
    if span / 8 <= (keys.len() as u64).saturating_mul(2).max(1 << 20) {
        // Bitmaps: one per volume, laid end to end.
        let mut base: FxHashMap<u32, u64> = FxHashMap::default();
        let mut at = 0u64;
        for (&v, &(lo, hi)) in &ranges {
            base.insert(v, at.wrapping_sub(lo));
            at += hi - lo + 1;
        }
        let mut bits = vec![0u64; at.div_ceil(64) as usize];
        let mut count = 0u64;
        let mut last_vol = u32::MAX;
        let mut off = 0u64;
        for &k in keys {
            let v = ember_trace::key_volume(k);
            if v != last_vol {
                last_vol = v;
                off = base[&v];
            }
            let i = ember_trace::key_block(k).wrapping_add(off);
            let (w, m) = ((i >> 6) as usize, 1u64 << (i & 63));
            count += u64::from(bits[w] & m == 0);
            bits[w] |= m;
        }
        return count;
    }
    let mut seen = FxHashSet::default();
    seen.reserve(keys.len() / 4);
    for &k in keys {
        seen.insert(k);
    }
    seen.len() as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use ember_trace::VolumeTable;

    fn req(t: u64, vol: u32, op: Op, offset: u64, length: u32) -> Request {
        Request { time_ns: t, volume: vol, op, offset, length }
    }

    #[test]
    fn next_access_on_hand_sequences() {
        // a b a c b a
        let (next, wss) = next_access_times(&[1, 2, 1, 3, 2, 1]);
        assert_eq!(next, vec![2, 4, 5, NEVER, NEVER, NEVER]);
        assert_eq!(wss, 3);
        let (next, wss) = next_access_times(&[7, 7, 7]);
        assert_eq!(next, vec![1, 2, NEVER]);
        assert_eq!(wss, 1);
        assert_eq!(next_access_times(&[]), (vec![], 0));
    }

    #[test]
    fn distinct_keys_dense_and_sparse_agree_with_a_set() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        // Dense: three volumes, blocks in small ranges at odd offsets.
        let dense: Vec<u64> = (0..50_000)
            .map(|_| block_key((next() % 3) as u32, 1_000_000 + next() % 7_000))
            .collect();
        // Sparse: hashed object ids across the whole key space.
        let sparse: Vec<u64> = (0..50_000).map(|_| next() % 20_000 * 0x1_0000_0001).collect();
        for keys in [dense, sparse, vec![], vec![5, 5, 5]] {
            let set: FxHashSet<u64> = keys.iter().copied().collect();
            assert_eq!(distinct_keys(&keys), set.len() as u64);
        }
    }

    #[test]
    fn without_times_keeps_everything_else() {
        let reqs = vec![req(100, 0, Op::Read, 0, 8192), req(200, 0, Op::Write, 4096, 10)];
        let mut with = AccessStreamBuilder::new(4096, Split::Blocks).unwrap();
        let mut without = AccessStreamBuilder::new(4096, Split::Blocks).unwrap().without_times();
        for r in &reqs {
            with.push(r);
            without.push(r);
        }
        let (a, b) = (with.finish(false), without.finish(false));
        assert_eq!(a.times(), &[100, 100, 200]);
        assert!(b.times().is_empty());
        assert_eq!(a.keys(), b.keys());
        assert_eq!((a.requests(), a.wss()), (b.requests(), b.wss()));
        assert_eq!(b.access(2).time_ns, 0);
        assert!(b.access(2).op.is_write());
        assert_eq!(b.spans(Some(Interval::Time(50))).len(), 1);
    }

    #[test]
    fn first_block_split_keys_each_request_once() {
        let reqs = vec![
            req(100, 0, Op::Read, 1024, 8192), // sectors 2.., one access keyed by sector 2
            req(200, 0, Op::Write, 512, 512),  // sector 1
            req(300, 0, Op::Read, 4096, 0),    // no block
        ];
        let t = Trace::new(reqs, VolumeTable::new());
        let s = AccessStream::from_trace_split(&t, 512, false, Split::FirstBlock).unwrap();
        assert_eq!(s.keys(), &[block_key(0, 2), block_key(0, 1)]);
        assert_eq!(s.requests(), 2);
        assert!(s.is_write(1));
        assert_eq!(s.wss(), 2);
    }

    #[test]
    fn splits_requests_into_block_accesses() {
        let reqs = vec![
            req(100, 0, Op::Read, 0, 8192),    // blocks 0,1
            req(200, 1, Op::Write, 4096, 100), // vol 1 block 1
            req(300, 0, Op::Read, 4096, 0),    // no block
            req(400, 0, Op::Write, 4000, 200), // blocks 0,1
        ];
        let t = Trace::new(reqs, VolumeTable::new());
        let s = AccessStream::from_trace(&t, 4096, true).unwrap();
        let k = |v, b| block_key(v, b);
        assert_eq!(s.keys(), &[k(0, 0), k(0, 1), k(1, 1), k(0, 0), k(0, 1)]);
        assert_eq!(s.times(), &[100, 100, 200, 400, 400]);
        assert_eq!(s.len(), 5);
        assert_eq!(s.requests(), 3);
        assert_eq!(s.wss(), 3);
        assert_eq!(s.next_access().unwrap(), &[3, 4, NEVER, NEVER, NEVER]);
        assert!(!s.is_write(0) && s.is_write(2) && s.is_write(4));
        assert!(s.starts_request(0) && !s.starts_request(1) && s.starts_request(3));
        let a = s.access(3);
        assert_eq!(
            (a.key, a.op, a.vtime, a.next_vtime, a.time_ns),
            (k(0, 0), Op::Write, 3, NEVER, 400)
        );
        let plain = AccessStream::from_trace(&t, 4096, false).unwrap();
        assert_eq!(plain.wss(), 3);
        assert!(plain.next_access().is_none());
        assert_eq!(plain.access(0).next_vtime, NEVER);
        assert!(AccessStream::from_trace(&t, 0, false).is_err());
    }

    #[test]
    fn non_power_of_two_block_sizes_split_like_request_blocks() {
        let reqs = vec![
            req(0, 0, Op::Read, 999, 2),
            req(1, 0, Op::Read, 2500, 3000),
            req(2, 0, Op::Read, 7, 1),
        ];
        let s =
            AccessStream::from_trace(&Trace::new(reqs.clone(), VolumeTable::new()), 1000, false)
                .unwrap();
        let want: Vec<u64> =
            reqs.iter().flat_map(|r| r.block_keys(1000).collect::<Vec<_>>()).collect();
        assert_eq!(s.keys(), want.as_slice());
        assert_eq!(s.keys(), &[0, 1, 2, 3, 4, 5, 0]);
        assert_eq!(s.wss(), 6);
    }

    #[test]
    fn spans_by_time_and_by_requests() {
        // Requests at 0s, 1s, 5s, 6s (one block each), then a 2-block request at 6.5s.
        let s = 1_000_000_000u64;
        let reqs = vec![
            req(10 * s, 0, Op::Read, 0, 1),
            req(11 * s, 0, Op::Read, 4096, 1),
            req(15 * s, 0, Op::Read, 8192, 1),
            req(16 * s, 0, Op::Read, 0, 1),
            req(16 * s + s / 2, 0, Op::Read, 0, 8192),
        ];
        let st =
            AccessStream::from_trace(&Trace::new(reqs, VolumeTable::new()), 4096, false).unwrap();
        let spans = st.spans(Some(Interval::Time(2 * s)));
        // [0,2s): 2 accesses; [2,4s): none (left out); [4,6s): 1; [6,8s): 3.
        assert_eq!(
            spans,
            vec![
                Span { index: 0, start_ns: 0, start_request: 0, range: 0..2 },
                Span { index: 2, start_ns: 4 * s, start_request: 2, range: 2..3 },
                Span { index: 3, start_ns: 6 * s, start_request: 3, range: 3..6 },
            ]
        );
        let spans = st.spans(Some(Interval::Requests(2)));
        assert_eq!(
            spans,
            vec![
                Span { index: 0, start_ns: 0, start_request: 0, range: 0..2 },
                Span { index: 1, start_ns: 5 * s, start_request: 2, range: 2..4 },
                Span { index: 2, start_ns: 6 * s + s / 2, start_request: 4, range: 4..6 },
            ]
        );
        assert_eq!(
            st.spans(None),
            vec![Span { index: 0, start_ns: 0, start_request: 0, range: 0..6 }]
        );
    }
}
