//! Sequential cutoff (Open CAS's `seq-cutoff`, bcache's `sequential_cutoff`, flashcache's
//! `skip_seq_thresh_kb`): a missed block that continues a sequential stream beyond a
//! threshold is not allocated, so a scan (a backup, a `dd`, a table scan) streams past the
//! cache instead of evicting its hot set. A hit is still a hit.
//!
//! Streams are tracked per volume, the last [`DEFAULT_STREAMS`] of each (Open CAS's
//! `OCF_SEQ_CUTOFF_MAX_STREAMS`), at block granularity: a block access continues a stream
//! when it is the block right after the stream's last one, in the same direction (reads and
//! writes are separate streams, as in Open CAS). Any other access starts a new stream, which
//! replaces the volume's least recently continued one ([`table::StreamTable`]). So a reverse
//! or strided access is never counted as sequential, and interleaved streams are each
//! followed as long as no more than the table's size run at once.
//!
//! The policies are Open CAS's ([`CutoffPolicy`]): `always`, `full` (the default: only when
//! the cache is full, so a cold cache still fills from a scan) and `never`. Read and write
//! thresholds are set apart ([`SeqCutoffConfig`]); Open CAS's default threshold is 1 MiB
//! ([`DEFAULT_THRESHOLD_BYTES`]).
//!
//! Rules for a caller (the simulator through [`crate::admission::CutoffAdmission`], the real
//! cache directly):
//! - it MUST call [`SeqCutoff::observe`] once for every client block access, hits included,
//!   in request order (block by block within a request);
//! - on a miss it asks [`SeqCutoff::cuts`] right after observing that access, with the
//!   cache's occupancy, and MUST NOT allocate the block when the answer is true;
//! - accesses that are not a client's (a preload, a DEMOTE) are not observed.
//!
//! A volume may have settings of its own ([`SeqCutoff::set_volume_config`]: policy and
//! thresholds); a volume without them takes the cache-wide ones. The stream count is the
//! cache's for every volume.

mod table;

pub use table::StreamTable;

use crate::Access;
use ember_trace::{key_block, key_volume, Op};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::fmt;
use std::str::FromStr;

/// Streams tracked per volume by default (Open CAS's `OCF_SEQ_CUTOFF_MAX_STREAMS`).
pub const DEFAULT_STREAMS: usize = 128;

/// The default threshold in bytes (Open CAS's default, 1 MiB).
pub const DEFAULT_THRESHOLD_BYTES: u64 = 1 << 20;

/// When the cutoff acts (Open CAS's `seq-cutoff` policies).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CutoffPolicy {
    /// Whenever a stream passes its threshold.
    Always,
    /// Only when the cache is full (every cache block resident): Open CAS's default.
    #[default]
    Full,
    /// Never: the cutoff is off.
    Never,
}

impl CutoffPolicy {
    /// The command-line name.
    pub fn name(self) -> &'static str {
        match self {
            CutoffPolicy::Always => "always",
            CutoffPolicy::Full => "full",
            CutoffPolicy::Never => "never",
        }
    }
}

impl fmt::Display for CutoffPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for CutoffPolicy {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "always" => Ok(CutoffPolicy::Always),
            "full" => Ok(CutoffPolicy::Full),
            "never" => Ok(CutoffPolicy::Never),
            other => Err(format!("sequential cutoff policy {other:?}: always, full or never")),
        }
    }
}

/// The cutoff's settings. Thresholds are in blocks (the caller converts bytes with its
/// block size): a block is cut when its stream already holds at least that many blocks
/// before it. A threshold of 0 turns the cutoff off for that direction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SeqCutoffConfig {
    /// When it acts.
    pub policy: CutoffPolicy,
    /// Read streams: blocks allocated before the cutoff (0: reads never cut).
    pub read_blocks: u64,
    /// Write streams: blocks allocated before the cutoff (0: writes never cut).
    pub write_blocks: u64,
    /// Streams tracked per volume (at least 1).
    pub streams: usize,
}

impl Default for SeqCutoffConfig {
    /// Off: policy `never`, no thresholds.
    fn default() -> Self {
        Self {
            policy: CutoffPolicy::Never,
            read_blocks: 0,
            write_blocks: 0,
            streams: DEFAULT_STREAMS,
        }
    }
}

impl SeqCutoffConfig {
    /// Thresholds of `read_bytes` and `write_bytes` (0: off for that direction) in blocks of
    /// `block_size` bytes, rounded up, under `policy`, with the default stream count.
    pub fn from_bytes(
        policy: CutoffPolicy,
        read_bytes: u64,
        write_bytes: u64,
        block_size: u64,
    ) -> Self {
        let bs = block_size.max(1);
        Self {
            policy,
            read_blocks: read_bytes.div_ceil(bs),
            write_blocks: write_bytes.div_ceil(bs),
            streams: DEFAULT_STREAMS,
        }
    }

    /// True when the cutoff can cut anything.
    pub fn is_active(&self) -> bool {
        self.policy != CutoffPolicy::Never && (self.read_blocks > 0 || self.write_blocks > 0)
    }

    /// The threshold for accesses of `op`, in blocks (0: not cut).
    fn threshold(&self, op: Op) -> u64 {
        match op {
            Op::Read => self.read_blocks,
            Op::Write => self.write_blocks,
        }
    }
}

/// The stream detector and the cutoff decision, over every volume of one cache.
#[derive(Clone, Debug)]
pub struct SeqCutoff {
    cfg: SeqCutoffConfig,
    /// Whether the cutoff acts, when it is the same for every volume (no volume has
    /// settings of its own): [`SeqCutoff::observe`] then asks nothing else.
    uniform: Option<bool>,
    /// One table per volume, indexed by the volume number (a small slot index, at most 16
    /// bits in a key); a table takes its memory on the volume's first access.
    tables: Vec<StreamTable>,
    /// The last observed access: its key and direction (the blocks its stream held before
    /// it are its volume's table's [`StreamTable::held`]).
    last: Option<(u64, Op)>,
    /// Blocks cut, per volume.
    cut: HashMap<u32, u64>,
    /// The volumes with settings of their own (the stream count stays the cache's).
    volumes: HashMap<u32, SeqCutoffConfig>,
}

impl SeqCutoff {
    /// A detector with no streams yet.
    pub fn new(cfg: SeqCutoffConfig) -> Self {
        let cfg = SeqCutoffConfig { streams: cfg.streams.max(1), ..cfg };
        Self {
            cfg,
            uniform: Some(cfg.is_active()),
            tables: Vec::new(),
            last: None,
            cut: HashMap::new(),
            volumes: HashMap::new(),
        }
    }

    /// Recompute `uniform` after a change of settings.
    fn settle(&mut self) {
        self.uniform = self.volumes.is_empty().then(|| self.cfg.is_active());
    }

    /// The current settings.
    pub fn config(&self) -> SeqCutoffConfig {
        self.cfg
    }

    /// New settings, effective from the next access. The streams seen so far are kept
    /// unless the stream count changes (then every table starts empty).
    pub fn set_config(&mut self, cfg: SeqCutoffConfig) {
        let cfg = SeqCutoffConfig { streams: cfg.streams.max(1), ..cfg };
        if cfg.streams != self.cfg.streams {
            self.tables.clear();
            self.last = None;
        }
        self.cfg = cfg;
        self.settle();
    }

    /// Settings of `volume`'s own (`None`: the cache-wide ones again). The stream count of
    /// `cfg` is ignored: every volume tracks the cache's. The volume's streams seen so far
    /// are kept.
    pub fn set_volume_config(&mut self, volume: u32, cfg: Option<SeqCutoffConfig>) {
        match cfg {
            Some(c) => {
                self.volumes.insert(volume, c);
            }
            None => {
                self.volumes.remove(&volume);
            }
        }
        self.settle();
    }

    /// The settings of `volume`'s own, if it has them.
    pub fn volume_config(&self, volume: u32) -> Option<SeqCutoffConfig> {
        self.volumes.get(&volume).map(|c| SeqCutoffConfig { streams: self.cfg.streams, ..*c })
    }

    /// The settings `volume`'s accesses are decided by: its own, else the cache-wide ones.
    pub fn config_of(&self, volume: u32) -> SeqCutoffConfig {
        self.volume_config(volume).unwrap_or(self.cfg)
    }

    /// True when the cutoff can cut anything ([`SeqCutoffConfig::is_active`]), on any
    /// volume.
    pub fn is_active(&self) -> bool {
        self.cfg.is_active() || self.volumes.values().any(SeqCutoffConfig::is_active)
    }

    /// Record one client block access (hit or miss). Does nothing while the cutoff is off
    /// for the access's volume, so switching it on starts from fresh streams.
    #[inline]
    pub fn observe(&mut self, acc: &Access) {
        let volume = key_volume(acc.key);
        match self.uniform {
            Some(true) => {}
            Some(false) => {
                self.last = None;
                return;
            }
            None => return self.observe_per_volume(acc),
        }
        self.last = Some((acc.key, acc.op));
        match self.tables.get_mut(volume as usize) {
            // The key as the block: the table folds it to the block's 48 bits.
            Some(t) => t.record(acc.key, acc.op == Op::Write),
            None => self.observe_new_volume(acc),
        }
    }

    /// [`SeqCutoff::observe`] while some volume has settings of its own.
    #[inline(never)]
    fn observe_per_volume(&mut self, acc: &Access) {
        if !self.config_of(key_volume(acc.key)).is_active() {
            self.last = None;
            return;
        }
        self.last = Some((acc.key, acc.op));
        self.table(key_volume(acc.key)).record(key_block(acc.key), acc.op == Op::Write);
    }

    /// [`SeqCutoff::observe`] of a volume beyond the tables made so far.
    #[cold]
    #[inline(never)]
    fn observe_new_volume(&mut self, acc: &Access) {
        self.table(key_volume(acc.key)).record(key_block(acc.key), acc.op == Op::Write);
    }

    /// `volume`'s table (the tables up to it made first, each empty until its volume's
    /// first access).
    fn table(&mut self, volume: u32) -> &mut StreamTable {
        let at = volume as usize;
        if at >= self.tables.len() {
            let streams = self.cfg.streams;
            self.tables.resize_with(at + 1, || StreamTable::new(streams));
        }
        &mut self.tables[at]
    }

    /// On a miss of `acc`, observed just before: is it past the cutoff (not to be
    /// allocated)? `resident` of `capacity` cache blocks hold data (the `full` policy acts
    /// only when `resident >= capacity`). A true answer is counted for the volume.
    pub fn cuts(&mut self, acc: &Access, resident: usize, capacity: usize) -> bool {
        let Some((key, op)) = self.last else { return false };
        if key != acc.key || op != acc.op {
            return false;
        }
        let before = self.tables.get(key_volume(key) as usize).map_or(0, StreamTable::held);
        let cfg = if self.volumes.is_empty() { self.cfg } else { self.config_of(key_volume(key)) };
        let on = match cfg.policy {
            CutoffPolicy::Always => true,
            CutoffPolicy::Full => resident >= capacity,
            CutoffPolicy::Never => false,
        };
        let threshold = cfg.threshold(op);
        let cut = on && threshold > 0 && before >= threshold;
        if cut {
            *self.cut.entry(key_volume(key)).or_default() += 1;
        }
        cut
    }

    /// Blocks cut so far on `volume`.
    pub fn cut_blocks(&self, volume: u32) -> u64 {
        self.cut.get(&volume).copied().unwrap_or(0)
    }

    /// Blocks cut so far on every volume.
    pub fn cut_total(&self) -> u64 {
        self.cut.values().sum()
    }
}

#[cfg(test)]
mod tests;
