//! The settings a running server could apply again without a restart: write policy,
//! replacement and admission (with the sieves' parameters), dirty thresholds and flush order,
//! and the NBD server's limits. Each has `ember serve`'s default.

use ember_policy::admission::SieveStoreCConfig;
use serde::{Deserialize, Serialize};

/// What can change while serving.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LiveSettings {
    /// Write policy (`--write-policy`): write-through, write-around, write-back-flush,
    /// write-back-persist, ordered-write-back or unsafe-write-back.
    pub write_policy: String,
    /// Replacement policy (`--policy`): lru, fifo, clock, sieve, arc, slru, 2q, s3fifo.
    pub policy: String,
    /// Admission sieve (`--admission`): aod, wmna, sievestore-c, randsieve-c, ocf-nhit, or a
    /// batch sieve (sievestore-d, randsieve-blkd).
    pub admission: String,
    /// Batch sieves: at most this many bytes of access counts per epoch
    /// (`--epoch-count-memory`).
    pub epoch_count_memory: u64,
    /// The sieves' parameters.
    pub sieve: SieveSettings,
    /// Write-back tuning.
    pub writeback: WritebackSettings,
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
            limits: LimitSettings::default(),
        }
    }
}

/// The sieves' parameters (SieveStore, ISCA 2010, sections 3.3 and 3.4), the papers'
/// defaults unless set. Each applies to the sieves that have it ([`SieveSettings::spec`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SieveSettings {
    /// SieveStore-C: IMCT threshold t1 (`--sieve-t1`).
    pub t1: u32,
    /// SieveStore-C: MCT threshold t2 (`--sieve-t2`).
    pub t2: u32,
    /// SieveStore-C: the window W in nanoseconds (`--sieve-window`).
    pub window_ns: u64,
    /// SieveStore-C: sub-windows k per window (`--sieve-subwindows`).
    pub subwindows: usize,
    /// SieveStore-C: IMCT entries (`--sieve-imct`).
    pub imct: usize,
    /// SieveStore-D: access-count threshold t per epoch (`--sieve-threshold`).
    pub threshold: u64,
    /// The discrete sieves' epoch in nanoseconds (`--epoch`).
    pub epoch_ns: u64,
    /// RandSieve-C, RandSieve-BlkD and ideal: the fraction allocated (`--sieve-fraction`).
    pub fraction: f64,
    /// RandSieve-C and RandSieve-BlkD: the random seed (`--sieve-seed`).
    pub seed: u64,
}

impl Default for SieveSettings {
    fn default() -> Self {
        let c = SieveStoreCConfig::default();
        SieveSettings {
            t1: c.t1,
            t2: c.t2,
            window_ns: c.window_ns,
            subwindows: c.k,
            imct: c.imct_entries,
            threshold: 10,
            epoch_ns: ember_policy::admission::sievestore_d::DEFAULT_EPOCH_NS,
            fraction: 0.01,
            seed: 1,
        }
    }
}

/// Write-back tuning (Saxena's thesis, 4.1 and 4.4).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WritebackSettings {
    /// BLOCKS or PCT% at which writes fall back to write-through (`--max-dirty`; default
    /// 50%).
    pub max_dirty: Option<String>,
    /// BLOCKS or PCT% at or below which the flusher idles (`--min-dirty`; default 12.5%).
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
#[serde(default, deny_unknown_fields)]
pub struct LimitSettings {
    /// Connections open at once (`--max-connections`).
    pub max_connections: usize,
    /// Bytes of READ replies and WRITE payloads all connections may hold
    /// (`--buffer-budget`).
    pub buffer_budget: u64,
    /// Largest READ/WRITE payload (`--max-payload`; at most 32M).
    pub max_payload: u64,
    /// Options one handshake may send (`--max-handshake-options`).
    pub max_handshake_options: usize,
    /// Seconds a whole handshake may take (`--handshake-deadline`).
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
