//! Timeline intervals cut from a trace that streams past in chunks: each chunk is cut into
//! [`Piece`]s that lie in one interval, exactly as [`crate::AccessStream::spans`] cuts a
//! stream held whole, across chunk boundaries, so a streamed run's timeline equals
//! [`crate::simulate`]'s.

use crate::Interval;
use ember_trace::{BlockChunk, FLAG_FIRST};
use std::ops::Range;

/// Where a timeline interval starts (see [`IntervalStats`](crate::IntervalStats)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IntervalStart {
    /// The interval's number.
    pub index: u64,
    /// Start in nanoseconds since the first request.
    pub start_ns: u64,
    /// Requests before the interval's first one.
    pub start_request: u64,
}

/// A stretch of a chunk that lies in one timeline interval.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Piece {
    /// The accesses, as positions in the chunk.
    pub range: Range<usize>,
    /// The vtime of the first of them.
    pub vtime: u64,
    /// Set if a new interval starts with this piece.
    pub opens: Option<IntervalStart>,
}

/// Cuts a stream of chunks into timeline pieces, keeping its place across chunks.
#[derive(Clone, Debug)]
pub struct Cutter {
    interval: Option<Interval>,
    start_ns: Option<u64>,
    index: u64,
    requests: u64,
    vtime: u64,
}

impl Cutter {
    /// A cutter for `interval` (`None`: one interval holding everything).
    pub fn new(interval: Option<Interval>) -> Self {
        Self { interval, start_ns: None, index: 0, requests: 0, vtime: 0 }
    }

    /// Requests seen so far.
    pub fn requests(&self) -> u64 {
        self.requests
    }

    /// Accesses seen so far.
    pub fn accesses(&self) -> u64 {
        self.vtime
    }

    /// The pieces of the next chunk.
    pub fn cut(&mut self, c: &BlockChunk) -> Vec<Piece> {
        let n = c.len();
        let base = self.vtime;
        let time = |i: usize| c.times.get(i).copied().unwrap_or(0);
        let mut pieces = Vec::new();
        if n == 0 {
            return pieces;
        }
        let first_ever = self.start_ns.is_none();
        let start_ns = *self.start_ns.get_or_insert_with(|| time(0));
        match self.interval {
            None => {
                self.requests += c.requests();
                let opens =
                    first_ever.then_some(IntervalStart { index: 0, start_ns: 0, start_request: 0 });
                pieces.push(Piece { range: 0..n, vtime: base, opens });
            }
            Some(interval) => {
                let mut from = 0usize;
                let mut opens = None;
                for i in 0..n {
                    if c.flags[i] & FLAG_FIRST == 0 {
                        continue;
                    }
                    let rel = time(i).saturating_sub(start_ns);
                    let index = match interval {
                        Interval::Time(span) => rel / span,
                        Interval::Requests(k) => self.requests / k,
                    };
                    if index > self.index || (first_ever && i == 0) {
                        if i > from {
                            pieces.push(Piece {
                                range: from..i,
                                vtime: base + from as u64,
                                opens: opens.take(),
                            });
                        }
                        from = i;
                        let start = match interval {
                            Interval::Time(span) => index * span,
                            Interval::Requests(_) => rel,
                        };
                        opens = Some(IntervalStart {
                            index,
                            start_ns: start,
                            start_request: self.requests,
                        });
                        self.index = index;
                    }
                    self.requests += 1;
                }
                pieces.push(Piece { range: from..n, vtime: base + from as u64, opens });
            }
        }
        self.vtime += n as u64;
        pieces
    }
}
