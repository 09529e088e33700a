//! The parameters the papers tune, as flags shared by the laboratory (`ember sievestore`)
//! and the real cache (`ember serve`), each with its paper's default (issue 13 item 6):
//! SieveStore-C's t1, t2, W, k and IMCT size, SieveStore-D's t and epoch, the random and
//! ideal sieves' fraction (`SieveParams`); and the write-back policies' max/min dirty,
//! maximum epochs and flush order (`WritebackArgs`, `ember serve` only: the simulator has
//! no dirty state).

use crate::cmd_serve::parse_size;
use crate::cmd_warmup::parse_duration;
use anyhow::{anyhow, bail};
use clap::Args;
use ember_engine::{DirtyLimit, DirtyLimitError, DirtyThreshold, WritebackConfig};
use ember_policy::admission::SieveStoreCConfig;
use ember_sim::sievestore::SieveSpec;

/// The sieves' parameters (SieveStore, ISCA 2010, sections 3.3 and 3.4). A flag applies to
/// every `--admission` sieve that has the parameter and is ignored by the others.
#[derive(Args, Clone, Debug)]
pub struct SieveParams {
    /// SieveStore-C: IMCT threshold t1 (misses of any aliasing block before a block enters
    /// the MCT).
    #[arg(long, value_name = "N", default_value_t = 9)]
    pub sieve_t1: u32,
    /// SieveStore-C: MCT threshold t2 (further misses of the block itself before it is
    /// allocated).
    #[arg(long, value_name = "N", default_value_t = 4)]
    pub sieve_t2: u32,
    /// SieveStore-C: the window W over which misses are counted (s, m, h, d).
    #[arg(long, value_name = "SPAN", default_value = "8h", value_parser = parse_duration)]
    pub sieve_window: u64,
    /// SieveStore-C: sub-windows k per window.
    #[arg(long, value_name = "K", default_value_t = 4)]
    pub sieve_subwindows: usize,
    /// SieveStore-C: IMCT entries (rounded up to a power of two; 2^18 = 2 MiB).
    #[arg(long, value_name = "ENTRIES", default_value_t = 1 << 18)]
    pub sieve_imct: usize,
    /// SieveStore-D: access-count threshold t per epoch.
    #[arg(long, value_name = "T", default_value_t = 10)]
    pub sieve_threshold: u64,
    /// The discrete sieves' epoch (SieveStore-D, RandSieve-BlkD, ideal).
    #[arg(long, value_name = "SPAN", default_value = "1d", value_parser = parse_duration)]
    pub epoch: u64,
    /// RandSieve-C, RandSieve-BlkD and ideal: the fraction of misses or blocks allocated.
    #[arg(long, value_name = "F", default_value_t = 0.01)]
    pub sieve_fraction: f64,
    /// RandSieve-C and RandSieve-BlkD: the random seed.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub sieve_seed: u64,
}

impl Default for SieveParams {
    fn default() -> Self {
        let c = SieveStoreCConfig::default();
        SieveParams {
            sieve_t1: c.t1,
            sieve_t2: c.t2,
            sieve_window: c.window_ns,
            sieve_subwindows: c.k,
            sieve_imct: c.imct_entries,
            sieve_threshold: 10,
            epoch: ember_policy::admission::sievestore_d::DEFAULT_EPOCH_NS,
            sieve_fraction: 0.01,
            sieve_seed: 1,
        }
    }
}

impl SieveParams {
    /// `spec` with these parameters in place of its defaults.
    pub fn apply(&self, spec: SieveSpec) -> anyhow::Result<SieveSpec> {
        if !(self.sieve_fraction > 0.0 && self.sieve_fraction <= 1.0) {
            bail!("--sieve-fraction {}: above 0 and at most 1", self.sieve_fraction);
        }
        if self.epoch == 0 || self.sieve_window == 0 {
            bail!("--epoch and --sieve-window must be longer than 0");
        }
        if self.sieve_subwindows == 0 || self.sieve_imct == 0 {
            bail!("--sieve-subwindows and --sieve-imct must be at least 1");
        }
        let (fraction, seed, epoch_ns) = (self.sieve_fraction, self.sieve_seed, self.epoch);
        Ok(match spec {
            SieveSpec::SieveStoreC(_) => SieveSpec::SieveStoreC(SieveStoreCConfig {
                t1: self.sieve_t1,
                t2: self.sieve_t2,
                window_ns: self.sieve_window,
                k: self.sieve_subwindows,
                imct_entries: self.sieve_imct,
                prune_interval_ns: self.sieve_window,
            }),
            SieveSpec::SieveStoreD { .. } => {
                SieveSpec::SieveStoreD { t: self.sieve_threshold, epoch_ns }
            }
            SieveSpec::RandSieveC { .. } => SieveSpec::RandSieveC { fraction, seed },
            SieveSpec::RandSieveBlkD { .. } => {
                SieveSpec::RandSieveBlkD { fraction, seed, epoch_ns }
            }
            SieveSpec::Ideal { .. } => SieveSpec::Ideal { fraction, epoch_ns },
            other => other,
        })
    }

    /// Parse `name` (an `--admission` value) and apply these parameters.
    pub fn spec(&self, name: &str) -> anyhow::Result<SieveSpec> {
        let spec: SieveSpec =
            name.trim().parse().map_err(|e: String| anyhow!("--admission: {e}"))?;
        self.apply(spec)
    }
}

/// Write-back tuning (Saxena's thesis, 4.1 and 4.4) for `ember serve`.
#[derive(Args, Clone, Debug, Default)]
pub struct WritebackArgs {
    /// Write-back: at this many dirty blocks (or PCT% of the cache's data blocks), writes
    /// fall back to write-through [default: 50%].
    #[arg(long, value_name = "BLOCKS|PCT%")]
    pub max_dirty: Option<String>,
    /// Write-back: the flusher idles at or below this many dirty blocks (or PCT%) unless a
    /// FLUSH or a clean stop needs it [default: 12.5%].
    #[arg(long, value_name = "BLOCKS|PCT%")]
    pub min_dirty: Option<String>,
    /// Write-back flush: dirty epochs in flight at once; beyond, writes wait (thesis 4.4.2).
    #[arg(long, value_name = "N", default_value_t = 4)]
    pub max_epochs: usize,
    /// Write-back: the order the flusher writes dirty blocks in within an epoch: ascending
    /// (lowest block first, kinder to a disk) or lru (least recently written first).
    #[arg(long, value_name = "ORDER", default_value = "ascending")]
    pub flush_order: String,
}

/// `BLOCKS` or `PCT%` (of the cache's data blocks, resolved by the engine).
fn blocks_or_percent(flag: &str, s: &str) -> anyhow::Result<DirtyLimit> {
    if let Some(p) = s.trim().strip_suffix('%') {
        let p: f64 = p.trim().parse().map_err(|_| anyhow!("{flag} {s:?}: not a percentage"))?;
        if !(0.0..=100.0).contains(&p) {
            bail!("{flag} {s}: a percentage from 0 to 100");
        }
        return Ok(DirtyLimit::Percent(p));
    }
    Ok(DirtyLimit::Blocks(parse_size(s).map_err(|e| anyhow!("{flag}: {e}"))?))
}

impl WritebackArgs {
    /// The engine's write-back tuning; the engine resolves the thresholds against the cache.
    pub fn config(&self) -> anyhow::Result<WritebackConfig> {
        if self.max_epochs == 0 {
            bail!("--max-epochs must be at least 1");
        }
        match self.flush_order.as_str() {
            "ascending" | "lru" => {}
            o => bail!("--flush-order {o}: ascending or lru"),
        }
        let max_dirty = match &self.max_dirty {
            Some(s) => Some(blocks_or_percent("--max-dirty", s)?),
            None => None,
        };
        let min_dirty = match &self.min_dirty {
            Some(s) => Some(blocks_or_percent("--min-dirty", s)?),
            None => None,
        };
        Ok(WritebackConfig {
            max_dirty,
            min_dirty,
            max_epochs: self.max_epochs,
            lru_flush_order: self.flush_order == "lru",
            ..WritebackConfig::default()
        })
    }
}

/// The message of a dirty threshold that does not fit the cache, in the flags' words.
pub fn dirty_limit_message(e: &DirtyLimitError) -> String {
    let flag = |t: DirtyThreshold| match t {
        DirtyThreshold::Max => "--max-dirty",
        DirtyThreshold::Min => "--min-dirty",
    };
    match e {
        DirtyLimitError::Percent { threshold, percent } => {
            format!("{} {percent}%: a percentage from 0 to 100", flag(*threshold))
        }
        DirtyLimitError::AboveCache { threshold, blocks, data_blocks } => {
            format!(
                "{} {blocks}: more than the cache's {data_blocks} data blocks",
                flag(*threshold)
            )
        }
        DirtyLimitError::MinAboveMax { min, max } => {
            format!("--min-dirty ({min} blocks) is above --max-dirty ({max} blocks)")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sieve_parameters_reach_the_specs() {
        let p = SieveParams {
            sieve_t1: 3,
            sieve_t2: 2,
            sieve_window: 60_000_000_000,
            sieve_threshold: 5,
            epoch: 3_600_000_000_000,
            sieve_fraction: 0.5,
            ..SieveParams::default()
        };
        match p.spec("sievestore-c").unwrap() {
            SieveSpec::SieveStoreC(c) => {
                assert_eq!((c.t1, c.t2, c.window_ns, c.k), (3, 2, 60_000_000_000, 4))
            }
            s => panic!("{s:?}"),
        }
        assert_eq!(
            p.spec("sievestore-d").unwrap(),
            SieveSpec::SieveStoreD { t: 5, epoch_ns: 3_600_000_000_000 }
        );
        assert_eq!(
            p.spec("randsieve-c").unwrap(),
            SieveSpec::RandSieveC { fraction: 0.5, seed: 1 }
        );
        assert_eq!(p.spec("wmna").unwrap(), SieveSpec::Wmna);
        // The defaults are the paper's.
        let d = SieveParams::default();
        assert_eq!(d.spec("sievestore-c").unwrap(), "sievestore-c".parse::<SieveSpec>().unwrap());
        assert_eq!(d.spec("sievestore-d").unwrap(), "sievestore-d".parse::<SieveSpec>().unwrap());
        let bad = SieveParams { sieve_fraction: 0.0, ..SieveParams::default() };
        assert!(bad.spec("randsieve-c").is_err());
    }

    #[test]
    fn writeback_limits_in_blocks_or_percent() {
        let a = WritebackArgs {
            max_dirty: Some("25%".into()),
            min_dirty: Some("10".into()),
            max_epochs: 2,
            flush_order: "lru".into(),
        };
        let c = a.config().unwrap();
        assert_eq!(
            (c.max_dirty, c.min_dirty),
            (Some(DirtyLimit::Percent(25.0)), Some(DirtyLimit::Blocks(10)))
        );
        assert!(c.lru_flush_order && c.max_epochs == 2);
        let e = DirtyLimitError::MinAboveMax { min: 300, max: 250 };
        assert!(dirty_limit_message(&e).contains("above --max-dirty"));
        let bad = WritebackArgs { flush_order: "random".into(), ..a.clone() };
        assert!(bad.config().is_err());
        let bad = WritebackArgs { max_dirty: Some("200%".into()), ..a.clone() };
        assert!(bad.config().unwrap_err().to_string().contains("a percentage from 0 to 100"));
        let e = DirtyLimitError::AboveCache {
            threshold: DirtyThreshold::Max,
            blocks: 2000,
            data_blocks: 1000,
        };
        assert_eq!(
            dirty_limit_message(&e),
            "--max-dirty 2000: more than the cache's 1000 data blocks"
        );
    }
}
