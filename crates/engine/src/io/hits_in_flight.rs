//! READ hits whose cache-device reads complete later (`ember serve --direct` at
//! depth): [`Volume::start_hit`] checks and pins a READ's blocks and starts their device
//! reads on the calling thread's ring ([`crate::device::Device::start_read`]) and returns;
//! [`Volume::reap_hits`] reports the READs whose reads completed. A connection's reader
//! thus keeps parsing requests and starting their reads while earlier ones are in flight,
//! so the device queue does not drain between runs of requests.
//!
//! Freshness is that of [`Volume::read_if_resident`]: from the start until its completion
//! is reaped, a READ keeps every block pinned (no eviction, no reuse of the cache block)
//! and the stripe locks of its blocks held, so no write, TRIM, fill or flusher batch of those
//! blocks runs in between. The stripes are taken with a try-lock
//! ([`crate::stripes::Stripes::try_lock_raw`]): the reader may hold a stripe already for an
//! earlier READ, and waiting for it would deadlock the reader; the READ is refused as busy
//! (the reader reaps a READ in flight and starts it again), or declined when nothing is in
//! flight (the server then serves it the ordinary way). The READ is also inside the drain gate until it
//! is reaped, so a shutdown waits for it.
//!
//! The state of the READs in flight is the calling thread's (like its ring): a tag names a
//! READ on this thread until it is reaped.
//!
//! A READ's buffer is an owned [`ReadBuf`], passed by value to [`Volume::start_hit`], lent to
//! the cache device while its reads are in flight, and handed back with the READ's outcome
//! (by [`Volume::start_hit`] itself when nothing stays in flight, else by
//! [`Volume::reap_hits`]): no pointer into it outlives its owner.

use super::ctx::{adjacent, runs, Plan, Volume, CHUNK_BLOCKS};
use crate::clock::now_ns;
use crate::device::{ReadBuf, ReadPart};
use crate::error::EngineError;
use crate::layout::block_key;
use ember_trace::Op;
use smallvec::SmallVec;
use std::cell::RefCell;
use std::os::fd::RawFd;
use std::sync::atomic::Ordering::Relaxed;

const N: usize = CHUNK_BLOCKS as usize;

/// Tags are below this (they index this thread's table of READs in flight).
pub(crate) const MAX_TAGS: u64 = 4096;

/// What [`Volume::start_hit`] did. Every outcome but [`HitStart::Started`] hands the buffer
/// back.
#[derive(Debug)]
pub enum HitStart {
    /// Not served, nothing done, no counter and no replacement update: some block is not
    /// resident, the READ is not whole blocks of one chunk, a stripe of its blocks is held,
    /// or the engine is shutting down. Serve it the ordinary way.
    Declined(ReadBuf),
    /// Not now: the device has no room for its reads, or a stripe of its blocks is held
    /// (by a READ in flight on this thread, or by another request): reap some and start it
    /// again. Only while READs are in flight on this thread.
    Busy(ReadBuf),
    /// Its reads are in flight, the buffer with them: a later [`Volume::reap_hits`] on this
    /// thread hands it back with the tag.
    Started,
    /// Served (or failed) already, without waiting on the ring (no ring on this thread, or
    /// a block read from backing); nothing is in flight.
    Done(ReadBuf, Result<(), EngineError>),
}

/// One READ in flight (its buffer is with the cache device).
struct Pending {
    first: u64,
    n: usize,
    plans: [Plan; N],
    dirty: [bool; N],
    /// Stripes held (released at the end).
    stripes: SmallVec<[usize; 8]>,
    /// Device reads, one per run of adjacent cache blocks.
    parts: SmallVec<[ReadPart; 4]>,
    /// A device read failed: the READ is read again block run by block run at the end.
    failed: bool,
    /// Bytes read from the cache device through the ring.
    bytes: u64,
}

thread_local! {
    /// This thread's READs in flight, by tag.
    static PENDING: RefCell<Vec<Option<Pending>>> = const { RefCell::new(Vec::new()) };
}

impl Volume {
    /// Whether this volume's hits can be read with [`Volume::start_hit`] on this thread (its
    /// cache device starts reads that complete later: an O_DIRECT file with io_uring).
    pub fn starts_hits(&self) -> bool {
        self.inner.cache.read_room() > 0 || self.hits_in_flight() > 0
    }

    /// Register `buf`, a buffer this thread will start hits into, with the cache device
    /// ([`crate::device::Device::register_read_buffer`]: an O_DIRECT cache's io_uring then
    /// skips pinning its pages on every read). True: registered, and marked so: dropping it
    /// leaks it until [`Volume::unregister_hit_buffer`] on this thread let go of it.
    pub fn register_hit_buffer(&self, buf: &mut ReadBuf) -> bool {
        self.inner.cache.register_read_buffer(buf)
    }

    /// Unregister a buffer [`Volume::register_hit_buffer`] registered on this thread. True:
    /// dropping it frees it. False: still registered, dropping it leaks it (see
    /// [`crate::device::Device::unregister_read_buffer`]).
    pub fn unregister_hit_buffer(&self, buf: &mut ReadBuf) -> bool {
        self.inner.cache.unregister_read_buffer(buf)
    }

    /// READs started on this thread and not yet reaped.
    pub fn hits_in_flight(&self) -> usize {
        PENDING.with(|p| p.borrow().iter().filter(|x| x.is_some()).count())
    }

    /// Start a READ of `buf.len()` bytes at `offset` into `buf` if every block is resident
    /// (whole blocks of one chunk only): pin its blocks, hold their stripes, and queue their
    /// cache-device reads (handed to the device at the next [`Volume::reap_hits`], so the
    /// READs a reader starts in a row go to the kernel in one call). `tag` (below
    /// [`MAX_TAGS`]) names it until [`Volume::reap_hits`] on this thread hands `buf` back
    /// with it; no other READ in flight on this thread may have the same tag.
    pub fn start_hit(&self, offset: u64, mut buf: ReadBuf, tag: u64) -> HitStart {
        let inner = &self.inner;
        let bs = inner.block_size();
        let vol = self.vol();
        let (vid, size) = (vol.id, vol.size);
        let len = buf.len();
        let len64 = len as u64;
        if len == 0
            || !offset.is_multiple_of(bs)
            || !len64.is_multiple_of(bs)
            || len64 / bs > CHUNK_BLOCKS
            || offset.checked_add(len64).is_none_or(|e| e > size)
            || tag >= MAX_TAGS
        {
            return HitStart::Declined(buf);
        }
        if !inner.health.is_healthy() {
            // Degraded: a pass-through to backing, answered at once where it can be.
            return match self.read_degraded_at_once(offset, buf.as_mut_slice()) {
                Some(r) => HitStart::Done(buf, r),
                None => HitStart::Declined(buf),
            };
        }
        let first = offset / bs;
        // A block lost with a replaced device: the ordinary path fails the READ.
        if inner.health.first_lost(vid, first..first + len64 / bs).is_some() {
            return HitStart::Declined(buf);
        }
        let n = (len64 / bs) as usize;
        // At most one device read per block.
        if inner.cache.read_room() < n {
            return if self.hits_in_flight() > 0 {
                HitStart::Busy(buf)
            } else {
                HitStart::Declined(buf)
            };
        }
        // A removed volume's READ goes the ordinary way, which answers ESHUTDOWN.
        if self.vol().closed() || !inner.gate.enter_raw() {
            return HitStart::Declined(buf);
        }
        let leave = || inner.gate.leave_raw();
        let Some(stripes) = inner.stripes.try_lock_raw((first..first + n as u64).map(|b| (vid, b)))
        else {
            leave();
            // Held by a READ in flight here (wait for it), or by another thread's request.
            return if self.hits_in_flight() > 0 {
                HitStart::Busy(buf)
            } else {
                HitStart::Declined(buf)
            };
        };
        let mut p = Pending {
            first,
            n,
            plans: [Plan::Pass; N],
            dirty: [false; N],
            stripes,
            parts: SmallVec::new(),
            failed: false,
            bytes: 0,
        };
        {
            let mut st = inner.state.lock();
            let blocks = first..first + n as u64;
            if !blocks.clone().all(|b| self.cacheable(b) && st.slot(block_key(vid, b)).is_some()) {
                drop(st);
                // SAFETY: taken above by this thread.
                unsafe { inner.stripes.unlock_raw(&p.stripes) };
                leave();
                return HitStart::Declined(buf);
            }
            let now = now_ns();
            for (i, b) in blocks.enumerate() {
                let key = block_key(vid, b);
                p.dirty[i] = st.slot(key).is_some_and(|x| x.dirty.is_some());
                let acc = st.access(key, Op::Read, now);
                // Resident (checked in this section), so pinned; a Pass is read from backing
                // at the end, never served stale.
                if let Some(c) = st.hit_pin(&acc) {
                    self.note_hit(&mut st, &acc, c);
                    p.plans[i] = Plan::Hit(c);
                }
            }
        }
        self.count_read(offset, len64);
        let hits = p.plans[..n].iter().filter(|x| matches!(x, Plan::Hit(_))).count();
        let hot = self.counters().hot.mine();
        hot.read_hits.fetch_add(hits as u64, Relaxed);
        if n > hits {
            hot.read_misses.fetch_add((n - hits) as u64, Relaxed);
        }
        if hits < n {
            // A block read from backing: the whole READ the ordinary way, now.
            p.failed = true;
            let result = self.finish(p, buf.as_mut_slice());
            return HitStart::Done(buf, result);
        }
        for (i, j) in runs(&p.plans[..n], adjacent, |x| matches!(x, Plan::Hit(_))) {
            let Some(c) = p.plans[i].cache_block() else { continue };
            let at = i * bs as usize;
            let len = (j - i) * bs as usize;
            p.parts.push(ReadPart { offset: inner.geometry.block_offset(c), at, len });
        }
        match inner.cache.start_read(buf, &p.parts, tag, false) {
            Ok(()) => {
                PENDING.with(|cell| {
                    let mut table = cell.borrow_mut();
                    let at = tag as usize;
                    if table.len() <= at {
                        table.resize_with(at + 1, || None);
                    }
                    debug_assert!(table[at].is_none(), "tag {tag} already in flight");
                    table[at] = Some(p);
                });
                HitStart::Started
            }
            Err(mut buf) => {
                // Not started (no ring on this thread, or no room on it): read plainly.
                for part in &p.parts {
                    let into = buf.as_mut_slice().get_mut(part.at..part.at + part.len);
                    match into.map(|into| inner.cache.read_at(part.offset, into)) {
                        Some(Ok(())) => p.bytes += part.len as u64,
                        _ => p.failed = true,
                    }
                }
                let result = self.finish(p, buf.as_mut_slice());
                HitStart::Done(buf, result)
            }
        }
    }

    /// Hand back the buffers of the READs started on this thread whose device reads all
    /// completed, `done(tag, buf, outcome)` each; first wait until at least `wait` device
    /// reads completed (at most as many as are in flight; 0: no waiting; a READ of several
    /// runs of cache blocks has a device read each), or, with `wake` (an open descriptor: the
    /// connection's socket), until it is readable, whichever comes first. Returns how many
    /// READs were reported.
    pub fn reap_hits(
        &self,
        wait: usize,
        wake: Option<RawFd>,
        done: &mut dyn FnMut(u64, ReadBuf, Result<(), EngineError>),
    ) -> usize {
        let cache = self.inner.cache.as_ref();
        let mut count = 0;
        cache.reap_reads(wait, wake, &mut |tag, mut buf, outcomes| {
            let Some(mut p) =
                PENDING.with(|cell| cell.borrow_mut().get_mut(tag as usize).and_then(Option::take))
            else {
                return;
            };
            if outcomes.len() != p.parts.len() {
                p.failed = true;
            }
            for (part, outcome) in p.parts.iter().zip(outcomes) {
                match *outcome {
                    Ok(got) if got == part.len => p.bytes += part.len as u64,
                    Ok(got) if got < part.len => {
                        // A short read: finish it plainly.
                        let rest = buf.as_mut_slice().get_mut(part.at + got..part.at + part.len);
                        match rest.map(|rest| cache.read_at(part.offset + got as u64, rest)) {
                            Some(Ok(())) => p.bytes += part.len as u64,
                            _ => p.failed = true,
                        }
                    }
                    _ => p.failed = true,
                }
            }
            let result = self.finish(p, buf.as_mut_slice());
            count += 1;
            done(tag, buf, result);
        });
        count
    }

    /// The end of a READ read into `buf`: re-read it run by run if a device read failed (a
    /// clean block from backing, its copy dropped; a dirty one's error reported), unpin,
    /// release.
    fn finish(&self, p: Pending, buf: &mut [u8]) -> Result<(), EngineError> {
        let inner = &self.inner;
        let bs = inner.block_size();
        let vid = self.vol().id;
        let ctr = self.counters();
        ctr.hot.mine().cache_read_bytes.fetch_add(p.bytes, Relaxed);
        let mut bad = [false; N];
        let mut result = Ok(());
        if p.failed {
            let mut filled = [false; N];
            result = self
                .read_io(
                    p.first,
                    p.n as u64 * bs,
                    &p.plans[..p.n],
                    buf,
                    &mut filled[..p.n],
                    (&p.dirty[..p.n], &mut bad[..p.n]),
                )
                .map_err(|e| self.fail(e));
        }
        {
            let mut st = inner.state.lock();
            for (i, plan) in p.plans[..p.n].iter().enumerate() {
                if let Plan::Hit(c) = *plan {
                    if bad[i] && st.invalidate_if(block_key(vid, p.first + i as u64), c) {
                        ctr.invalidations.fetch_add(1, Relaxed);
                    }
                    st.unpin(c);
                }
            }
        }
        // SAFETY: taken by start_hit on this thread (a READ never leaves its thread).
        unsafe { inner.stripes.unlock_raw(&p.stripes) };
        inner.gate.leave_raw();
        result
    }
}
