//! Replacing a failed cache device while serving (`ember ctl replace-cache`): back to caching
//! without a restart (docs/reference/degraded.md, "Back to caching").
//!
//! The core keeps its one device behind a slot (`device/watched.rs`) that only a degraded
//! cache refills, and keeps its geometry: the new device is laid out with the failed one's
//! geometry and volume table, so every size the core resolved at open (the map's capacity,
//! the dirty limits, the cleaning target) still holds, and the map starts empty. A larger
//! device serves the same number of blocks until a restart reformats it.
//!
//! The steps, each before the next:
//!
//! 1. Refused unless the cache is degraded, the device is at least the failed one's layout
//!    long, and (without `format`) it holds no ember cache.
//! 2. The new device is laid out: first empty and clean, as a format leaves it, then with a
//!    superblock that names the running volume table and write policy, the clean flag clear
//!    (in service) and, under write-back persist, an empty checkpoint; synced. Nothing is
//!    changed in the engine yet.
//! 3. The gate is paused: requests that arrive wait; the ones in flight against backing
//!    finish (at most [`DRAIN_WAIT`]), and the flusher lets go of every block.
//! 4. The record of the cache as it will be (healthy, the lost list unchanged, the new
//!    device) goes to the new sink, which MUST return only once it is durable; a failure
//!    changes nothing. From here a crash restarts on the new device.
//! 5. The new device goes into the slot, the map is forgotten, the superblock and the
//!    journal cursor are the new device's, the health is healthy; the gate resumes, and
//!    new requests see the new, cold cache.
//!
//! The lost list is not touched: its blocks still read EIO until `clear-lost`, and a volume
//! refused at start stays refused. Nothing of the failed device is read again: its slot was
//! refused every I/O since it was given up, and it is dropped at the swap.
//!
//! Lock order: `volume_change` → `switch` → `health.sink` → `persist` → `superblock` and
//! `state` (one at a time), as `core.rs` lists them; the gate's pause is taken after
//! `switch` and released before returning, with no request inside.

use crate::core::{Cursor, Inner};
use crate::device::{io_context, Device};
use crate::error::EngineError;
use crate::health::DegradedSink;
use crate::io::{degraded_record, settle};
use crate::layout::superblock::{FLAG_CLEAN, NO_CHECKPOINT};
use crate::layout::{unix_now, Checkpoint, LayoutError, Superblock, WriteMode};
use crate::write_policy::{refused_on_volatile, Policy};
use serde::Serialize;
use std::sync::Arc;
use std::time::{Duration, Instant};
use uuid::Uuid;

/// How long the requests in flight (and the flusher's batch) may take to finish before the
/// replacement gives up, changing nothing.
pub const DRAIN_WAIT: Duration = Duration::from_secs(10);

/// What a replacement of the cache device did.
#[derive(Clone, Debug, Serialize)]
pub struct ReplaceReport {
    /// The device given up, as the engine described it.
    pub old: String,
    /// The device in service now.
    pub new: String,
    /// Bytes of the new device.
    pub device_bytes: u64,
    /// Cache blocks it serves (the failed device's count).
    pub data_blocks: u64,
    /// Bytes of the new device past the layout, unused until a reformat.
    pub unused_bytes: u64,
    /// Blocks still on the lost list (unchanged by the replacement).
    pub lost_blocks: u64,
    /// The new device held an ember cache and was reformatted (`format`).
    pub reformatted: bool,
    /// How long the replacement took.
    pub seconds: f64,
    /// Bonfire's warmup: what the new cache preloads, or why nothing.
    pub warmup: Option<String>,
}

/// Replace the failed cache device of `inner` with `device` (see the module comment).
pub(crate) fn replace(
    inner: &Inner,
    device: Arc<dyn Device>,
    format: bool,
    sink: DegradedSink,
) -> Result<ReplaceReport, EngineError> {
    let start = Instant::now();
    let _change = inner.volume_change.lock();
    let _switch = inner.switch.lock();
    settle(inner);
    if !inner.health.is_degraded() {
        return Err(EngineError::Refused(format!(
            "the cache device {} is healthy: a device is replaced only once it was given up \
             (degraded mode); to move to another device, stop the server and start it on the \
             new one",
            inner.cache.describe()
        )));
    }
    let g = inner.geometry;
    let old = inner.cache.describe();
    let new = device.describe();
    if device.size() < g.end() {
        return Err(EngineError::Refused(format!(
            "{new} has {} bytes; the cache's layout ({} blocks of {} bytes with its \
             superblocks, checkpoints, journal and warmup log) needs {}",
            device.size(),
            g.data_blocks,
            g.block_size,
            g.end()
        )));
    }
    let policy = inner.policy.load();
    if device.volatile() {
        if let Some(why) = refused_on_volatile(policy.mode) {
            return Err(EngineError::Refused(format!("{} on {new}: {why}", policy.mode)));
        }
    }
    let reformatted = match Superblock::read(device.as_ref()) {
        Ok(_) if !format => {
            return Err(EngineError::Refused(format!(
                "{new} holds an ember cache; give --format to reformat it (what it holds is \
                 forgotten)"
            )))
        }
        Ok(_) => true,
        Err(LayoutError::NotFormatted { .. }) => false,
        Err(LayoutError::Io(e)) => return Err(EngineError::Io(e)),
        Err(_) if !format => {
            return Err(EngineError::Refused(format!(
                "{new} looks like an ember cache (its superblock is unreadable by this \
                 version); give --format to reformat it"
            )))
        }
        Err(_) => true,
    };
    let (sb, cursor) = lay_out(inner, device.as_ref(), policy.mode)?;

    if !inner.gate.pause_and_drain(DRAIN_WAIT) {
        inner.gate.resume();
        return Err(EngineError::Refused(format!(
            "requests in flight did not finish within {} s (a backing or the failed device \
             that hangs?); nothing was changed",
            DRAIN_WAIT.as_secs()
        )));
    }
    let swapped = swap(inner, &device, sb, cursor, policy, sink);
    inner.gate.resume();
    swapped?;
    let lost_blocks = inner.health.lost.lock().total();
    Ok(ReplaceReport {
        old,
        new,
        device_bytes: device.size(),
        data_blocks: g.data_blocks,
        unused_bytes: device.size() - g.end(),
        lost_blocks,
        reformatted,
        seconds: start.elapsed().as_secs_f64(),
        warmup: None,
    })
}

/// Lay the new device out for the running cache: its superblock (the running volume table
/// and policy, in service) and, under write-back persist, an empty checkpoint the journal
/// extends. Returns the superblock and the journal cursor to run with.
fn lay_out(
    inner: &Inner,
    device: &dyn Device,
    mode: WriteMode,
) -> Result<(Superblock, Cursor), EngineError> {
    let g = inner.geometry;
    let mut sb = inner.superblock.lock().clone();
    sb.sequence = 2;
    sb.cache_uuid = Uuid::new_v4();
    sb.device_size = device.size();
    sb.flags &= !FLAG_CLEAN;
    sb.write_mode = mode;
    sb.live_mode = None;
    sb.draining = None;
    sb.format_time = unix_now();
    sb.last_shutdown = 0;
    sb.open_count = 1;
    sb.checkpoint_slot = NO_CHECKPOINT;
    sb.checkpoint_generation = 0;
    sb.checkpoint_entries = 0;
    sb.checkpoint_crc = 0;
    // The volume records are written to the new device below: nothing of the failed
    // device's records area is named until then.
    sb.records = Default::default();
    sb.encode()?;
    if g.warmup_len > 0 {
        // No warmup log of another cache is read from the new device's region.
        let zero = vec![0u8; g.block_size as usize];
        device.write_at(g.warmup_offset, &zero).map_err(|e| {
            let len = zero.len() as u64;
            io_context(device, "clearing the warmup log", g.warmup_offset, len, e)
        })?;
    }
    // First an empty cache as `ember cache format` leaves one (a crash here leaves a fresh
    // device), then the superblock of the cache in service.
    let mut fresh = sb.clone();
    fresh.flags |= FLAG_CLEAN;
    crate::admin::lay_out(device, &fresh)?;
    sb.sequence = fresh.sequence + 1;
    let mut cursor = Cursor::default();
    if mode == WriteMode::WriteBackPersist {
        // As at open: the journal starts a new cycle after an (empty) checkpoint.
        let generation = 1;
        sb.checkpoint_crc = Checkpoint::write(device, &g, 0, generation, &[])?;
        device.sync().map_err(|e| io_context(device, "sync after checkpoint", 0, 0, e))?;
        sb.checkpoint_slot = 0;
        sb.checkpoint_generation = generation;
        cursor = Cursor {
            active: true,
            next_block: 0,
            base: generation,
            generation,
            need_checkpoint: false,
        };
    }
    // The running volumes' records (backings, own settings), then the superblock naming them.
    sb.write_records(device)?;
    sb.write(device)?;
    Ok((sb, cursor))
}

/// Steps 4 and 5 of the module comment, with the gate paused and drained.
fn swap(
    inner: &Inner,
    device: &Arc<dyn Device>,
    sb: Superblock,
    cursor: Cursor,
    policy: Policy,
    sink: DegradedSink,
) -> Result<(), EngineError> {
    {
        // The flusher's batch in flight (read from the device before it failed) ends first.
        let deadline = Instant::now() + DRAIN_WAIT;
        let mut st = inner.state.lock();
        while st.busy() {
            if Instant::now() >= deadline {
                return Err(EngineError::Refused(format!(
                    "the flusher's batch did not finish within {} s; nothing was changed",
                    DRAIN_WAIT.as_secs()
                )));
            }
            inner.cv.wait_for(&mut st, Duration::from_millis(10));
        }
    }
    let mut slot = inner.health.sink.lock();
    let mut rec = degraded_record(inner);
    rec.degraded = false;
    rec.reason.clear();
    rec.since_unix_ms = 0;
    rec.cache = device.describe();
    sink(&rec).map_err(|e| {
        EngineError::Io(std::io::Error::new(
            e.kind(),
            format!("recording the replacement outside the cache device: {e}; nothing was changed"),
        ))
    })?;
    *slot = Some(sink);
    drop(slot);
    // From here the record says the new device is in service: make it so.
    let mut cur = inner.persist.lock();
    // The failed device is dropped (closed) here.
    drop(inner.watched.replace(device.clone()));
    *inner.superblock.lock() = sb;
    {
        let mut st = inner.state.lock();
        st.forget_all();
        if policy.mode == WriteMode::WriteBackPersist {
            st.persist_all();
        } else {
            st.persist_off();
        }
        inner.cv.notify_all();
    }
    *cur = cursor;
    drop(cur);
    inner.policy.store_same_phase(Policy::plain(policy.mode));
    // A switch's drain the failure left pending is over (nothing is dirty): its thread
    // exits, and the new superblock names no drain.
    inner.health.recover();
    Ok(())
}

#[cfg(test)]
#[path = "replace_tests.rs"]
mod tests;
