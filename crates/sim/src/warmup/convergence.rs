//! Convergence time, Bonfire eq. 1 (section 4.1).
//!
//! Over the intervals `t = 0..n` of a period, a *violation* is an interval where the new
//! cache's read hit rate is below `Th_V` times the always-warm cache's. The convergence time
//! is the smallest `T` such that the violations in `T..n` number at most `Th_N * (n - T)`:
//! from `T` on, the new cache stays within `Th_V` of always-warm except for a `Th_N` share
//! of the time. `T = n` (never converged within the period) always qualifies. Intervals
//! without reads are no violation.

/// `T_converge` in intervals (`0..=n`) of the read hit rates `new` against `warm` (same
/// length; `None` for an interval without reads), with thresholds `th_v` in (0, 1] and
/// `th_n` in [0, 1).
pub fn convergence_intervals(
    new: &[Option<f64>],
    warm: &[Option<f64>],
    th_v: f64,
    th_n: f64,
) -> usize {
    let n = new.len().min(warm.len());
    let violates = |t: usize| match (new[t], warm[t]) {
        (Some(h), Some(w)) => h < th_v * w,
        _ => false,
    };
    let mut best = n;
    let mut suffix = 0usize;
    for t in (0..n).rev() {
        suffix += violates(t) as usize;
        if suffix as f64 <= th_n * (n - t) as f64 {
            best = t;
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[f64]) -> Vec<Option<f64>> {
        v.iter().map(|&x| Some(x)).collect()
    }

    #[test]
    fn bonfire_figure5_example_shape() {
        // 13 intervals; always-warm at 0.8; the new cache climbs and dips once at t = 8.
        let warm = s(&[0.8; 13]);
        let new = s(&[0.0, 0.1, 0.3, 0.5, 0.65, 0.75, 0.78, 0.8, 0.6, 0.8, 0.79, 0.8, 0.8]);
        // Th_V 90 % (0.72), Th_N 20 %: from T = 5, 1 violation in 8 intervals (<= 1.6).
        // T = 4 has 2 in 9 (> 1.8): no.
        assert_eq!(convergence_intervals(&new, &warm, 0.9, 0.2), 5);
        // Th_V 80 % (0.64), Th_N 10 %: from T = 4, the dip (0.6) is 1 of 9 (<= 0.9? no);
        // from T = 9 none: but T = 4..8 contain it, so T = 9.
        assert_eq!(convergence_intervals(&new, &warm, 0.8, 0.1), 9);
        // Th_N 0: converged only after the last violation.
        assert_eq!(convergence_intervals(&new, &warm, 0.9, 0.0), 9);
        // Never within Th_V: n.
        assert_eq!(convergence_intervals(&s(&[0.0; 4]), &s(&[1.0; 4]), 0.9, 0.0), 4);
        // Equal from the start: 0. No reads: no violation.
        assert_eq!(convergence_intervals(&warm, &warm, 0.9, 0.0), 0);
        assert_eq!(convergence_intervals(&[None, None], &[Some(1.0), None], 0.9, 0.0), 0);
    }
}
