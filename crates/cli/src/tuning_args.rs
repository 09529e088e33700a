//! The parameters the papers tune, as flags shared by the laboratory (`ember sievestore`)
//! and the real cache (`ember serve`), each with its paper's default: SieveStore-C's t1, t2,
//! W, k and IMCT size, SieveStore-D's t and epoch, the random and ideal sieves' fraction
//! (`SieveParams`, which become `ember_policy`'s [`admission::SieveParams`]); and the write-back policies' max/min
//! dirty, maximum epochs and flush order (`WritebackArgs`, `ember serve` only: the simulator
//! has no dirty state).

use crate::cmd_warmup::parse_duration;
use clap::Args;
use ember_policy::admission::{self, SieveSpec};
use ember_serve::config::WritebackSettings;

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
    /// RandSieve-C, RandSieve-BlkD and prob: the random seed (prob: 1 draws as libCacheSim's
    /// ProbAdmissioner does).
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub sieve_seed: u64,
    /// prob: the probability of admitting a miss (libCacheSim's default).
    #[arg(long, value_name = "P", default_value_t = 0.5)]
    pub admit_probability: f64,
    /// bloom: blocks the doorkeeper records before it is cleared (0: never).
    #[arg(long, value_name = "N", default_value_t = 1 << 20)]
    pub bloom_keys: u64,
    /// bloom: the doorkeeper's Bloom-filter false-positive rate at --bloom-keys blocks (0: an
    /// exact set, as libCacheSim's BloomFilterAdmissioner keeps with --bloom-keys 0).
    #[arg(long, value_name = "F", default_value_t = 0.01)]
    pub bloom_fpr: f64,
}

impl Default for SieveParams {
    /// The papers' defaults, as [`admission::SieveParams`] has them.
    fn default() -> Self {
        let d = admission::SieveParams::default();
        SieveParams {
            sieve_t1: d.t1,
            sieve_t2: d.t2,
            sieve_window: d.window_ns,
            sieve_subwindows: d.subwindows,
            sieve_imct: d.imct,
            sieve_threshold: d.threshold,
            epoch: d.epoch_ns,
            sieve_fraction: d.fraction,
            sieve_seed: d.seed,
            admit_probability: d.probability,
            bloom_keys: d.bloom_keys,
            bloom_fpr: d.bloom_fpr,
        }
    }
}

impl From<&SieveParams> for admission::SieveParams {
    fn from(p: &SieveParams) -> admission::SieveParams {
        admission::SieveParams {
            t1: p.sieve_t1,
            t2: p.sieve_t2,
            window_ns: p.sieve_window,
            subwindows: p.sieve_subwindows,
            imct: p.sieve_imct,
            threshold: p.sieve_threshold,
            epoch_ns: p.epoch,
            fraction: p.sieve_fraction,
            seed: p.sieve_seed,
            probability: p.admit_probability,
            bloom_keys: p.bloom_keys,
            bloom_fpr: p.bloom_fpr,
        }
    }
}

impl SieveParams {
    /// `spec` with these parameters in place of its defaults ([`admission::SieveParams::apply`]).
    pub fn apply(&self, spec: SieveSpec) -> anyhow::Result<SieveSpec> {
        admission::SieveParams::from(self).apply(spec).map_err(anyhow::Error::from)
    }

    /// Parse `name` (an `--admission` value) and apply these parameters.
    pub fn spec(&self, name: &str) -> anyhow::Result<SieveSpec> {
        admission::SieveParams::from(self)
            .spec(name)
            .map_err(|e| anyhow::anyhow!("--admission: {e}"))
    }
}

/// Write-back tuning (Qin's thesis, 4.1 and 4.4) for `ember serve`.
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

impl From<&WritebackArgs> for WritebackSettings {
    fn from(a: &WritebackArgs) -> WritebackSettings {
        WritebackSettings {
            max_dirty: a.max_dirty.clone(),
            min_dirty: a.min_dirty.clone(),
            max_epochs: a.max_epochs,
            flush_order: a.flush_order.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        sieve: SieveParams,
        #[command(flatten)]
        writeback: WritebackArgs,
    }

    fn parse(flags: &[&str]) -> Cli {
        Cli::try_parse_from(std::iter::once("serve").chain(flags.iter().copied())).unwrap()
    }

    /// Every flag sets its own parameter, and the specs are built from those parameters
    /// (`admission::SieveParams` checks each sieve's use of them).
    #[test]
    fn sieve_flags_reach_the_parameters_and_the_specs() {
        let c = parse(&[
            "--sieve-t1",
            "3",
            "--sieve-t2",
            "2",
            "--sieve-window",
            "1m",
            "--sieve-subwindows",
            "5",
            "--sieve-imct",
            "1024",
            "--sieve-threshold",
            "5",
            "--epoch",
            "1h",
            "--sieve-fraction",
            "0.5",
            "--sieve-seed",
            "7",
            "--admit-probability",
            "0.25",
            "--bloom-keys",
            "0",
            "--bloom-fpr",
            "0",
        ]);
        let p = admission::SieveParams::from(&c.sieve);
        assert_eq!(
            p,
            admission::SieveParams {
                t1: 3,
                t2: 2,
                window_ns: 60_000_000_000,
                subwindows: 5,
                imct: 1024,
                threshold: 5,
                epoch_ns: 3_600_000_000_000,
                fraction: 0.5,
                seed: 7,
                probability: 0.25,
                bloom_keys: 0,
                bloom_fpr: 0.0,
            }
        );
        for name in ["sievestore-c", "sievestore-d", "randsieve-c", "prob", "bloom", "wmna"] {
            assert_eq!(c.sieve.spec(name).unwrap(), p.spec(name).unwrap(), "{name}");
        }
        assert_eq!(
            c.sieve.spec("sievestore-d").unwrap(),
            SieveSpec::SieveStoreD { t: 5, epoch_ns: 3_600_000_000_000 }
        );
        let bad = parse(&["--sieve-fraction", "0"]);
        assert!(bad.sieve.spec("randsieve-c").is_err());
    }

    #[test]
    fn defaults_are_the_servers() {
        assert_eq!(
            admission::SieveParams::from(&SieveParams::default()),
            admission::SieveParams::default()
        );
        let c = parse(&[]);
        assert_eq!(admission::SieveParams::from(&c.sieve), admission::SieveParams::default());
        assert_eq!(WritebackSettings::from(&c.writeback), WritebackSettings::default());
    }
}
