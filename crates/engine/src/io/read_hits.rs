//! Several READ hits at once (`ember serve --direct` at depth): the hits of a run
//! of requests a connection's reader already holds are checked and pinned in one state-lock
//! section, under the stripe locks of all their blocks, and their cache-device reads go out
//! together ([`crate::device::Device::read_many`]: io_uring on an O_DIRECT file), so a
//! device that waits on its medium has them all in flight at once. Freshness is that of
//! [`Volume::read_if_resident`]: every block stays pinned and its stripe locked until its
//! read completed, so no write, eviction or fill of those blocks runs in between.

use super::ctx::{adjacent, runs, Plan, Volume, CHUNK_BLOCKS};
use crate::clock::now_ns;
use crate::error::EngineError;
use crate::layout::block_key;
use ember_trace::Op;
use std::sync::atomic::Ordering::Relaxed;

const N: usize = CHUNK_BLOCKS as usize;

/// One READ offered to [`Volume::read_hits`].
pub struct HitRead<'a> {
    /// Byte offset in the volume.
    pub offset: u64,
    /// Where the bytes go (its length is the READ's).
    pub buf: &'a mut [u8],
    /// What happened: `None` if declined (some block not resident, not whole blocks, more
    /// than one chunk, outside the volume) with nothing done, no counter and no replacement
    /// update; `Some` if served (`Ok`), or failed with the error to report.
    pub outcome: Option<Result<(), EngineError>>,
}

/// A served request's blocks.
struct Served {
    at: usize,
    first: u64,
    n: usize,
    plans: [Plan; N],
    dirty: [bool; N],
    /// A cache-device read of this request failed (redo it one run at a time).
    failed: bool,
}

impl Volume {
    /// Serve every READ of `reads` whose blocks are all resident, the others declined
    /// ([`HitRead::outcome`]). Whole blocks only (a partial block is declined).
    pub fn read_hits(&self, reads: &mut [HitRead<'_>]) {
        let inner = &self.inner;
        let bs = inner.block_size();
        let vol = self.vol();
        let (vid, size) = (vol.id, vol.size);
        for r in reads.iter_mut() {
            r.outcome = None;
        }
        let eligible = |offset: u64, len: u64| {
            len > 0
                && offset.is_multiple_of(bs)
                && len.is_multiple_of(bs)
                && len / bs <= CHUNK_BLOCKS
                && offset.checked_add(len).is_some_and(|e| e <= size)
                && inner.health.first_lost(vid, offset / bs..(offset + len) / bs).is_none()
        };
        if !inner.health.is_healthy() {
            // Degraded: each a pass-through to backing, at once where it can be.
            for r in reads.iter_mut() {
                r.outcome = self.read_degraded_at_once(r.offset, r.buf);
            }
            return;
        }
        let Ok(_pass) = self.enter() else { return };
        let keys: Vec<(u32, u64)> = reads
            .iter()
            .filter(|r| eligible(r.offset, r.buf.len() as u64))
            .flat_map(|r| {
                let first = r.offset / bs;
                (first..first + r.buf.len() as u64 / bs).map(move |b| (vid, b))
            })
            .collect();
        if keys.is_empty() {
            return;
        }
        let Ok(held) = inner.stripes.lock_keys(keys.into_iter()) else { return };
        let now = now_ns();
        let mut served: Vec<Served> = Vec::with_capacity(reads.len());
        {
            let mut st = inner.state.lock();
            for (at, r) in reads.iter().enumerate() {
                let len = r.buf.len() as u64;
                if !eligible(r.offset, len) {
                    continue;
                }
                let first = r.offset / bs;
                let n = (len / bs) as usize;
                let blocks = first..first + n as u64;
                if !blocks
                    .clone()
                    .all(|b| self.cacheable(b) && st.slot(block_key(vid, b)).is_some())
                {
                    continue;
                }
                let mut s = Served {
                    at,
                    first,
                    n,
                    plans: [Plan::Pass; N],
                    dirty: [false; N],
                    failed: false,
                };
                for (i, b) in blocks.enumerate() {
                    let key = block_key(vid, b);
                    s.dirty[i] = st.slot(key).is_some_and(|x| x.dirty.is_some());
                    let acc = st.access(key, Op::Read, now);
                    // Resident (checked in this section), so pinned; a Pass would be read
                    // from backing below, never served stale.
                    if let Some(c) = st.hit_pin(&acc) {
                        self.note_hit(&mut st, &acc, c);
                        s.plans[i] = Plan::Hit(c);
                    }
                }
                served.push(s);
            }
        }
        let ctr = self.counters();
        for s in &served {
            let r = &reads[s.at];
            self.count_read(r.offset, r.buf.len() as u64);
            let hits = s.plans[..s.n].iter().filter(|p| matches!(p, Plan::Hit(_))).count();
            let hot = ctr.hot.mine();
            hot.read_hits.fetch_add(hits as u64, Relaxed);
            if s.n > hits {
                hot.read_misses.fetch_add((s.n - hits) as u64, Relaxed);
            }
        }
        // Every run of adjacent hits of every served request, read together.
        {
            let mut list: Vec<(u64, &mut [u8])> = Vec::new();
            let mut owner: Vec<usize> = Vec::new();
            let mut next = 0;
            for (at, r) in reads.iter_mut().enumerate() {
                let Some(k) = served[next..].iter().position(|s| s.at == at) else { continue };
                let k = next + k;
                next = k + 1;
                let s = &mut served[k];
                let plans = &s.plans[..s.n];
                if plans.iter().any(|p| !matches!(p, Plan::Hit(_))) {
                    s.failed = true; // read one run at a time below (backing for a Pass)
                    continue;
                }
                let mut rest: &mut [u8] = &mut *r.buf;
                let mut at_byte = 0usize;
                for (i, j) in runs(plans, adjacent, |p| matches!(p, Plan::Hit(_))) {
                    let Some(c) = plans[i].cache_block() else { continue };
                    let taken = std::mem::take(&mut rest);
                    let (_, tail) = taken.split_at_mut(i * bs as usize - at_byte);
                    let (run, tail) = tail.split_at_mut((j - i) * bs as usize);
                    rest = tail;
                    at_byte = j * bs as usize;
                    list.push((inner.geometry.block_offset(c), run));
                    owner.push(k);
                }
            }
            let mut failed = vec![false; served.len()];
            inner.cache.read_many(&mut list, &mut |idx, outcome| {
                if outcome.is_err() {
                    failed[owner[idx]] = true;
                }
            });
            let mut bytes = 0u64;
            for (idx, (_, run)) in list.iter().enumerate() {
                if !failed[owner[idx]] {
                    bytes += run.len() as u64;
                }
            }
            ctr.hot.mine().cache_read_bytes.fetch_add(bytes, Relaxed);
            for (s, f) in served.iter_mut().zip(failed) {
                s.failed |= f;
            }
        }
        // A failed request is read again run by run, as a lone hit is: a clean block from
        // backing (and its copy dropped below), a dirty one's error reported.
        let mut bad_all: Vec<[bool; N]> = vec![[false; N]; served.len()];
        for (s, bad) in served.iter().zip(bad_all.iter_mut()) {
            let r = &mut reads[s.at];
            if !s.failed {
                r.outcome = Some(Ok(()));
                continue;
            }
            let span = s.n as u64 * bs;
            let mut filled = [false; N];
            let result = self.read_io(
                s.first,
                span,
                &s.plans[..s.n],
                r.buf,
                &mut filled[..s.n],
                (&s.dirty[..s.n], &mut bad[..s.n]),
            );
            r.outcome = Some(result.map_err(|e| self.fail(e)));
        }
        {
            let mut st = inner.state.lock();
            for (s, bad) in served.iter().zip(&bad_all) {
                for (i, p) in s.plans[..s.n].iter().enumerate() {
                    if let Plan::Hit(c) = *p {
                        if bad[i] && st.invalidate_if(block_key(vid, s.first + i as u64), c) {
                            ctr.invalidations.fetch_add(1, Relaxed);
                        }
                        st.unpin(c);
                    }
                }
            }
        }
        drop(held);
    }
}
