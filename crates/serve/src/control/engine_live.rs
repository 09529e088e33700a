//! What the control commands ask of the engine while it serves, in one place: flush every
//! dirty block now, switch the write policy, replace the admission sieve, retune write-back,
//! change the replacement policy, set the sequential cutoff, set cleaning control, set a volume's
//! own settings. Each function is the whole contract the control plane
//! relies on, written as rules; the engine's live-change API carries them out.
//!
//! A change the engine cannot make live (a discrete sieve, a replacement policy that cannot
//! take over the resident blocks, a write-back policy on a memory cache) is refused with the
//! engine's reason, and the command reports that the setting needs a restart.

use ember_engine::{Engine, WriteMode, WritebackConfig};
use ember_policy::admission::SieveSpec;
use ember_policy::replacement::Spec;

/// Write back every block dirty at the call and return the number written once they are
/// durable on backing (backing synced). The engine flushes every volume: naming `volume`
/// flushes the others too, which keeps the promise (what was dirty at the call is durable).
/// The volumes share the cache's epochs and the flusher writes them back oldest first
/// across volumes, so one volume's dirty blocks are not written back apart from the others'.
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
    let _ = volume;
    let report = engine.flush_all(&mut |p| progress(p.done, p.total))?;
    Ok(report.blocks)
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
    engine.set_write_mode(target, &mut |p| progress(p.done, p.total))?;
    Ok(())
}

/// Replace the admission sieve by the one `spec` builds. The new sieve starts with no
/// counts; a discrete (epoch) sieve is refused: it owns the cache's contents epoch by epoch
/// and is set when ember starts.
pub(crate) fn set_admission(engine: &Engine, spec: &SieveSpec) -> anyhow::Result<()> {
    let sieve = spec.build()?;
    engine.set_admission(sieve)?;
    Ok(())
}

/// Retune write-back: dirty thresholds, epochs in flight, the flusher's order. A threshold
/// that does not fit the cache MUST be refused with nothing changed.
pub(crate) fn set_writeback(engine: &Engine, writeback: WritebackConfig) -> anyhow::Result<()> {
    engine.set_writeback(&writeback)?;
    Ok(())
}

/// Put a sequential cutoff in force: from the next client access a miss continuing a
/// stream past its threshold is not allocated; nothing cached or dirty changes.
pub(crate) fn set_seq_cutoff(engine: &Engine, settings: ember_engine::SeqCutoffSettings) {
    engine.set_seq_cutoff(settings);
}

/// Put cleaning control in force: the cap on background cleaning and the idle policy,
/// from the flusher's next background batch. A dirty target that does not fit the cache
/// MUST be refused with nothing changed; what someone waits for (a FLUSH, `ctl flush`, a
/// switch's drain) MUST NOT be slowed by it.
pub(crate) fn set_cleaning(
    engine: &Engine,
    cleaning: &ember_engine::CleaningConfig,
) -> anyhow::Result<()> {
    engine.set_cleaning(cleaning).map_err(|e| match e {
        ember_engine::EngineError::DirtyLimit(e) => {
            anyhow::anyhow!(crate::writeback::dirty_limit_message(&e))
        }
        e => anyhow::Error::from(e),
    })?;
    Ok(())
}

/// Change the replacement policy to `kind`, keeping the cache's contents; a policy that
/// cannot take over the resident blocks MUST be refused with the reason.
pub(crate) fn set_replacement(engine: &Engine, spec: Spec) -> anyhow::Result<()> {
    engine.set_replacement(spec)?;
    Ok(())
}

/// Put `own`, a volume's own settings, in force, each unset one as the cache-wide value:
/// its write policy, a fresh sieve of its own, its sequential cutoff.
///
/// - MUST refuse, with the engine's reason and nothing of that setting changed, a write
///   policy the volume cannot run apart from the cache (a write-back one, any under ordered
///   or unsafe write-back, any while a switch drains) and a discrete sieve.
pub(crate) fn set_volume_own(
    engine: &Engine,
    own: &crate::config::VolumeOwn,
) -> anyhow::Result<()> {
    let name = own.name.as_str();
    let sieve = own.sieve.as_ref().map(SieveSpec::build).transpose()?;
    engine.set_volume_write_mode(name, own.write_mode)?;
    engine.set_volume_admission(name, sieve)?;
    engine.set_volume_seq_cutoff(name, own.seq_cutoff)?;
    set_volume_shares(engine, own)
}

/// Put `own`'s share of the cache in force (none: no share), in blocks of the cache.
///
/// - MUST refuse, with nothing changed, limits that do not fit, and a share when the
///   replacement policy was not built under shares (at start).
pub(crate) fn set_volume_shares(
    engine: &Engine,
    own: &crate::config::VolumeOwn,
) -> anyhow::Result<()> {
    let stats = engine.stats();
    let limits = own.share_limits(stats.capacity_blocks, u64::from(stats.block_size));
    let had = engine.volume_settings(&own.name)?.max_share_blocks.is_some();
    if limits.is_some() || had {
        engine.set_volume_shares(&own.name, limits)?;
    }
    Ok(())
}
