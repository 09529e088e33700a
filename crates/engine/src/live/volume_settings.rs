//! The settings a volume may hold apart from the cache-wide ones, while serving or from the
//! configuration at start: its write policy, its admission sieve and its sequential cutoff.
//! Each unset one falls back to the cache-wide value, and follows it when that changes.
//!
//! - *Write policy*: write-through or write-around, or the cache-wide policy. The journal,
//!   the epochs and the flusher are the cache's, so there is one write-back policy per cache;
//!   a volume may leave it for a policy that writes backing directly. Its requests then run
//!   as during a switch out of the cache-wide policy (`Policy::for_volume`): crash-safe by
//!   the same rules. Refused under ordered and unsafe write-back (their promise is about the
//!   order of every write of the cache), while a switch drains, and, in turn, a cache-wide
//!   switch is refused while a volume has a write policy of its own (`live/switch.rs`).
//! - *Admission*: a per-miss sieve of its own (`ember_policy::admission::VolumeSieves`),
//!   fresh, counting that volume's accesses only. Discrete sieves stay cache-wide.
//! - *Shares*: a minimum and a maximum of the clean blocks the replacement policy holds
//!   (`ember_policy::shares`); the first share set while serving puts the policy under
//!   shares, the last one cleared takes it out (both under the state lock, keeping the
//!   cached blocks). Dirty blocks live outside the policy and are not counted.
//! - *Sequential cutoff*: policy and thresholds of its own
//!   (`ember_policy::seq_cutoff::SeqCutoff::set_volume_config`); the stream count is the
//!   cache's.

use super::seq_cutoff::SeqCutoffSettings;
use crate::clock::now_ns;
use crate::core::Inner;
use crate::error::EngineError;
use crate::layout::WriteMode;
use crate::state::CacheState;
use crate::volume_info::VolumeInfo;
use ember_policy::admission::Sieve;
use ember_policy::seq_cutoff::SeqCutoffConfig;
use ember_policy::shares::{ShareLimits, Shares};
use serde::Serialize;
use std::sync::Arc;

/// A volume's own settings (`None`: the cache-wide one).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct VolumeSettings {
    /// Its own write policy.
    pub write_policy: Option<WriteMode>,
    /// The name of its own admission sieve.
    pub admission: Option<String>,
    /// Its own sequential cutoff.
    pub seq_cutoff: Option<SeqCutoffSettings>,
    /// Its share of the cache: at or under this many clean blocks, no other volume's
    /// allocation evicts its blocks.
    pub min_share_blocks: Option<u64>,
    /// Its share of the cache: at this many clean blocks, its allocations evict its own.
    pub max_share_blocks: Option<u64>,
    /// Its clean blocks in the replacement policy, as the shares count them (with shares).
    pub share_occupancy: Option<u64>,
}

fn served(inner: &Inner, name: &str) -> Result<Arc<VolumeInfo>, EngineError> {
    inner.volumes.by_name(name).ok_or_else(|| {
        let names: Vec<String> = inner.volumes.iter().map(|v| v.name.clone()).collect();
        EngineError::Invalid(format!("no volume {name:?} (volumes: {})", names.join(", ")))
    })
}

/// The own settings of volume `name`.
pub(crate) fn get(inner: &Inner, name: &str) -> Result<VolumeSettings, EngineError> {
    let v = served(inner, name)?;
    Ok(of(inner, &v))
}

/// The own settings of the served volume `v`.
pub(crate) fn of(inner: &Inner, v: &VolumeInfo) -> VolumeSettings {
    of_locked(&inner.state.lock(), inner.block_size(), v)
}

/// [`of`] under the state lock, `st`, with blocks of `bs` bytes.
pub(crate) fn of_locked(st: &CacheState, bs: u64, v: &VolumeInfo) -> VolumeSettings {
    VolumeSettings {
        write_policy: v.own_mode(),
        admission: st.admission.has_own(v.id).then(|| st.admission.name_of(v.id).to_string()),
        seq_cutoff: st.seq_cutoff.volume_config(v.id).map(|c| SeqCutoffSettings {
            policy: c.policy,
            read_bytes: c.read_blocks * bs,
            write_bytes: c.write_blocks * bs,
            streams: c.streams,
        }),
        min_share_blocks: st
            .replacement_shares()
            .and_then(|s| s.limits(v.id))
            .map(|l| l.min_blocks),
        max_share_blocks: st
            .replacement_shares()
            .and_then(|s| s.limits(v.id))
            .map(|l| l.max_blocks),
        share_occupancy: st.replacement_shares().map(|s| s.occupancy(v.id)),
    }
}

/// True if some served volume has a write policy of its own.
pub(crate) fn any_own_write_policy(inner: &Inner) -> bool {
    inner.volumes.iter().any(|v| v.own_mode().is_some())
}

/// Give volume `name` the write policy `mode` of its own (`None`, or the cache-wide policy:
/// the cache-wide one again). See the module comment for what is refused. Returns the own
/// policy it had.
pub(crate) fn set_write_mode(
    inner: &Inner,
    name: &str,
    mode: Option<WriteMode>,
) -> Result<Option<WriteMode>, EngineError> {
    let v = served(inner, name)?;
    // One change at a time with the cache-wide switches.
    let _switch = inner.switch.lock();
    let cache = inner.policy.load();
    let old = v.own_mode();
    let Some(mode) = mode.filter(|&m| m != cache.mode || cache.drain.is_some()) else {
        v.set_own_mode(None);
        return Ok(old);
    };
    if let Some(from) = cache.drain {
        return Err(EngineError::Refused(format!(
            "the switch from {from} to {} is still writing back {from}'s dirty blocks: set a \
             volume's write policy after it",
            cache.mode
        )));
    }
    if mode.is_write_back() {
        return Err(EngineError::Refused(format!(
            "{mode}: the write-back journal, epochs and flusher are the cache's, so a volume \
             may run write-through, write-around or the cache-wide policy ({})",
            cache.mode
        )));
    }
    if matches!(cache.mode, WriteMode::OrderedWriteBack | WriteMode::UnsafeWriteBack) {
        return Err(EngineError::Refused(format!(
            "{}: its promise is about every write of the cache, so no volume may run another \
             write policy",
            cache.mode
        )));
    }
    v.set_own_mode(Some(mode));
    Ok(old)
}

/// Give volume `name` a fresh admission sieve of its own (`None`: the cache-wide one).
pub(crate) fn set_admission(
    inner: &Inner,
    name: &str,
    sieve: Option<Sieve>,
) -> Result<(), EngineError> {
    let v = served(inner, name)?;
    let new = match sieve {
        None => None,
        Some(Sieve::Continuous(a)) => Some(a),
        Some(Sieve::Discrete(s, _)) => {
            return Err(EngineError::Refused(format!(
                "{}: a discrete sieve moves the whole cache's contents at each epoch's end, so \
                 it is cache-wide",
                s.name()
            )))
        }
    };
    let old = inner.state.lock().admission.set_volume(v.id, new);
    drop(old);
    Ok(())
}

/// Give volume `name` a sequential cutoff of its own (`None`: the cache-wide one); returns
/// its settings now (thresholds rounded up to whole blocks).
pub(crate) fn set_seq_cutoff(
    inner: &Inner,
    name: &str,
    s: Option<SeqCutoffSettings>,
) -> Result<VolumeSettings, EngineError> {
    let v = served(inner, name)?;
    let cfg = s.map(|s| {
        SeqCutoffConfig::from_bytes(s.policy, s.read_bytes, s.write_bytes, inner.block_size())
    });
    inner.state.lock().seq_cutoff.set_volume_config(v.id, cfg);
    Ok(of(inner, &v))
}

/// Give volume `name` the share `limits` of the cache (`None`: none). A replacement policy
/// running without shares is put under them first, under the state lock, with the counts
/// built from the clean blocks it holds ([`CacheState::put_under_shares`]); once no volume
/// has a limit, it runs alone again ([`CacheState::take_out_of_shares`]). Nothing is
/// evicted: later allocations respect the limits. Refused, with nothing changed, when the
/// limits do not fit (min above max, the minimums filling the cache) and when the policy
/// cannot take shares.
pub(crate) fn set_shares(
    inner: &Inner,
    name: &str,
    limits: Option<ShareLimits>,
) -> Result<(), EngineError> {
    let v = served(inner, name)?;
    let refused =
        |e: ember_policy::shares::ShareError| EngineError::Refused(format!("volume {name}: {e}"));
    let mut st = inner.state.lock();
    let mut dropped = None;
    if st.replacement_shares().is_none() {
        let Some(l) = limits else { return Ok(()) };
        // Checked on empty shares first: the policy is wrapped only for limits that fit.
        Shares::new(inner.geometry.data_blocks as usize).set(v.id, Some(l)).map_err(refused)?;
        dropped = st.put_under_shares(now_ns()).map_err(EngineError::Refused)?;
    }
    let Some(shares) = st.replacement_shares_mut() else {
        return Err(EngineError::Refused("the replacement policy runs without shares".into()));
    };
    shares.set(v.id, limits).map_err(refused)?;
    if !shares.is_active() {
        dropped = st.take_out_of_shares(now_ns());
    }
    drop(st);
    drop(dropped);
    Ok(())
}

/// Would [`set_shares`] accept `limits` for volume `name` now (a name not served: as a
/// volume attached next)? Changes nothing.
pub(crate) fn check_shares(
    inner: &Inner,
    name: &str,
    limits: Option<ShareLimits>,
) -> Result<(), EngineError> {
    let mut st = inner.state.lock();
    if limits.is_some() && st.replacement_shares().is_none() && !st.takes_shares() {
        return Err(EngineError::Refused(format!(
            "the replacement policy {} cannot take shares",
            st.replacement_name()
        )));
    }
    let mut shares = st
        .replacement_shares()
        .cloned()
        .unwrap_or_else(|| Shares::new(inner.geometry.data_blocks as usize));
    drop(st);
    let id = match inner.volumes.by_name(name) {
        Some(v) => v.id,
        None => (0u32..)
            .find(|&i| shares.limits(i).is_none() && inner.volumes.iter().all(|v| v.id != i))
            .unwrap_or(0),
    };
    shares.set(id, limits).map_err(|e| EngineError::Refused(format!("volume {name}: {e}")))
}

/// Volume slot `id` left the cache: its share, if any, goes (and with the last one, the
/// policy's shares).
pub(crate) fn forget_share(inner: &Inner, id: u32) {
    let mut st = inner.state.lock();
    let Some(shares) = st.replacement_shares_mut() else { return };
    if shares.limits(id).is_none() || shares.set(id, None).is_err() {
        return;
    }
    let dropped = if shares.is_active() { None } else { st.take_out_of_shares(now_ns()) };
    drop(st);
    drop(dropped);
}

#[cfg(test)]
#[path = "volume_settings_tests.rs"]
mod tests;
