//! The settings a running server could apply again without a restart: write policy,
//! replacement and admission (with the sieves' parameters), dirty thresholds and flush order,
//! the sequential cutoff, cleaning control,
//! and the NBD server's limits. Each has `ember serve`'s default.

use ember_policy::admission::SieveParams;
use serde::{Deserialize, Serialize};

use super::cleaning::CleaningFileSettings;
use super::seq_cutoff::SeqCutoffFileSettings;
use super::units;

/// What can change while serving.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct LiveSettings {
    /// Write policy (`--write-policy`): write-through, write-around, write-back-flush,
    /// write-back-persist, ordered-write-back or unsafe-write-back.
    pub write_policy: String,
    /// Replacement policy (`--policy`) with its parameters, as `ember sim` spells it:
    /// `NAME[:PARAM=VALUE]...` (`lru`, `arc`, `lruk:k=3`, `slru:4:lcs`; `ember sim
    /// --policy help` lists them all). Every policy but the oracle OPT runs here.
    pub policy: String,
    /// Admission sieve (`--admission`): aod, wmna, sievestore-c, randsieve-c, ocf-nhit, bloom,
    /// prob, or a batch sieve (sievestore-d, randsieve-blkd).
    pub admission: String,
    /// Batch sieves: at most this many bytes of access counts per epoch
    /// (`--epoch-count-memory`).
    #[serde(with = "units::size")]
    pub epoch_count_memory: u64,
    /// The sieves' parameters (in a file, durations as "8h", "1d").
    #[serde(with = "super::sieve_file")]
    pub sieve: SieveSettings,
    /// Write-back tuning.
    pub writeback: WritebackSettings,
    /// The sequential cutoff.
    pub seq_cutoff: SeqCutoffFileSettings,
    /// Cleaning control: the cap on background cleaning and the idle policy.
    pub cleaning: CleaningFileSettings,
    /// The NBD server's limits.
    pub limits: LimitSettings,
}

impl Default for LiveSettings {
    fn default() -> Self {
        LiveSettings {
            write_policy: "write-through".into(),
            policy: "lru".into(),
            admission: "aod".into(),
            epoch_count_memory: 256 << 20,
            sieve: SieveSettings::default(),
            writeback: WritebackSettings::default(),
            seq_cutoff: SeqCutoffFileSettings::default(),
            cleaning: CleaningFileSettings::default(),
            limits: LimitSettings::default(),
        }
    }
}

/// The sieves' parameters (SieveStore, ISCA 2010, sections 3.3 and 3.4): `ember_policy`'s
/// [`SieveParams`], the papers' defaults unless set.
pub type SieveSettings = SieveParams;

/// Write-back tuning (Qin's thesis, 4.1 and 4.4).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct WritebackSettings {
    /// BLOCKS or PCT% at which writes fall back to write-through (`--max-dirty`; default
    /// 50%).
    #[serde(skip_serializing_if = "Option::is_none", with = "units::opt_text")]
    pub max_dirty: Option<String>,
    /// BLOCKS or PCT% at or below which the flusher idles (`--min-dirty`; default 12.5%).
    #[serde(skip_serializing_if = "Option::is_none", with = "units::opt_text")]
    pub min_dirty: Option<String>,
    /// Dirty epochs in flight at once under write-back flush (`--max-epochs`).
    pub max_epochs: usize,
    /// The flusher's order within an epoch: ascending or lru (`--flush-order`).
    pub flush_order: String,
}

impl Default for WritebackSettings {
    fn default() -> Self {
        WritebackSettings {
            max_dirty: None,
            min_dirty: None,
            max_epochs: 4,
            flush_order: "ascending".into(),
        }
    }
}

/// The NBD server's limits (docs/reference/limits.md).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct LimitSettings {
    /// Connections open at once (`--max-connections`).
    pub max_connections: usize,
    /// Bytes of READ replies and WRITE payloads all connections may hold
    /// (`--buffer-budget`).
    #[serde(with = "units::size")]
    pub buffer_budget: u64,
    /// Largest READ/WRITE payload (`--max-payload`; at most 32M).
    #[serde(with = "units::size")]
    pub max_payload: u64,
    /// Options one handshake may send (`--max-handshake-options`).
    pub max_handshake_options: usize,
    /// Seconds a whole handshake may take (`--handshake-deadline`; in a file
    /// `handshake-deadline`, seconds or "10s").
    #[serde(rename = "handshake-deadline", with = "units::secs")]
    pub handshake_deadline_secs: f64,
    /// Longest busy-poll after a reply, in microseconds (`--busy-poll-us`; 0: never).
    pub busy_poll_us: u64,
}

impl Default for LimitSettings {
    fn default() -> Self {
        LimitSettings {
            max_connections: 128,
            buffer_budget: 256 << 20,
            max_payload: 32 << 20,
            max_handshake_options: 32,
            handshake_deadline_secs: 10.0,
            busy_poll_us: 50,
        }
    }
}
