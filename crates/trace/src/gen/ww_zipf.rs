//! ZIPF, the third synthetic workload of Wong and Wilkes section 3.4: "READS from a set of
//! N_Zipf blocks, with N_Zipf = 1.5 (N_c + N_a), so for N_c = N_a = 16384, N_Zipf = 49152",
//! "three equal size sets of N_Zipf / 3 blocks: Z_0 for the most active third (which received
//! 90 % of the accesses), Z_1 for the next most active (6 %), and Z_2 for the least active
//! (the remaining 4 %)", "N_Zipf warm-up READS, followed by 10 x N_Zipf timed READS".
//!
//! The READ probability of the i-th block is proportional to 1/i^alpha (section 2.2) with
//! alpha = 1; the i-th block is block `i - 1` (ranks are not scrambled), so Z_0, Z_1 and Z_2
//! are the contiguous block ranges `[0, N/3)`, `[N/3, 2N/3)` and `[2N/3, N)`. Table 2 reports
//! an 86 % client hit rate ("slightly lower than the anticipated 90 % due to an incomplete
//! warm-up").

use super::{WarmedStream, WarmedTrace, WwConfig, ZipfConfig, ZipfStream};
use crate::TraceError;

/// ZIPF (section 3.4): Zipf(alpha = `zipf_alpha`) READS over blocks `0..n` of volume
/// `client0`, block `i - 1` being the i-th most popular, `n` = N_Zipf = 1.5 (N_c + N_a);
/// `n` warm-up READS then `timed_multiplier * n` timed READS.
pub fn ww_zipf_stream(cfg: &WwConfig) -> Result<WarmedStream<ZipfStream>, TraceError> {
    let n = cfg.n_zipf()?;
    let mut z = ZipfConfig::new(cfg.zipf_alpha, n, cfg.total(n)?, cfg.common.clone());
    z.scramble = false;
    z.volume = super::ww::WW_CLIENT_VOLUME.into();
    let stream = z.stream()?;
    let volumes = stream.volumes();
    Ok(cfg.warmed(stream, volumes, n))
}

/// [`ww_zipf_stream`] collected: the whole workload in memory.
pub fn ww_zipf(cfg: &WwConfig) -> Result<WarmedTrace, TraceError> {
    Ok(ww_zipf_stream(cfg)?.collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gen::test_util::blocks;
    use crate::gen::ww::test_lru::lru_hit_rate;

    #[test]
    fn thirds_get_90_6_4_percent_as_in_section_3_4() {
        let w = ww_zipf(&WwConfig::with_seed(1)).unwrap();
        assert_eq!(w.working_set_blocks, 49152);
        assert_eq!(w.warmup_requests, 49152);
        assert_eq!(w.trace.requests.len(), 11 * 49152);
        let third = 49152 / 3;
        let mut share = [0f64; 3];
        let b = blocks(w.timed(), 4096);
        for &x in &b {
            share[(x / third) as usize] += 1.0 / b.len() as f64;
        }
        // Exact masses for alpha = 1: H(16384)/H(49152) etc.
        let h = |n: u64| (1..=n).map(|i| 1.0 / i as f64).sum::<f64>();
        let total = h(49152);
        let exact = [h(16384) / total, (h(32768) - h(16384)) / total, (total - h(32768)) / total];
        for z in 0..3 {
            // 491520 samples: sd <= sqrt(0.25 / 491520) = 0.0007.
            assert!((share[z] - exact[z]).abs() < 0.004, "Z_{z}: {} vs {}", share[z], exact[z]);
        }
        // The paper's rounded figures (section 3.4): 90 %, 6 %, 4 %.
        for (z, paper) in [0.90, 0.06, 0.04].into_iter().enumerate() {
            assert!((share[z] - paper).abs() < 0.01, "Z_{z}: {} vs paper {paper}", share[z]);
        }
    }

    #[test]
    fn client_lru_hit_rate_as_in_table_2() {
        // Wong and Wilkes table 2: ZIPF, client hit rate 86 % (N_c = 16384 LRU). An LRU
        // client does not hold exactly Z_0, so it sits below the 90 % of Z_0.
        let w = ww_zipf(&WwConfig::with_seed(3)).unwrap();
        let h = lru_hit_rate(16384, &blocks(w.warmup(), 4096), &blocks(w.timed(), 4096));
        assert!((h - 0.86).abs() < 0.02, "client hit rate {h}");
    }

    /// The trace of the pinned configuration (`test_lru::pinned_config`), pinned by its
    /// digest as the generator that held the whole trace made it.
    #[test]
    fn the_trace_of_a_fixed_configuration_is_pinned() {
        let c = crate::gen::ww::test_lru::pinned_config();
        let w = ww_zipf(&c).unwrap();
        let d = crate::gen::test_util::digest(w.trace.requests.iter());
        assert_eq!(
            (w.warmup_requests, w.timed_start_ns, d),
            (1800, 5_405_405_405, (7_371_395_664_732_423_700, 9000))
        );
    }
}
