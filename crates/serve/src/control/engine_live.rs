//! What the control commands ask of the engine while it serves, in one place: flush every
//! dirty block now, switch the write policy, replace the admission sieve, retune write-back,
//! change the replacement policy. Each function is the whole contract the control plane
//! relies on, written as rules; the engine's live-change API carries them out.
//!
//! Until the engine offers a change, the function refuses it with the reason, and the
//! command reports that the setting needs a restart.

use ember_engine::{Engine, WriteMode, WritebackConfig};
use ember_policy::replacement::Kind;
use ember_policy::Admission;

/// The engine cannot make this change while serving.
fn not_live(what: &str) -> anyhow::Error {
    anyhow::anyhow!("{what} cannot change while serving in this build: restart with the new value")
}

/// Write back every block dirty at the call (of volume `volume`, or of every volume) and
/// return the number written once they are durable on backing (backing synced).
///
/// - MUST call `progress(done, total)` as blocks land, `total` the dirty blocks at the call.
/// - MUST return an error in bounded time when backing fails writes or the server shuts
///   down, leaving the blocks not written dirty.
/// - MUST NOT be slowed by a background flush-rate cap.
pub(crate) fn flush_all(
    engine: &Engine,
    volume: Option<&str>,
    progress: &mut dyn FnMut(u64, u64),
) -> anyhow::Result<u64> {
    let _ = (engine, volume, progress);
    Err(not_live("an on-demand flush"))
}

/// Switch the write policy to `target` while serving.
///
/// - MUST send new writes through `target` at once; leaving a write-back policy MUST then
///   drain the dirty blocks, calling `progress(done, total)` as they land, and MUST return
///   once the switch is complete (or fail in bounded time, the remaining blocks still
///   dirty).
/// - MUST refuse, with the reason, a switch that cannot happen live.
pub(crate) fn set_write_mode(
    engine: &Engine,
    target: WriteMode,
    progress: &mut dyn FnMut(u64, u64),
) -> anyhow::Result<()> {
    let _ = progress;
    if engine.write_mode() == target {
        return Ok(());
    }
    Err(not_live("the write policy"))
}

/// Replace the admission sieve by `admission` (a discrete sieve with its epoch
/// `batch_epoch_ns`). The new sieve starts with no counts.
pub(crate) fn set_admission(
    engine: &Engine,
    admission: Box<dyn Admission>,
    batch_epoch_ns: Option<u64>,
) -> anyhow::Result<()> {
    let _ = (engine, admission, batch_epoch_ns);
    Err(not_live("the admission sieve"))
}

/// Retune write-back: dirty thresholds, epochs in flight, the flusher's order. A threshold
/// that does not fit the cache MUST be refused with nothing changed.
pub(crate) fn set_writeback(engine: &Engine, writeback: WritebackConfig) -> anyhow::Result<()> {
    let _ = (engine, writeback);
    Err(not_live("the write-back tuning"))
}

/// Change the replacement policy to `kind`, keeping the cache's contents; a policy that
/// cannot take over the resident blocks MUST be refused with the reason.
pub(crate) fn set_replacement(engine: &Engine, kind: Kind) -> anyhow::Result<()> {
    let _ = (engine, kind);
    Err(not_live("the replacement policy"))
}
