//! The mean READ latency model of Wong and Wilkes, *My cache or yours?*, USENIX ATC 2002,
//! section 2, equations 1–3, extended with counted DEMOTEs as in sections 4 and 5:
//!
//! ```text
//! T_mean = T_c h_c + (T_a + T_c) h_a + (T_a + T_c + T_d) miss                  (1)
//!        + T_a demoted + T_abort aborted
//! ```
//!
//! where `h_c`, `h_a`, `miss` are fractions of the client's READS, `demoted` and `aborted` the
//! stored and aborted DEMOTEs per READ. With T_c = 0 and no DEMOTEs this is equation 2; with
//! one full DEMOTE per array READ (`demoted = h_a + miss`) it is equation 3,
//! `2 T_a h_a + (2 T_a + T_d) miss`. Section 4: "set the cost of an aborted demotion to
//! 0.16 ms (the cost of SAN controller overheads without an actual data transfer)".
//!
//! [`LatencyModel::from_san`] derives T_a from a SAN bandwidth and a per-operation overhead
//! (T_a = overhead + block transfer time, aborted DEMOTE = overhead), for the bandwidth
//! sensitivity study of section 3.5. The per-READ latency of a [`ReadPath`] gives the latency
//! distribution of Figure 4.

use crate::demote::topology::{ClientCounters, DemoteKind, ReadPath};

/// The latency parameters, in milliseconds.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct LatencyModel {
    /// T_c: a client cache hit.
    pub t_c: f64,
    /// T_a: an array cache hit (and a full DEMOTE).
    pub t_a: f64,
    /// T_d: reading a block from disk.
    pub t_d: f64,
    /// An aborted DEMOTE.
    pub t_abort: f64,
}

/// Section 2 and 3 (synthetic workloads): T_a = 0.2 ms, T_d = 10 ms, aborted DEMOTE 0.16 ms,
/// T_c = 0.
pub const PAPER_SYNTHETIC: LatencyModel =
    LatencyModel { t_c: 0.0, t_a: 0.2, t_d: 10.0, t_abort: 0.16 };

/// Sections 4 and 5 (real workloads): T_a = 0.2 ms, T_d = 5 ms, aborted DEMOTE 0.16 ms.
pub const PAPER_REAL: LatencyModel = LatencyModel { t_c: 0.0, t_a: 0.2, t_d: 5.0, t_abort: 0.16 };

/// The paper's SAN: "1 Gbit/s FibreChannel" (section 3.1).
pub const PAPER_SAN_BITS_PER_S: f64 = 1e9;

impl LatencyModel {
    /// T_a from a SAN: `overhead_ms` per operation plus `block_size` bytes at
    /// `bits_per_s`; an aborted DEMOTE costs the overhead alone. T_c and T_d as given.
    pub fn from_san(
        bits_per_s: f64,
        overhead_ms: f64,
        block_size: u64,
        t_c: f64,
        t_d: f64,
    ) -> Self {
        let transfer_ms = block_size as f64 * 8.0 / bits_per_s * 1e3;
        Self { t_c, t_a: overhead_ms + transfer_ms, t_d, t_abort: overhead_ms }
    }

    /// The per-operation overhead that makes [`LatencyModel::from_san`] give T_a = `t_a` at
    /// `bits_per_s` (the paper's 0.2 ms at 1 Gbit/s with 4 KiB blocks: 0.167 ms).
    pub fn overhead_for(t_a: f64, bits_per_s: f64, block_size: u64) -> f64 {
        t_a - block_size as f64 * 8.0 / bits_per_s * 1e3
    }

    /// Equation 1 with DEMOTE costs: mean READ latency from fractions of READS.
    pub fn mean(&self, h_c: f64, h_a: f64, miss: f64, demoted: f64, aborted: f64) -> f64 {
        self.t_c * h_c
            + (self.t_a + self.t_c) * h_a
            + (self.t_a + self.t_c + self.t_d) * miss
            + self.t_a * demoted
            + self.t_abort * aborted
    }

    /// Equation 2 (inclusive, no DEMOTEs, T_c = 0): `T_a h_a + (T_a + T_d) miss`.
    pub fn equation_2(&self, h_a: f64, miss: f64) -> f64 {
        self.t_a * h_a + (self.t_a + self.t_d) * miss
    }

    /// Equation 3 (a DEMOTE costing T_a for every array READ, T_c = 0):
    /// `2 T_a h_a + (2 T_a + T_d) miss`.
    pub fn equation_3(&self, h_a: f64, miss: f64) -> f64 {
        2.0 * self.t_a * h_a + (2.0 * self.t_a + self.t_d) * miss
    }

    /// A client's mean READ latency from its counters (0 with no READS).
    pub fn mean_latency(&self, c: &ClientCounters) -> f64 {
        self.mean(
            c.client_hit_rate(),
            c.array_hit_rate(),
            c.miss_rate(),
            c.demotion_rate(),
            c.aborted_demotion_rate(),
        )
    }

    /// The latency of one READ served by `path`.
    pub fn latency(&self, path: ReadPath) -> f64 {
        let demote = |d: DemoteKind| match d {
            DemoteKind::None => 0.0,
            DemoteKind::Stored => self.t_a,
            DemoteKind::Aborted => self.t_abort,
        };
        match path {
            ReadPath::ClientHit => self.t_c,
            ReadPath::ArrayHit(d) => self.t_c + self.t_a + demote(d),
            ReadPath::Miss(d) => self.t_c + self.t_a + self.t_d + demote(d),
        }
    }

    /// The latency distribution of a client's READS: `(latency, cumulative fraction)` at
    /// each distinct latency, ascending (Figure 4's cumulative READ fraction).
    pub fn cdf(&self, c: &ClientCounters) -> Vec<(f64, f64)> {
        let kinds = [DemoteKind::None, DemoteKind::Stored, DemoteKind::Aborted];
        let mut pts: Vec<(f64, u64)> = vec![(self.latency(ReadPath::ClientHit), c.client_hits)];
        for (k, &d) in kinds.iter().enumerate() {
            pts.push((self.latency(ReadPath::ArrayHit(d)), c.array_hits[k]));
            pts.push((self.latency(ReadPath::Miss(d)), c.misses[k]));
        }
        pts.retain(|p| p.1 > 0);
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        let total = c.reads.max(1) as f64;
        let mut out: Vec<(f64, f64)> = Vec::new();
        let mut acc = 0u64;
        for (lat, n) in pts {
            acc += n;
            match out.last_mut() {
                Some(last) if (last.0 - lat).abs() < 1e-12 => last.1 = acc as f64 / total,
                _ => out.push((lat, acc as f64 / total)),
            }
        }
        out
    }
}

/// Speedup of `latency` over `baseline`: `baseline / latency` (section 3.1); 1 when both
/// are 0, infinite when only `latency` is.
pub fn speedup(baseline: f64, latency: f64) -> f64 {
    if latency <= 0.0 {
        if baseline <= 0.0 {
            1.0
        } else {
            f64::INFINITY
        }
    } else {
        baseline / latency
    }
}

/// Geometric mean of `values` (the "mean speedup" of tables 7, 9 and 10); 1 when empty.
pub fn geometric_mean(values: &[f64]) -> f64 {
    if values.is_empty() {
        return 1.0;
    }
    (values.iter().map(|v| v.ln()).sum::<f64>() / values.len() as f64).exp()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn section_2_1_random_example_5_1_ms_to_0_2_ms() {
        // Wong & Wilkes section 2.1: h_c = 50 %; inclusive h_a = 0 (equation 2), exclusive
        // h_a = 50 % (equation 3): "from 5.1 ms to 0.2 ms".
        let m = PAPER_SYNTHETIC;
        assert!((m.equation_2(0.0, 0.5) - 5.1).abs() < 1e-12);
        assert!((m.equation_3(0.5, 0.0) - 0.2).abs() < 1e-12);
    }

    #[test]
    fn section_2_2_zipf_example_0_918_ms_against_0_036_ms() {
        // Section 2.2: h_c = 91 %, inclusive h_a = 0, exclusive h_a = 9 %: "0.918 ms and
        // 0.036 ms ... an impressive 25.5x speedup".
        let m = PAPER_SYNTHETIC;
        let inclusive = m.equation_2(0.0, 0.09);
        let exclusive = m.equation_3(0.09, 0.0);
        assert!((inclusive - 0.918).abs() < 1e-12, "{inclusive}");
        assert!((exclusive - 0.036).abs() < 1e-12, "{exclusive}");
        assert!((speedup(inclusive, exclusive) - 25.5).abs() < 1e-9);
    }

    #[test]
    fn counted_demotes_reduce_to_equation_3() {
        // Every client miss demotes (stored): demoted = h_a + miss.
        let c = ClientCounters {
            reads: 100,
            client_hits: 50,
            array_hits: [0, 46, 0],
            misses: [0, 4, 0],
            writes: 0,
        };
        let m = PAPER_SYNTHETIC;
        assert!((m.mean_latency(&c) - m.equation_3(0.46, 0.04)).abs() < 1e-12);
        // Aborted demotes cost 0.16 ms each instead.
        let a = ClientCounters { array_hits: [0, 0, 46], misses: [0, 0, 4], ..c };
        let want = 0.2 * 0.46 + 10.2 * 0.04 + 0.16 * 0.5;
        assert!((m.mean_latency(&a) - want).abs() < 1e-12);
    }

    #[test]
    fn san_bandwidth_gives_t_a() {
        // Section 1.1 / 3.1: a 4 KB block over 1 Gbit/s, "as little as 0.2 ms".
        let o = LatencyModel::overhead_for(0.2, PAPER_SAN_BITS_PER_S, 4096);
        assert!((o - 0.167232).abs() < 1e-9);
        let m = LatencyModel::from_san(1e9, o, 4096, 0.0, 10.0);
        assert!((m.t_a - 0.2).abs() < 1e-12);
        let slow = LatencyModel::from_san(10e6, o, 4096, 0.0, 10.0);
        assert!((slow.t_a - (o + 3.2768)).abs() < 1e-12);
        assert_eq!(slow.t_abort, o);
    }

    #[test]
    fn cdf_of_paths_figure_4_style() {
        let c = ClientCounters {
            reads: 10,
            client_hits: 5,
            array_hits: [1, 3, 0],
            misses: [0, 1, 0],
            writes: 0,
        };
        let cdf = PAPER_SYNTHETIC.cdf(&c);
        // 0 ms: 5 hits; 0.2: 1 array hit; 0.4: 3 array hits with DEMOTE; 10.4: 1 miss.
        let want = [(0.0, 0.5), (0.2, 0.6), (0.4, 0.9), (10.4, 1.0)];
        assert_eq!(cdf.len(), want.len());
        for (g, w) in cdf.iter().zip(want) {
            assert!((g.0 - w.0).abs() < 1e-9 && (g.1 - w.1).abs() < 1e-12, "{cdf:?}");
        }
        assert!((geometric_mean(&[2.0, 8.0]) - 4.0).abs() < 1e-12);
        assert_eq!(speedup(0.0, 0.0), 1.0);
        assert_eq!(speedup(1.0, 0.0), f64::INFINITY);
    }
}
