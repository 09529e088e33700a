//! A write-policy switch while serving (`Engine::set_write_mode`), up to the start of its
//! drain; `drain.rs` waits for the drain and ends it. The rules, pair by pair, are in
//! docs/reference/write-policies.md ("Switching while serving"); in short:
//!
//! 1. The switch stores the new policy in the policy word (new requests go through it at
//!    once), with the former policy as `drain` while a drain is owed or while the old
//!    policy's FLUSHes may still wait for closed epochs, and waits for every request that
//!    read the old policy (`PolicyCell::quiesce`).
//! 2. Into write-back persist, it then commits a checkpoint of every dirty block's newest
//!    version with a superblock saying write-back persist, *before* any barrier of the new
//!    policy commits (it holds the journal cursor, `persist`, from before the store until the
//!    checkpoint is durable): the journal and checkpoint exist and are current before the
//!    first write-back-persist FLUSH or FUA write is acknowledged. The old policy's FLUSHes
//!    are done by then, so the checkpoint holds nothing they put on backing.
//! 3. Out of write-back persist, the superblock keeps saying write-back persist (with the new
//!    policy and the drain beside it) until the drain ends: every FLUSH and honoured FUA
//!    commits the persisted dirty map, which names only the former policy's versions, and
//!    recovery replays it. Into a write-back policy, the flusher holds the new policy's
//!    epochs back until the drain's commit, so recovery never replays an old version over
//!    newer data of those epochs.
//! 4. Out of ordered write-back, backing still receives its epochs in order: write-through
//!    and write-around requests wait for the drain before they go to backing; a write-back
//!    policy writes as ordered write-back does (holds on an epoch for what goes to backing
//!    directly) until the drain ends.
//! 5. Out of write-back flush, ordered or unsafe write-back into write-through or
//!    write-around, a FLUSH waits for the drained epochs as write-back flush does, and a write
//!    to a block that is still dirty is written through after the flusher's copy landed
//!    (`io/through.rs`).
//!
//! Nothing else changes the policy word, so one switch runs at a time (`Inner::switch`), and
//! a switch whose drain has not ended refuses another (or, to the same policy, waits for it).

use crate::core::{Cursor, Inner};
use crate::error::EngineError;
use crate::layout::WriteMode;
use crate::state::Drain;
use crate::wb::barrier::write_checkpoint;
use crate::write_policy::{refused_on_volatile, Policy};

/// How a switch began.
pub(crate) enum Begun {
    /// It is complete (nothing to drain).
    Done,
    /// Its drain runs (`drain.rs` ends it): `total` dirty versions to write back.
    Draining { total: u64 },
}

/// The superblock's record of a policy: `write_mode` (whose crash rules apply),
/// `live_mode`, `draining`.
pub(super) fn record(
    inner: &Inner,
    write_mode: WriteMode,
    live: Option<WriteMode>,
    draining: Option<WriteMode>,
) -> Result<(), EngineError> {
    let mut sb = inner.superblock.lock();
    let mut next = sb.clone();
    next.write_mode = write_mode;
    next.live_mode = live;
    next.draining = draining;
    if next == *sb {
        return Ok(());
    }
    next.sequence += 1;
    next.write(inner.cache.as_ref())?;
    *sb = next;
    Ok(())
}

/// Why the switch from `from` to `target` cannot happen now, if it cannot.
fn refusal(inner: &Inner, target: WriteMode, batch_sieve: bool) -> Option<String> {
    if inner.cache.volatile() {
        if let Some(why) = refused_on_volatile(target) {
            return Some(format!("{target} on a memory cache: {why}"));
        }
    }
    if batch_sieve && target.is_write_back() {
        return Some(format!(
            "{target}: a discrete sieve replaces the cache's contents at each epoch's end, \
             which dirty blocks cannot follow; change the admission sieve first (at a restart)"
        ));
    }
    let st = inner.state.lock();
    if st.closing || st.stop {
        return Some("the engine is shutting down".into());
    }
    if inner.stripes.is_poisoned() {
        return Some(crate::stripes::poisoned_error().to_string());
    }
    None
}

/// Store `p` in a new phase and wait for the requests of the old one. Fails only when a
/// shutdown begins meanwhile.
fn store_and_quiesce(inner: &Inner, p: Policy) -> Result<(), EngineError> {
    let parity = inner.policy.store_new_phase(p);
    let quiet = inner.policy.quiesce(parity, || {
        let st = inner.state.lock();
        st.closing || st.stop
    });
    if quiet {
        Ok(())
    } else {
        Err(EngineError::ShutDown)
    }
}

/// Begin the switch to `target` (see the module comment). `batch_sieve`: a discrete sieve's
/// batch mover runs. The flusher runs (the caller started it).
pub(crate) fn begin(
    inner: &Inner,
    target: WriteMode,
    batch_sieve: bool,
) -> Result<Begun, EngineError> {
    let _switch = inner.switch.lock();
    let cur = inner.policy.load();
    if let Some(from) = cur.drain {
        if target == cur.mode {
            // The drain of an earlier call (which returned with an error) still runs.
            let total = inner.state.lock().drain_left();
            return Ok(Begun::Draining { total });
        }
        return Err(EngineError::Refused(format!(
            "the switch from {from} to {} is still writing back {from}'s dirty blocks: wait \
             for it (set {} again), then switch",
            cur.mode, cur.mode
        )));
    }
    let from = cur.mode;
    if target == from {
        return Ok(Begun::Done);
    }
    if super::volume_settings::any_own_write_policy(inner) {
        return Err(EngineError::Refused(
            "a volume has a write policy of its own, which runs as a drain of the cache-wide \
             one: set it back to the cache-wide policy first"
                .into(),
        ));
    }
    if let Some(why) = refusal(inner, target, batch_sieve) {
        return Err(EngineError::Refused(why));
    }
    use WriteMode::*;
    if target == WriteBackPersist {
        return into_persist(inner, from);
    }
    if from == WriteBackPersist {
        return out_of_persist(inner, target);
    }
    if !from.is_write_back() {
        // From write-through or write-around: nothing dirty, nothing to drain. Their writes
        // still in flight never meet a dirty block unawares (`io/through.rs`).
        record(inner, target, None, None)?;
        store_and_quiesce(inner, Policy::plain(target))?;
        return Ok(Begun::Done);
    }
    if !target.is_write_back() || from == OrderedWriteBack {
        // Write-back flush, ordered or unsafe write-back into write-through or write-around,
        // or ordered write-back into write-back flush or unsafe write-back: a drain.
        record(inner, target, None, Some(from))?;
        inner.state.lock().switch_drain = Drain::Starting;
        store_and_quiesce(inner, Policy { mode: target, drain: Some(from) })?;
        let (_, total) = inner.state.lock().begin_drain(false, false, false);
        inner.cv.notify_all();
        return Ok(Begun::Draining { total });
    }
    // Write-back flush or unsafe write-back into another of write-back flush, ordered and
    // unsafe write-back: the dirty blocks stay and the flusher goes on; only while the old
    // policy's requests finish, rewrites keep closed epochs' versions (a write-back-flush
    // FLUSH in flight waits for them).
    record(inner, target, None, None)?;
    store_and_quiesce(inner, Policy { mode: target, drain: Some(from) })?;
    inner.policy.store_same_phase(Policy::plain(target));
    Ok(Begun::Done)
}

/// Into write-back persist from `from` (see the module comment, 2). Ordered write-back's
/// epochs then drain in order (4).
fn into_persist(inner: &Inner, from: WriteMode) -> Result<Begun, EngineError> {
    // A request of the phase in force may still run a policy that persists (the end of an
    // earlier switch out of write-back persist drops its drain within the phase), and its
    // barrier takes the journal cursor: wait for those requests before holding the cursor,
    // or the quiesce below would wait for a request that waits for the cursor.
    store_and_quiesce(inner, inner.policy.load())?;
    let mut cur = inner.persist.lock();
    let drains = from == WriteMode::OrderedWriteBack;
    {
        let mut st = inner.state.lock();
        st.persist_tracking = true;
        if drains {
            st.switch_drain = Drain::Starting;
        }
    }
    // A former write-back policy's FLUSHes in flight still need closed epochs' versions.
    let keep = from.is_write_back().then_some(from);
    store_and_quiesce(inner, Policy { mode: WriteMode::WriteBackPersist, drain: keep })?;
    let entries = {
        let mut st = inner.state.lock();
        st.persist_all();
        st.persisted_entries()
    };
    let generation = {
        let mut sb = inner.superblock.lock();
        // Every later superblock (checkpoint commits, a clean stop) says so too.
        sb.write_mode = WriteMode::WriteBackPersist;
        sb.live_mode = None;
        sb.draining = drains.then_some(from);
        sb.checkpoint_generation.max(cur.generation) + 1
    };
    let committed = write_checkpoint(inner, &entries, generation);
    match &committed {
        Ok(()) => {
            *cur = Cursor {
                active: true,
                next_block: 0,
                base: generation,
                generation,
                need_checkpoint: false,
            }
        }
        // The policy is in force: every barrier now tries the checkpoint first, and fails
        // until one is durable (nothing is acknowledged that the device does not hold).
        Err(_) => {
            cur.active = true;
            cur.need_checkpoint = true;
            cur.generation = cur.generation.max(generation);
        }
    }
    drop(cur);
    let begun = if drains {
        let (_, total) = inner.state.lock().begin_drain(true, false, false);
        inner.cv.notify_all();
        Begun::Draining { total }
    } else {
        inner.policy.store_same_phase(Policy::plain(WriteMode::WriteBackPersist));
        Begun::Done
    };
    committed.map_err(|e| {
        EngineError::Io(std::io::Error::other(format!(
            "now in write-back-persist, but its first checkpoint could not be written (FLUSH \
             fails until one is): {e}"
        )))
    })?;
    Ok(begun)
}

/// Out of write-back persist into `target` (see the module comment, 3).
fn out_of_persist(inner: &Inner, target: WriteMode) -> Result<Begun, EngineError> {
    let persist = Some(WriteMode::WriteBackPersist);
    record(inner, WriteMode::WriteBackPersist, Some(target), persist)?;
    inner.state.lock().switch_drain = Drain::Starting;
    store_and_quiesce(inner, Policy { mode: target, drain: persist })?;
    let (_, total) = inner.state.lock().begin_drain(true, true, target.is_write_back());
    inner.cv.notify_all();
    Ok(Begun::Draining { total })
}
