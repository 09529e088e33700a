//! A run's counters as pieces of the stream pass ([`Tally`]): the totals of the counted
//! accesses, and, if asked, the timeline of every interval, those of the uncounted warm-up
//! period flagged, so that the counted intervals add up to the totals.

use super::cutter::Piece;
use super::warmup_period::CountStart;
use crate::{Counters, IntervalStats};

/// The counters of one run, fed piece after piece.
#[derive(Clone, Debug, Default)]
pub(crate) struct Tally {
    totals: Counters,
    timeline: Option<Vec<IntervalStats>>,
    open: Option<IntervalStats>,
    count_start: Option<CountStart>,
}

impl Tally {
    /// An empty tally; with `timeline`, it keeps per-interval counters.
    pub(crate) fn new(timeline: bool) -> Self {
        Self { timeline: timeline.then(Vec::new), ..Self::default() }
    }

    /// `piece` starts: open its interval if it opens one.
    pub(crate) fn begin(&mut self, piece: &Piece) {
        if let Some(start) = piece.opens {
            if let (Some(t), Some(done)) = (self.timeline.as_mut(), self.open.take()) {
                t.push(done);
            }
            self.open = Some(IntervalStats {
                index: start.index,
                start_ns: start.start_ns,
                start_request: start.start_request,
                warmup: start.warmup,
                counters: Counters::default(),
            });
        }
        if piece.count_start.is_some() {
            self.count_start = piece.count_start;
        }
    }

    /// `c` happened in the piece that last began, counted or not.
    pub(crate) fn add(&mut self, counted: bool, c: Counters) {
        if counted {
            self.totals += c;
        }
        if let Some(o) = self.open.as_mut() {
            o.counters += c;
        }
    }

    /// The counted totals.
    pub(crate) fn totals(&self) -> Counters {
        self.totals
    }

    /// The timeline so far (the open interval included), if kept.
    pub(crate) fn timeline(&self) -> Option<Vec<IntervalStats>> {
        self.timeline.as_ref().map(|t| {
            let mut t = t.clone();
            t.extend(self.open);
            t
        })
    }

    /// Where counting started after a warm-up period, once it has.
    pub(crate) fn count_start(&self) -> Option<CountStart> {
        self.count_start
    }
}
