//! SEQ, the second synthetic workload of Wong and Wilkes section 3.3: "READS of sequential
//! blocks from a working set of N_seq contiguous blocks", N_seq = N_c + N_a - 1 = 32767 ("the
//! -1 accounts for double-caching of the most recently read block"), "N_seq warm-up READS,
//! followed by 10 x N_seq timed one-block READS". The warm-up is exactly one pass over the
//! loop; the timed READS are exactly ten more. Table 2 reports a 0 % client hit rate.

use super::{SeqConfig, SeqStream, WarmedStream, WarmedTrace, WwConfig};
use crate::TraceError;

/// SEQ (section 3.3): a loop over blocks `0..n` of volume `client0`, `n` = N_seq =
/// N_c + N_a - 1, one warm-up pass then `timed_multiplier` timed passes.
pub fn ww_seq_stream(cfg: &WwConfig) -> Result<WarmedStream<SeqStream>, TraceError> {
    let n = cfg.n_seq()?;
    let mut s = SeqConfig::new(n, cfg.total(n)?, cfg.common.clone());
    s.volume = super::ww::WW_CLIENT_VOLUME.into();
    let stream = s.stream()?;
    let volumes = stream.volumes();
    Ok(cfg.warmed(stream, volumes, n))
}

/// [`ww_seq_stream`] collected: the whole workload in memory.
pub fn ww_seq(cfg: &WwConfig) -> Result<WarmedTrace, TraceError> {
    Ok(ww_seq_stream(cfg)?.collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gen::test_util::blocks;
    use crate::gen::ww::test_lru::lru_hit_rate;

    #[test]
    fn seq_is_a_loop_of_exactly_n_seq() {
        let w = ww_seq(&WwConfig::with_seed(1)).unwrap();
        assert_eq!(w.working_set_blocks, 32767);
        assert_eq!(w.warmup_requests, 32767);
        let b = blocks(&w.trace.requests, 4096);
        assert_eq!(b.len(), 11 * 32767);
        assert!(b.iter().enumerate().all(|(i, &x)| x == i as u64 % 32767));
        assert_eq!(w.timed_start_ns, w.timed()[0].time_ns);
        assert_eq!(w.timed()[0].offset, 0);
    }

    #[test]
    fn client_lru_never_hits_as_in_table_2() {
        // Wong and Wilkes table 2: SEQ, client hit rate 0 %.
        let w = ww_seq(&WwConfig::with_seed(1)).unwrap();
        let h = lru_hit_rate(16384, &blocks(w.warmup(), 4096), &blocks(w.timed(), 4096));
        assert_eq!(h, 0.0);
    }

    /// The trace of the pinned configuration (`test_lru::pinned_config`), pinned by its
    /// digest as the generator that held the whole trace made it.
    #[test]
    fn the_trace_of_a_fixed_configuration_is_pinned() {
        let c = crate::gen::ww::test_lru::pinned_config();
        let w = ww_seq(&c).unwrap();
        let d = crate::gen::test_util::digest(w.trace.requests.iter());
        assert_eq!(
            (w.warmup_requests, w.timed_start_ns, d),
            (1199, 3_600_600_600, (10_438_044_894_719_016_590, 5995))
        );
    }
}
