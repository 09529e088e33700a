//! Test helpers: a tiny LRU and hand-written traces.

use ember_policy::{Access, Replacement};
use ember_trace::{Op, Request, Trace, VolumeTable};
use std::collections::VecDeque;

/// A plain LRU over a deque (O(n) per access; for tests only).
pub(crate) struct TinyLru {
    cap: usize,
    /// Most recent at the back.
    q: VecDeque<u64>,
}

impl TinyLru {
    pub(crate) fn new(cap: usize) -> Self {
        Self { cap, q: VecDeque::new() }
    }
}

impl Replacement for TinyLru {
    fn name(&self) -> &'static str {
        "tinylru"
    }
    fn capacity(&self) -> usize {
        self.cap
    }
    fn len(&self) -> usize {
        self.q.len()
    }
    fn contains(&self, key: u64) -> bool {
        self.q.contains(&key)
    }
    fn lookup(&mut self, a: &Access) -> bool {
        match self.q.iter().position(|&k| k == a.key) {
            Some(p) => {
                self.q.remove(p);
                self.q.push_back(a.key);
                true
            }
            None => false,
        }
    }
    fn insert(&mut self, a: &Access) -> Option<u64> {
        let ev = if self.q.len() >= self.cap { self.q.pop_front() } else { None };
        self.q.push_back(a.key);
        ev
    }
    fn remove(&mut self, key: u64) -> bool {
        match self.q.iter().position(|&k| k == key) {
            Some(p) => {
                self.q.remove(p);
                true
            }
            None => false,
        }
    }
}

/// One 4 KiB request per `(block, 'R' | 'W')`, at times 0, 1, 2, ... ns, volume 0.
pub(crate) fn trace_of(blocks: &[(u64, char)]) -> Trace {
    let requests = blocks
        .iter()
        .enumerate()
        .map(|(i, &(b, op))| Request {
            time_ns: i as u64,
            volume: 0,
            op: if op == 'W' { Op::Write } else { Op::Read },
            offset: b * 4096,
            length: 4096,
        })
        .collect();
    Trace::new(requests, VolumeTable::new())
}
