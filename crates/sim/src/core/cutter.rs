//! Timeline intervals and the uncounted warm-up period cut from a trace that streams past in
//! chunks: each chunk is cut into [`Piece`]s that lie in one interval and on one side of the
//! warm-up's end, across chunk boundaries. [`crate::AccessStream::spans`] cuts a stream held
//! whole with the same code, so a streamed run's timeline equals [`crate::simulate`]'s.

use super::warmup_period::{CountStart, WarmupPeriod};
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
    /// True if the interval lies in the uncounted warm-up period.
    pub warmup: bool,
}

/// A stretch of a chunk that lies in one timeline interval, on one side of the warm-up's end.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Piece {
    /// The accesses, as positions in the chunk.
    pub range: Range<usize>,
    /// The vtime of the first of them.
    pub vtime: u64,
    /// Set if a new interval starts with this piece (an interval in which counting starts
    /// is cut in two at that point: a warm-up part and a counted part, with one number).
    pub opens: Option<IntervalStart>,
    /// False if the accesses lie in the uncounted warm-up period.
    pub counted: bool,
    /// Set on the piece that counting starts with, after a warm-up period.
    pub count_start: Option<CountStart>,
}

/// Cuts a stream of chunks into timeline pieces, keeping its place across chunks.
#[derive(Clone, Debug)]
pub struct Cutter {
    interval: Option<Interval>,
    warmup: WarmupPeriod,
    counting: bool,
    count_start: Option<CountStart>,
    start_ns: Option<u64>,
    index: u64,
    requests: u64,
    vtime: u64,
}

impl Cutter {
    /// A cutter for `interval` (`None`: one interval holding everything), every request
    /// counted.
    pub fn new(interval: Option<Interval>) -> Self {
        Self::with_warmup(interval, WarmupPeriod::None)
    }

    /// A cutter for `interval` whose first requests, up to the end of `warmup`, are not
    /// counted.
    pub fn with_warmup(interval: Option<Interval>, warmup: WarmupPeriod) -> Self {
        Self {
            interval,
            warmup,
            counting: warmup.is_none(),
            count_start: None,
            start_ns: None,
            index: 0,
            requests: 0,
            vtime: 0,
        }
    }

    /// Requests seen so far.
    pub fn requests(&self) -> u64 {
        self.requests
    }

    /// Accesses seen so far.
    pub fn accesses(&self) -> u64 {
        self.vtime
    }

    /// Where counting started after the warm-up period, once it has.
    pub fn count_start(&self) -> Option<CountStart> {
        self.count_start
    }

    /// The pieces of the next chunk.
    pub fn cut(&mut self, c: &BlockChunk) -> Vec<Piece> {
        self.cut_slices(&c.flags, &c.times)
    }

    /// The pieces of the next run of accesses, given by their flags and their times (empty:
    /// every access at time 0).
    pub fn cut_slices(&mut self, flags: &[u8], times: &[u64]) -> Vec<Piece> {
        let n = flags.len();
        let base = self.vtime;
        let time = |i: usize| times.get(i).copied().unwrap_or(0);
        let mut pieces = Vec::new();
        if n == 0 {
            return pieces;
        }
        let first_ever = self.start_ns.is_none();
        let start_ns = *self.start_ns.get_or_insert_with(|| time(0));
        if self.interval.is_none() && self.counting {
            // The common case, without a scan of the requests.
            let opens = first_ever.then_some(IntervalStart {
                index: 0,
                start_ns: 0,
                start_request: 0,
                warmup: false,
            });
            self.requests += flags.iter().map(|&f| u64::from(f & FLAG_FIRST != 0)).sum::<u64>();
            pieces.push(Piece {
                range: 0..n,
                vtime: base,
                opens,
                counted: true,
                count_start: None,
            });
            self.vtime += n as u64;
            return pieces;
        }
        let mut from = 0usize;
        let mut opens = None;
        let mut count_start = None;
        let mut counted = self.counting;
        for (i, &f) in flags.iter().enumerate() {
            if f & FLAG_FIRST == 0 {
                continue;
            }
            let rel = time(i).saturating_sub(start_ns);
            let starts_counting = !self.counting && self.warmup.over_at(self.requests, rel);
            let index = match self.interval {
                Some(Interval::Time(span)) => rel / span,
                Some(Interval::Requests(k)) => self.requests / k,
                None => 0,
            };
            let new_interval = index > self.index || (first_ever && i == 0);
            if new_interval || starts_counting {
                if i > from {
                    pieces.push(Piece {
                        range: from..i,
                        vtime: base + from as u64,
                        opens: opens.take(),
                        counted,
                        count_start: count_start.take(),
                    });
                }
                from = i;
                if starts_counting {
                    self.counting = true;
                    let start = CountStart {
                        request: self.requests,
                        access: base + i as u64,
                        start_ns: rel,
                    };
                    self.count_start = Some(start);
                    count_start = Some(start);
                }
                counted = self.counting;
                // A new interval starts at its own start; the counted part of an interval
                // that counting starts in, at the first counted request.
                let start = match self.interval {
                    Some(Interval::Time(span)) if new_interval => index * span,
                    _ => rel,
                };
                if new_interval || self.interval.is_some() {
                    opens = Some(IntervalStart {
                        index,
                        start_ns: start,
                        start_request: self.requests,
                        warmup: !self.counting,
                    });
                }
                self.index = index;
            }
            self.requests += 1;
        }
        pieces.push(Piece {
            range: from..n,
            vtime: base + from as u64,
            opens,
            counted,
            count_start,
        });
        self.vtime += n as u64;
        pieces
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ember_trace::FLAG_FIRST as F;

    /// Six one-block requests at times 0..6 s, then a two-block request at 6 s.
    fn chunk() -> (Vec<u8>, Vec<u64>) {
        let s = 1_000_000_000;
        (vec![F, F, F, F, F, F, F, 0], vec![0, s, 2 * s, 3 * s, 4 * s, 5 * s, 6 * s, 6 * s])
    }

    #[test]
    fn warmup_by_requests_splits_one_piece_and_marks_the_start() {
        let (flags, times) = chunk();
        let mut c = Cutter::with_warmup(None, WarmupPeriod::Requests(2));
        let p = c.cut_slices(&flags[..3], &times[..3]);
        assert_eq!(p.len(), 2);
        assert_eq!((p[0].range.clone(), p[0].counted), (0..2, false));
        assert_eq!((p[1].range.clone(), p[1].counted), (2..3, true));
        let start = CountStart { request: 2, access: 2, start_ns: 2_000_000_000 };
        assert_eq!(p[1].count_start, Some(start));
        assert!(p[0].opens.is_some_and(|o| o.warmup) && p[1].opens.is_none());
        // Once counting, the rest is one counted piece.
        let p = c.cut_slices(&flags[3..], &times[3..]);
        assert_eq!(p.len(), 1);
        assert!(p[0].counted && p[0].count_start.is_none() && p[0].opens.is_none());
        assert_eq!((c.requests(), c.accesses(), c.count_start()), (7, 8, Some(start)));
    }

    #[test]
    fn warmup_by_time_cuts_the_interval_it_ends_in() {
        let (flags, times) = chunk();
        let s = 1_000_000_000;
        let mut c = Cutter::with_warmup(Some(Interval::Time(4 * s)), WarmupPeriod::Time(3 * s));
        let p = c.cut_slices(&flags, &times);
        let o = |p: &Piece| p.opens.map(|o| (o.index, o.start_ns, o.start_request, o.warmup));
        let got: Vec<_> = p.iter().map(|p| (p.range.clone(), p.counted, o(p))).collect();
        assert_eq!(
            got,
            vec![
                (0..3, false, Some((0, 0, 0, true))),
                (3..4, true, Some((0, 3 * s, 3, false))),
                (4..8, true, Some((1, 4 * s, 4, false))),
            ]
        );
    }

    #[test]
    fn a_warmup_longer_than_the_trace_counts_nothing() {
        let (flags, times) = chunk();
        let mut c = Cutter::with_warmup(None, WarmupPeriod::Requests(100));
        let p = c.cut_slices(&flags, &times);
        assert!(p.iter().all(|p| !p.counted));
        assert_eq!(c.count_start(), None);
    }
}
