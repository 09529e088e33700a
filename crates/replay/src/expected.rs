//! What each sector of an export must hold: an interval map from sector ranges to the write
//! generation last written there. Sectors never written by this replay (nor prefilled) are
//! unknown, and reads of them cannot be checked.

use std::collections::BTreeMap;

/// Sector ranges `[start, end)` and the generation each holds.
#[derive(Clone, Debug, Default)]
pub struct ExpectedMap {
    /// start → (end, generation); intervals never overlap.
    intervals: BTreeMap<u64, (u64, u32)>,
}

/// One piece of a lookup: sectors `[start, end)` hold `generation` (`None`: unknown).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment {
    /// First sector.
    pub start: u64,
    /// One past the last sector.
    pub end: u64,
    /// The generation these sectors hold, if known.
    pub generation: Option<u32>,
}

impl ExpectedMap {
    /// Nothing known.
    pub fn new() -> ExpectedMap {
        ExpectedMap::default()
    }

    /// Number of disjoint intervals kept (memory grows with this, not with sectors).
    pub fn intervals(&self) -> usize {
        self.intervals.len()
    }

    fn overlapping(&self, start: u64, end: u64) -> Vec<(u64, u64, u32)> {
        let mut out = Vec::new();
        if let Some((&s, &(e, g))) = self.intervals.range(..start).next_back() {
            if e > start {
                out.push((s, e, g));
            }
        }
        out.extend(self.intervals.range(start..end).map(|(&s, &(e, g))| (s, e, g)));
        out
    }

    /// Record that sectors `[start, end)` now hold `generation`.
    pub fn assign(&mut self, start: u64, end: u64, generation: u32) {
        if start >= end {
            return;
        }
        self.forget(start, end);
        self.intervals.insert(start, (end, generation));
    }

    /// Record that the content of sectors `[start, end)` is no longer known (a write to them
    /// failed, so they may hold the old data, the new, or a mix).
    pub fn forget(&mut self, start: u64, end: u64) {
        for (s, e, g) in self.overlapping(start, end) {
            self.intervals.remove(&s);
            if s < start {
                self.intervals.insert(s, (start, g));
            }
            if e > end {
                self.intervals.insert(end, (e, g));
            }
        }
    }

    /// What sectors `[start, end)` must hold, as consecutive segments covering the range.
    pub fn lookup(&self, start: u64, end: u64) -> Vec<Segment> {
        let mut out = Vec::new();
        let mut at = start;
        for (s, e, g) in self.overlapping(start, end) {
            let s = s.max(start);
            let e = e.min(end);
            if s > at {
                out.push(Segment { start: at, end: s, generation: None });
            }
            out.push(Segment { start: s, end: e, generation: Some(g) });
            at = e;
        }
        if at < end {
            out.push(Segment { start: at, end, generation: None });
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seg(start: u64, end: u64, generation: Option<u32>) -> Segment {
        Segment { start, end, generation }
    }

    #[test]
    fn unknown_until_assigned() {
        let m = ExpectedMap::new();
        assert_eq!(m.lookup(10, 20), vec![seg(10, 20, None)]);
    }

    #[test]
    fn overwrites_split_older_intervals() {
        let mut m = ExpectedMap::new();
        m.assign(0, 100, 0);
        m.assign(10, 20, 5);
        m.assign(15, 30, 6);
        assert_eq!(
            m.lookup(0, 110),
            vec![
                seg(0, 10, Some(0)),
                seg(10, 15, Some(5)),
                seg(15, 30, Some(6)),
                seg(30, 100, Some(0)),
                seg(100, 110, None),
            ]
        );
        assert_eq!(m.intervals(), 4);
        m.assign(0, 100, 7);
        assert_eq!(m.lookup(5, 50), vec![seg(5, 50, Some(7))]);
        assert_eq!(m.intervals(), 1);
    }

    #[test]
    fn forgotten_sectors_are_unknown() {
        let mut m = ExpectedMap::new();
        m.assign(0, 100, 3);
        m.forget(40, 60);
        assert_eq!(
            m.lookup(30, 70),
            vec![seg(30, 40, Some(3)), seg(40, 60, None), seg(60, 70, Some(3))]
        );
    }

    #[test]
    fn gaps_between_writes_stay_unknown() {
        let mut m = ExpectedMap::new();
        m.assign(10, 20, 1);
        m.assign(30, 40, 2);
        assert_eq!(
            m.lookup(15, 35),
            vec![seg(15, 20, Some(1)), seg(20, 30, None), seg(30, 35, Some(2))]
        );
    }
}
