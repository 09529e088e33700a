//! Is a backing volume what the cache last saw? Checked at open: a warm
//! start keeps a volume's clean cached blocks only if its backing is the same medium in the
//! same state as at the last clean shutdown (its [`Identity`]) and its first block has the
//! same CRC (the fingerprint); dirty blocks are never written over a backing that changed.

use crate::device::{io_context, Device, Identity};
use crate::error::EngineError;
use crate::layout::VolumeRecord;

/// Why a volume's cached blocks of the last run cannot be trusted now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Stale {
    /// The backing was replaced or modified while ember was stopped: clean blocks are
    /// dropped, and dirty ones refuse the start (they would mix with whatever changed).
    Changed(String),
    /// Whether it changed cannot be told (not identifiable, or nothing recorded): clean
    /// blocks are dropped; dirty blocks are acknowledged writes only the cache holds, kept.
    Unverifiable(String),
}

/// After a clean shutdown: is `backing` unchanged since `rec` was written?
pub(crate) fn check_clean(
    backing: &dyn Device,
    rec: &VolumeRecord,
    block_size: u32,
) -> Result<Option<Stale>, EngineError> {
    let id = backing.identity().map_err(|e| io_context(backing, "identity", 0, 0, e))?;
    let (medium, state) = match id {
        Identity::Unknown(why) => {
            return Ok(Some(Stale::Unverifiable(format!("{}: {why}", backing.describe()))))
        }
        Identity::Known { medium, state } => (medium, state),
    };
    if rec.backing_state == 0 {
        return Ok(Some(Stale::Unverifiable(format!(
            "no identity of {} was recorded at the last shutdown",
            backing.describe()
        ))));
    }
    if medium != rec.backing_medium {
        return Ok(Some(Stale::Changed(format!(
            "{} is another file or device than at the last shutdown",
            backing.describe()
        ))));
    }
    if state != rec.backing_state {
        return Ok(Some(Stale::Changed(format!(
            "{} was modified: its size, modification or change time differ",
            backing.describe()
        ))));
    }
    if rec.fingerprint != 0 && fingerprint(backing, block_size)? != rec.fingerprint {
        return Ok(Some(Stale::Changed(format!(
            "the first block of {} differs",
            backing.describe()
        ))));
    }
    Ok(None)
}

/// After a crash (the engine itself wrote the backing since, so only the medium can be
/// compared): is `backing` another medium than the one the crashed run opened?
pub(crate) fn check_replaced(
    backing: &dyn Device,
    rec: &VolumeRecord,
) -> Result<Option<String>, EngineError> {
    let id = backing.identity().map_err(|e| io_context(backing, "identity", 0, 0, e))?;
    Ok(match id {
        Identity::Known { medium, .. }
            if rec.backing_medium != 0 && medium != rec.backing_medium =>
        {
            Some(format!("{} is another file or device than the one it ran on", backing.describe()))
        }
        _ => None,
    })
}

/// CRC-32C of a backing volume's first block (or all of it, if smaller); never 0, which
/// means "no fingerprint".
pub(crate) fn fingerprint(dev: &dyn Device, block_size: u32) -> Result<u32, EngineError> {
    let n = (block_size as u64).min(dev.size()) as usize;
    let mut b = vec![0u8; n];
    dev.read_at(0, &mut b).map_err(|e| io_context(dev, "fingerprint read", 0, n as u64, e))?;
    Ok(crc32c::crc32c(&b).max(1))
}
