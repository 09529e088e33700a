//! RANDOM, the first synthetic workload of Wong and Wilkes section 3.2: "one-block READS
//! uniformly selected from a working set of N_rand blocks", with N_rand = N_c + N_a = 32768,
//! "N_rand warm-up READS, followed by 10 x N_rand timed READS". Table 2 reports a 50 % client
//! hit rate for it.

use super::{UniformConfig, UniformStream, WarmedStream, WarmedTrace, WwConfig};
use crate::TraceError;

/// RANDOM (section 3.2): `n` = N_rand = N_c + N_a blocks, `n` warm-up READS then
/// `timed_multiplier * n` timed READS, uniform over blocks `0..n` of volume `client0`.
pub fn ww_random_stream(cfg: &WwConfig) -> Result<WarmedStream<UniformStream>, TraceError> {
    let n = cfg.n_rand()?;
    let mut u = UniformConfig::new(n, cfg.total(n)?, cfg.common.clone());
    u.volume = super::ww::WW_CLIENT_VOLUME.into();
    let stream = u.stream()?;
    let volumes = stream.volumes();
    Ok(cfg.warmed(stream, volumes, n))
}

/// [`ww_random_stream`] collected: the whole workload in memory.
pub fn ww_random(cfg: &WwConfig) -> Result<WarmedTrace, TraceError> {
    Ok(ww_random_stream(cfg)?.collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gen::test_util::{blocks, chi_square_uniform};
    use crate::gen::ww::test_lru::lru_hit_rate;
    use crate::Op;

    #[test]
    fn shape_of_random() {
        let w = ww_random(&WwConfig::with_seed(1)).unwrap();
        assert_eq!(w.working_set_blocks, 32768);
        assert_eq!(w.warmup_requests, 32768);
        assert_eq!(w.trace.requests.len(), 11 * 32768);
        assert_eq!(w.timed().len(), 10 * 32768);
        assert_eq!(w.trace.volumes.names(), &["client0".to_string()]);
        assert!(w.trace.requests.iter().all(|r| r.op == Op::Read && r.length == 4096));
        assert!(w.warmup().iter().all(|r| r.time_ns < w.timed_start_ns));
        assert!(w.timed().iter().all(|r| r.time_ns >= w.timed_start_ns));
        let b = blocks(w.timed(), 4096);
        let mut counts = vec![0u64; 32768];
        for &x in &b {
            counts[x as usize] += 1;
        }
        // 32767 degrees of freedom, sd = 256: accept mean +- 5 sd.
        let chi2 = chi_square_uniform(&counts);
        assert!((chi2 - 32767.0).abs() < 1280.0, "chi-square {chi2}");
    }

    #[test]
    fn client_lru_hits_half_as_in_table_2() {
        // Wong and Wilkes table 2: RANDOM, client hit rate 50 % (N_c = 16384 of 32768).
        let w = ww_random(&WwConfig::with_seed(2)).unwrap();
        let h = lru_hit_rate(16384, &blocks(w.warmup(), 4096), &blocks(w.timed(), 4096));
        assert!((h - 0.50).abs() < 0.01, "client hit rate {h}");
    }

    #[test]
    fn deterministic_given_seed() {
        let a = ww_random(&WwConfig::with_seed(4)).unwrap();
        let b = ww_random(&WwConfig::with_seed(4)).unwrap();
        let c = ww_random(&WwConfig::with_seed(5)).unwrap();
        assert_eq!(a.trace.requests, b.trace.requests);
        assert_ne!(a.trace.requests, c.trace.requests);
    }

    /// The trace of the pinned configuration (`test_lru::pinned_config`), pinned by its
    /// digest as the generator that held the whole trace made it.
    #[test]
    fn the_trace_of_a_fixed_configuration_is_pinned() {
        let c = crate::gen::ww::test_lru::pinned_config();
        let w = ww_random(&c).unwrap();
        let d = crate::gen::test_util::digest(w.trace.requests.iter());
        assert_eq!(
            (w.warmup_requests, w.timed_start_ns, d),
            (1200, 3_603_603_603, (13_014_729_101_094_440_170, 6000))
        );
    }
}
