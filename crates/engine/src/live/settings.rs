//! The settings that change while serving besides the write policy: the admission sieve,
//! the write-back tuning (dirty thresholds, epoch cap, batch, flush order) and the
//! replacement policy where its order can be rebuilt from the resident set.
//!
//! - *Admission*: a fresh sieve of the new spec replaces the old one under the state lock;
//!   what the old one counted (SieveStore-C's IMCT and MCT, OCF's hit counts, ...) is
//!   dropped with it, outside the lock, and the new one starts from nothing; the resident
//!   blocks stay. A discrete sieve (SieveStore-D, RandSieve-BlkD) owns the cache's contents
//!   epoch by epoch through its batch mover, so one cannot be put in or taken out live.
//! - *Cleaning* (`wb/cleaning.rs`): the cap on background cleaning and the idle policy,
//!   resolved against the cache and read by the flusher before each background batch.
//! - *Write-back tuning*: resolved against the cache like at open and stored in the live
//!   limits (`core.rs`); every later decision reads it: a lower max dirty sends writes
//!   through (or, ordered write-back, makes them wait) until the flusher caught up, a lower
//!   min dirty or another flush order takes effect at the flusher's next batch, a lower epoch
//!   cap makes write-back-flush writes wait.
//! - *Replacement*: LRU, FIFO, CLOCK and SIEVE take the resident clean blocks in the order of
//!   their last access (LRU is the engine's own recency list, so switching to it is
//!   immediate); nothing cached is lost. Under the volumes' shares, the new policy takes
//!   them over, with the limits in force. ARC, SLRU, 2Q and S3-FIFO keep state that the
//!   resident set does not hold (ghost lists, the split between their segments and queues,
//!   ARC's target), so switching to them is refused; OPT needs the future; an array tier's
//!   DEMOTE scheme places what clients demote and changes only at a restart.

use crate::cleaning_cell::CleaningStatus;
use crate::clock::now_ns;
use crate::core::Inner;
use crate::error::EngineError;
use crate::wb::{CleaningConfig, CleaningError, WritebackConfig};
use ember_policy::admission::Sieve;
use ember_policy::replacement::{build, Kind, Spec, WithShares};
use ember_policy::shares::Shares;
use ember_policy::Admission as _;
use serde::Serialize;

/// The write-back tuning in force, in blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct WritebackLimits {
    /// At this many dirty blocks, writes fall back to write-through (ordered write-back:
    /// wait).
    pub max_dirty_blocks: u64,
    /// The flusher idles at or below this many dirty blocks unless someone waits for it.
    pub min_dirty_blocks: u64,
    /// Dirty epochs write-back flush allows before writes wait.
    pub max_epochs: u64,
    /// Blocks per flusher batch.
    pub batch_blocks: u64,
    /// The flusher writes the least recently written blocks of an epoch first (`lru`), or
    /// the lowest block numbers (`ascending`).
    pub flush_order: &'static str,
}

/// The limits now, as a report.
pub(crate) fn limits(inner: &Inner) -> WritebackLimits {
    let l = inner.limits.get();
    WritebackLimits {
        max_dirty_blocks: l.max_dirty as u64,
        min_dirty_blocks: l.min_dirty as u64,
        max_epochs: l.max_epochs as u64,
        batch_blocks: l.batch as u64,
        flush_order: if l.lru { "lru" } else { "ascending" },
    }
}

/// Put the write-back tuning `wb` in force (see the module comment).
pub(crate) fn set_writeback(
    inner: &Inner,
    wb: &WritebackConfig,
) -> Result<WritebackLimits, EngineError> {
    let l = wb.resolve(inner.geometry.data_blocks)?;
    inner.limits.set(l);
    let _st = inner.state.lock();
    inner.cv.notify_all();
    Ok(limits(inner))
}

/// Put the cleaning settings `c` in force: the flusher reads them before its next
/// background batch (a wait for its pace is cut short to look).
pub(crate) fn set_cleaning(
    inner: &Inner,
    c: &CleaningConfig,
) -> Result<CleaningStatus, EngineError> {
    let resolved = c.resolve(inner.geometry.data_blocks).map_err(|e| match e {
        CleaningError::Target(e) => EngineError::DirtyLimit(e),
        other => EngineError::Config(other.to_string()),
    })?;
    inner.cleaning.set(resolved);
    let _st = inner.state.lock();
    inner.cv.notify_all();
    Ok(inner.cleaning.status())
}

/// Put a fresh admission sieve in force (see the module comment). `batch_sieve`: a discrete
/// sieve's batch mover runs.
pub(crate) fn set_admission(
    inner: &Inner,
    sieve: Sieve,
    batch_sieve: bool,
) -> Result<(), EngineError> {
    let new = match sieve {
        Sieve::Continuous(a) => a,
        Sieve::Discrete(s, _) => {
            return Err(EngineError::Refused(format!(
                "{}: a discrete sieve moves the cache's contents at each epoch's end; it is set \
                 when ember starts",
                s.name()
            )))
        }
    };
    if batch_sieve {
        let st = inner.state.lock();
        return Err(EngineError::Refused(format!(
            "the discrete sieve {} owns the cache's contents epoch by epoch; it is changed when \
             ember starts",
            st.admission.name()
        )));
    }
    let old = inner.state.lock().replace_admission(new);
    drop(old);
    Ok(())
}

/// Put the replacement policy `kind` in force, keeping the cache's contents (see the module
/// comment for which can).
pub(crate) fn set_replacement(inner: &Inner, spec: Spec) -> Result<(), EngineError> {
    let kind = spec.kind();
    let (current, shared) = {
        let st = inner.state.lock();
        (st.replacement_name(), st.replacement_shares().is_some())
    };
    if current.parse::<Kind>().is_err() {
        return Err(EngineError::Refused(format!(
            "the array tier's DEMOTE scheme {current} places what clients demote; it changes \
             only at a restart"
        )));
    }
    match kind {
        Kind::Lru | Kind::Fifo | Kind::Clock | Kind::Sieve => {}
        Kind::Opt => {
            return Err(EngineError::Refused(
                "replacement policy opt needs the future (an oracle) and runs only in \
                 simulation"
                    .into(),
            ))
        }
        Kind::Arc
        | Kind::Slru
        | Kind::TwoQ
        | Kind::S3Fifo
        | Kind::Lfu
        | Kind::LfuDa
        | Kind::LruK
        | Kind::Random
        | Kind::Hyperbolic
        | Kind::LeCaR
        | Kind::WTinyLfu
        | Kind::Lirs
        | Kind::ClockPro
        | Kind::Mq
        | Kind::Car
        | Kind::Cacheus
        | Kind::Lhd => {
            return Err(EngineError::Refused(format!(
                "{kind} keeps history the resident blocks do not hold (ghost lists, the split \
                 between its queues, access counts), so it cannot take over the cache's contents \
                 live; switch to it at a restart (lru, fifo, clock and sieve switch live)"
            )))
        }
    }
    // Built outside the lock: its index is sized for every cache block. Under shares, the
    // new policy takes them over: wrapped with no limit while the resident blocks are put in
    // (so none is evicted), then given the old policy's limits.
    let capacity = inner.geometry.data_blocks as usize;
    let mut new = build(spec, capacity);
    if shared {
        new = match WithShares::new(new, Shares::new(capacity)) {
            Ok(w) => Box::new(w),
            Err(_) => {
                return Err(EngineError::Refused(format!(
                    "{kind} cannot take the volumes' shares; the policies that can: {}",
                    WithShares::policies().join(", ")
                )))
            }
        };
    }
    let old = {
        let mut st = inner.state.lock();
        if st.replacement_shares().is_some() != shared {
            return Err(EngineError::Refused(
                "a volume's share was set or cleared meanwhile: change the policy again".into(),
            ));
        }
        let old = st.replace_policy(new, now_ns());
        if let (Some(was), Some(now)) = (old.shares(), st.replacement_shares_mut()) {
            now.copy_limits(was);
        }
        inner.count_evictions(&mut st);
        old
    };
    drop(old);
    Ok(())
}
