//! The context every request flow shares: the volume handle ([`Volume`]), its entry checks
//! (gate, range), error accounting, and the per-block plan of a chunk with its run helpers.

use crate::core::Inner;
use crate::device::io_context;
use crate::error::EngineError;
use crate::stats::Counters;
use crate::volume_info::VolumeInfo;
use crate::write_policy::{Policy, PolicyPass};
use std::io;
use std::sync::atomic::Ordering::{Relaxed, SeqCst};
use std::sync::Arc;

pub use crate::stripes::CHUNK_BLOCKS;

/// The handle of one served volume: block requests (read, write, flush, trim, write-zeroes)
/// through the cache. Cheap to clone; every method takes `&self` and may be called from many
/// threads at once.
#[derive(Clone)]
pub struct Volume {
    pub(super) inner: Arc<Inner>,
    vol: Arc<VolumeInfo>,
}

/// What a chunk does with one of its blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Plan {
    /// Resident: read from (or, on a write, update) this cache block.
    Hit(u32),
    /// Allocated on this miss: fill this cache block.
    Fill(u32),
    /// Not cached and not allocated: backing only.
    Pass,
}

impl Plan {
    pub(super) fn cache_block(self) -> Option<u32> {
        match self {
            Plan::Hit(c) | Plan::Fill(c) => Some(c),
            Plan::Pass => None,
        }
    }
}

/// The cache blocks a chunk pinned so far: its hits and the blocks it allocated for its
/// misses. The replacement policy may pick one of them as the victim of the same chunk's next
/// miss (a hit under a policy that does not move a block on a hit, such as FIFO; a block just
/// allocated under one that can evict its newest blocks, such as Random, LIRS with a small
/// HIR share or W-TinyLFU with a small window); `CacheState::allocate_within` then hands that
/// block to the miss at once (as `ember sim` reuses a victim's room), and
/// [`OwnBlocks::adopted`] turns the earlier access into a backing-only one. No allocation: a
/// chunk has at most [`CHUNK_BLOCKS`] blocks.
pub(super) struct OwnBlocks {
    blocks: [u32; CHUNK_BLOCKS as usize],
    len: usize,
}

/// What an adopted block held before the miss took it ([`OwnBlocks::adopted`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Adopted {
    /// The block was not one of the chunk's own.
    No,
    /// An earlier hit of the chunk: still counted a hit, served from backing.
    Hit,
    /// An earlier miss's allocation, evicted before its fill: still counted an
    /// allocation-write (the policy allocated it, as `ember sim` counts), its data never
    /// written to the cache device.
    Fill,
}

impl OwnBlocks {
    pub(super) fn new() -> OwnBlocks {
        OwnBlocks { blocks: [0; CHUNK_BLOCKS as usize], len: 0 }
    }

    /// The chunk pinned cache block `c` (a hit, or an allocation for a miss).
    pub(super) fn push(&mut self, c: u32) {
        self.blocks[self.len] = c;
        self.len += 1;
    }

    /// The blocks, for `CacheState::allocate_within`.
    pub(super) fn as_slice(&self) -> &[u32] {
        &self.blocks[..self.len]
    }

    /// If the miss was given `allocated`, one of these blocks, the access that held it is
    /// served from backing instead: its plan becomes [`Plan::Pass`] (the block was clean, or
    /// not yet filled, so backing holds its data; a write-through write goes to backing
    /// anyway) and the block is no longer that access's. Says what the block was.
    pub(super) fn adopted(&mut self, allocated: Option<u32>, plans: &mut [Plan]) -> Adopted {
        let Some(c) = allocated else { return Adopted::No };
        let Some(i) = self.as_slice().iter().position(|&o| o == c) else { return Adopted::No };
        self.len -= 1;
        self.blocks.swap(i, self.len);
        let mut was = Adopted::No;
        for p in plans.iter_mut() {
            match *p {
                Plan::Hit(h) if h == c => was = Adopted::Hit,
                Plan::Fill(f) if f == c => was = Adopted::Fill,
                _ => continue,
            }
            *p = Plan::Pass;
        }
        was
    }
}

/// Maximal runs `[i, j)` of consecutive plan indices for which `pred(plan i .. plan j)` holds
/// pairwise between neighbours. An iterator, so the hot path allocates nothing.
pub(super) fn runs<'a, S, W>(plans: &'a [Plan], same: S, want: W) -> Runs<'a, S, W>
where
    S: Fn(Plan, Plan) -> bool,
    W: Fn(Plan) -> bool,
{
    Runs { plans, same, want, i: 0 }
}

/// The iterator of [`runs`].
pub(super) struct Runs<'a, S, W> {
    plans: &'a [Plan],
    same: S,
    want: W,
    i: usize,
}

impl<S, W> Iterator for Runs<'_, S, W>
where
    S: Fn(Plan, Plan) -> bool,
    W: Fn(Plan) -> bool,
{
    type Item = (usize, usize);

    fn next(&mut self) -> Option<(usize, usize)> {
        let plans = self.plans;
        while self.i < plans.len() && !(self.want)(plans[self.i]) {
            self.i += 1;
        }
        if self.i >= plans.len() {
            return None;
        }
        let i = self.i;
        let mut j = i + 1;
        while j < plans.len() && (self.want)(plans[j]) && (self.same)(plans[j - 1], plans[j]) {
            j += 1;
        }
        self.i = j;
        Some((i, j))
    }
}

/// True if `b` follows `a` on the cache device.
pub(super) fn adjacent(a: Plan, b: Plan) -> bool {
    matches!((a.cache_block(), b.cache_block()), (Some(x), Some(y)) if x.checked_add(1) == Some(y))
}

/// A request inside the drain gate (leaves on drop). A panic anywhere in the request (a
/// device, the engine, a barrier) poisons the engine as it unwinds: the request may have
/// left the map or the journal cursor half updated.
pub(super) struct Entered<'a> {
    _pass: crate::gate::Pass<'a>,
    stripes: &'a crate::stripes::Stripes,
    vol: &'a VolumeInfo,
}

impl Drop for Entered<'_> {
    fn drop(&mut self) {
        self.vol.active.fetch_sub(1, SeqCst);
        if std::thread::panicking() {
            self.stripes.poison();
        }
    }
}

/// A request inside the gate and registered in the write policy's phase (see
/// `write_policy.rs`): a live switch waits for it before it counts the old policy gone.
pub(super) struct Admitted<'a> {
    _entered: Entered<'a>,
    _pass: PolicyPass<'a>,
}

impl Volume {
    pub(crate) fn new(inner: Arc<Inner>, vol: Arc<VolumeInfo>) -> Self {
        Self { inner, vol }
    }

    pub(super) fn vol(&self) -> &VolumeInfo {
        &self.vol
    }

    pub(super) fn counters(&self) -> &Counters {
        &self.inner.counters[self.vol().id as usize]
    }

    /// Enter the drain gate: refused after shutdown began, or once a panic poisoned the
    /// engine. A panic that unwinds through the returned guard poisons it.
    pub(super) fn enter(&self) -> Result<Entered<'_>, EngineError> {
        let pass = self.inner.gate.enter().ok_or(EngineError::ShutDown)?;
        // Counted before the check, so a removal that closed the volume and then sees no
        // request active knows that none will run (`live/volumes.rs`).
        self.vol.active.fetch_add(1, SeqCst);
        let entered = Entered { _pass: pass, stripes: &self.inner.stripes, vol: &self.vol };
        if self.vol.closed() {
            return Err(EngineError::ShutDown);
        }
        if self.inner.stripes.is_poisoned() {
            return Err(self.fail(crate::stripes::poisoned_error()));
        }
        Ok(entered)
    }

    /// Enter the drain gate ([`Volume::enter`]) and read the write policy this request runs
    /// under, registered in its phase: a request that writes, flushes or discards. A volume
    /// with a write policy of its own runs it (`Policy::for_volume`).
    pub(super) fn enter_policy(&self) -> Result<(Admitted<'_>, Policy), EngineError> {
        let entered = self.enter()?;
        let (policy, pass) = self.inner.policy.enter();
        let policy = policy.for_volume(self.vol.own_mode());
        Ok((Admitted { _entered: entered, _pass: pass }, policy))
    }

    pub(super) fn check(&self, offset: u64, len: u64) -> Result<(), EngineError> {
        match offset.checked_add(len) {
            Some(end) if end <= self.vol().size => Ok(()),
            _ => Err(EngineError::Invalid(format!(
                "{len} bytes at {offset} exceed volume {:?} of {} bytes",
                self.vol().name,
                self.vol().size
            ))),
        }
    }

    /// Count and return an I/O error with its context.
    pub(super) fn fail(&self, e: io::Error) -> EngineError {
        self.counters().io_errors.fetch_add(1, Relaxed);
        EngineError::Io(e)
    }

    pub(super) fn cache_io_error(&self, op: &str, c: u32, n: usize, e: io::Error) -> io::Error {
        let off = self.inner.geometry.block_offset(c);
        io_context(self.inner.cache.as_ref(), op, off, (n as u64) * self.inner.block_size(), e)
    }

    pub(super) fn backing_io_error(&self, op: &str, off: u64, len: u64, e: io::Error) -> io::Error {
        io_context(self.vol().backing.as_ref(), op, off, len, e)
    }

    /// On a miss of `acc`, under the state lock: does the sequential cutoff refuse it?
    /// Counted as a bypass when it does.
    pub(super) fn cut(
        &self,
        st: &mut crate::state::CacheState,
        acc: &ember_policy::Access,
    ) -> bool {
        // An uncached volume (or one being uncached or removed) allocates nothing: every
        // miss is served from backing. Read under the state lock, as `uncache` stores it.
        if !self.vol.caching() {
            return true;
        }
        let cut = st.cut(acc);
        if cut {
            self.counters().seq_cutoff_bypasses.fetch_add(1, Relaxed);
        }
        cut
    }

    /// Is block `b` of this volume cacheable (a whole block inside the volume)?
    pub(super) fn cacheable(&self, b: u64) -> bool {
        (b + 1) * self.inner.block_size() <= self.vol().size
    }

    /// The volume's name.
    pub fn name(&self) -> &str {
        &self.vol().name
    }

    /// Size in bytes.
    pub fn size(&self) -> u64 {
        self.vol().size
    }

    /// The cache block size in bytes (the preferred I/O size).
    pub fn block_size(&self) -> u32 {
        self.inner.geometry.block_size
    }

    /// One line for listings: the write policy and the backing device.
    pub fn describe(&self) -> String {
        let mode = self.inner.policy.load().for_volume(self.vol().own_mode()).mode;
        format!("ember {} cache over {}", mode.name(), self.vol().backing.describe())
    }
}
