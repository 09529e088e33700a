//! READ hits whose cache-device reads complete later (issue 14, `ember serve --direct` at
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

use super::ctx::{adjacent, runs, Plan, Volume, CHUNK_BLOCKS};
use crate::clock::now_ns;
use crate::error::EngineError;
use crate::layout::block_key;
use ember_trace::Op;
use smallvec::SmallVec;
use std::cell::RefCell;
use std::os::fd::RawFd;
use std::sync::atomic::Ordering::Relaxed;

const N: usize = CHUNK_BLOCKS as usize;

/// Bits of a device read's tag that name its part (a run of adjacent cache blocks).
const PART_BITS: u32 = 8;

/// Tags are below this (they index this thread's table of READs in flight).
pub(crate) const MAX_TAGS: u64 = 4096;

/// What [`Volume::start_hit`] did.
#[derive(Debug)]
pub enum HitStart {
    /// Not served, nothing done, no counter and no replacement update: some block is not
    /// resident, the READ is not whole blocks of one chunk, a stripe of its blocks is held,
    /// or the engine is shutting down. Serve it the ordinary way.
    Declined,
    /// Not now: the device has no room for its reads, or a stripe of its blocks is held
    /// (by a READ in flight on this thread, or by another request): reap some and start it
    /// again. Only while READs are in flight on this thread.
    Busy,
    /// Its reads are in flight: a later [`Volume::reap_hits`] on this thread reports the tag.
    Started,
    /// Served (or failed) already, without waiting on the ring (no ring on this thread, or
    /// a block read from backing); nothing is in flight.
    Done(Result<(), EngineError>),
}

/// One READ in flight.
struct Pending {
    first: u64,
    n: usize,
    plans: [Plan; N],
    dirty: [bool; N],
    /// Stripes held (released at the end).
    stripes: SmallVec<[usize; 8]>,
    buf: *mut u8,
    len: usize,
    /// Device reads: (device offset, byte offset in `buf`, length).
    parts: SmallVec<[(u64, usize, usize); 4]>,
    /// Device reads not yet completed.
    left: usize,
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

    /// Register `len` bytes at `buf`, a buffer this thread will start hits into, with the
    /// cache device ([`crate::device::Device::register_read_buffer`]: an O_DIRECT cache's io_uring then
    /// skips pinning its pages on every read). True: registered; it must be unregistered with
    /// [`Volume::unregister_hit_buffer`] on this thread before it is freed.
    ///
    /// # Safety
    ///
    /// On true, `buf` must stay valid for `len` bytes until
    /// [`Volume::unregister_hit_buffer`] on this thread returned true for it, and must never
    /// be freed if that never happens.
    pub unsafe fn register_hit_buffer(&self, buf: *mut u8, len: usize) -> bool {
        // SAFETY: the caller's contract is the device's.
        unsafe { self.inner.cache.register_read_buffer(buf, len) }
    }

    /// Unregister a buffer [`Volume::register_hit_buffer`] registered on this thread. True:
    /// it may be freed. False: it must never be freed (see [`crate::device::Device::unregister_read_buffer`]).
    pub fn unregister_hit_buffer(&self, buf: *mut u8) -> bool {
        self.inner.cache.unregister_read_buffer(buf)
    }

    /// READs started on this thread and not yet reaped.
    pub fn hits_in_flight(&self) -> usize {
        PENDING.with(|p| p.borrow().iter().filter(|x| x.is_some()).count())
    }

    /// Start a READ of `len` bytes at `offset` into `buf` if every block is resident
    /// (whole blocks of one chunk only): pin its blocks, hold their stripes, and queue their
    /// cache-device reads (handed to the device at the next [`Volume::reap_hits`], so the
    /// READs a reader starts in a row go to the kernel in one call). `tag` (below [`MAX_TAGS`]) names it until [`Volume::reap_hits`] on this
    /// thread reports it; no other READ in flight on this thread may have the same tag.
    ///
    /// # Safety
    ///
    /// On [`HitStart::Started`], `buf` must stay valid for writes of `len` bytes and be
    /// neither read, written nor freed until [`Volume::reap_hits`] on this thread reported
    /// `tag` (the kernel writes into it meanwhile). Otherwise it is not used after the call.
    pub unsafe fn start_hit(&self, offset: u64, buf: *mut u8, len: usize, tag: u64) -> HitStart {
        let inner = &self.inner;
        let bs = inner.block_size();
        let vol = self.vol();
        let (vid, size) = (vol.id, vol.size);
        let len64 = len as u64;
        if len == 0
            || !offset.is_multiple_of(bs)
            || !len64.is_multiple_of(bs)
            || len64 / bs > CHUNK_BLOCKS
            || offset.checked_add(len64).is_none_or(|e| e > size)
            || tag >= MAX_TAGS
        {
            return HitStart::Declined;
        }
        let first = offset / bs;
        let n = (len64 / bs) as usize;
        // At most one device read per block.
        if inner.cache.read_room() < n {
            return if self.hits_in_flight() > 0 { HitStart::Busy } else { HitStart::Declined };
        }
        if !inner.gate.enter_raw() {
            return HitStart::Declined;
        }
        let leave = || inner.gate.leave_raw();
        let Some(stripes) = inner.stripes.try_lock_raw((first..first + n as u64).map(|b| (vid, b)))
        else {
            leave();
            // Held by a READ in flight here (wait for it), or by another thread's request.
            return if self.hits_in_flight() > 0 { HitStart::Busy } else { HitStart::Declined };
        };
        let mut p = Pending {
            first,
            n,
            plans: [Plan::Pass; N],
            dirty: [false; N],
            stripes,
            buf,
            len,
            parts: SmallVec::new(),
            left: 0,
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
                return HitStart::Declined;
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
            return HitStart::Done(self.finish(p));
        }
        for (i, j) in runs(&p.plans[..n], adjacent, |x| matches!(x, Plan::Hit(_))) {
            let Some(c) = p.plans[i].cache_block() else { continue };
            let at = i * bs as usize;
            p.parts.push((inner.geometry.block_offset(c), at, (j - i) * bs as usize));
        }
        let count = p.parts.len();
        for k in 0..count {
            let (dev, at, plen) = p.parts[k];
            let part_tag = tag << PART_BITS | k as u64;
            // SAFETY: `buf + at .. + plen` lies inside the caller's buffer, which the caller
            // keeps valid until this tag is reaped (or this part is read below).
            let started =
                unsafe { inner.cache.start_read(dev, buf.add(at), plen, part_tag, false) };
            if started {
                p.left += 1;
            } else {
                // SAFETY: as above; nothing else uses this range now.
                let part = unsafe { std::slice::from_raw_parts_mut(buf.add(at), plen) };
                match inner.cache.read_at(dev, part) {
                    Ok(()) => p.bytes += plen as u64,
                    Err(_) => p.failed = true,
                }
            }
        }
        if p.left == 0 {
            return HitStart::Done(self.finish(p));
        }
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

    /// Report the READs started on this thread whose device reads all completed,
    /// `done(tag, outcome)` each; first wait until at least `wait` device reads completed
    /// (at most as many as are in flight; 0: no waiting; a READ of several runs of cache
    /// blocks has a device read each), or, with `wake` (an open descriptor: the connection's
    /// socket), until it is readable, whichever comes first. Returns how many READs were
    /// reported.
    pub fn reap_hits(
        &self,
        wait: usize,
        wake: Option<RawFd>,
        done: &mut dyn FnMut(u64, Result<(), EngineError>),
    ) -> usize {
        let mut finished: SmallVec<[Pending; 16]> = SmallVec::new();
        let mut tags: SmallVec<[u64; 16]> = SmallVec::new();
        let cache = self.inner.cache.as_ref();
        cache.reap_reads(wait, wake, &mut |part_tag, outcome| {
            let tag = part_tag >> PART_BITS;
            let k = (part_tag & ((1 << PART_BITS) - 1)) as usize;
            PENDING.with(|cell| {
                let mut table = cell.borrow_mut();
                let Some(Some(p)) = table.get_mut(tag as usize) else { return };
                let Some(&(dev, at, plen)) = p.parts.get(k) else { return };
                match outcome {
                    Ok(got) if got == plen => p.bytes += plen as u64,
                    Ok(got) if got < plen => {
                        // A short read: finish it plainly.
                        // SAFETY: the part's range of the caller's buffer, whose read just
                        // completed; the caller keeps it valid until the tag is reported.
                        let rest = unsafe {
                            std::slice::from_raw_parts_mut(p.buf.add(at + got), plen - got)
                        };
                        match cache.read_at(dev + got as u64, rest) {
                            Ok(()) => p.bytes += plen as u64,
                            Err(_) => p.failed = true,
                        }
                    }
                    _ => p.failed = true,
                }
                p.left -= 1;
                if p.left == 0 {
                    if let Some(p) = table[tag as usize].take() {
                        finished.push(p);
                        tags.push(tag);
                    }
                }
            });
        });
        let count = finished.len();
        for (p, tag) in finished.into_iter().zip(tags) {
            let result = self.finish(p);
            done(tag, result);
        }
        count
    }

    /// The end of a READ: re-read it run by run if a device read failed (a clean block from
    /// backing, its copy dropped; a dirty one's error reported), unpin, release.
    fn finish(&self, p: Pending) -> Result<(), EngineError> {
        let inner = &self.inner;
        let bs = inner.block_size();
        let vid = self.vol().id;
        let ctr = self.counters();
        ctr.hot.mine().cache_read_bytes.fetch_add(p.bytes, Relaxed);
        let mut bad = [false; N];
        let mut result = Ok(());
        if p.failed {
            // SAFETY: the caller's buffer, every read into it completed.
            let buf = unsafe { std::slice::from_raw_parts_mut(p.buf, p.len) };
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
