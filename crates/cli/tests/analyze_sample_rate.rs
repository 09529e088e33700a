//! `ember analyze --sample-rate R`: reuse distances (Bonfire Figure 3) and the LRU
//! miss-ratio curve from a SHARDS sample (spatial hash sampling of blocks, distances scaled by
//! 1/R; Waldspurger et al., FAST 2015, fixed-rate variant) instead of the exact pass, whose
//! state is per distinct block.
//!
//! At R = 1 every block is sampled: the reuse section equals the exact one.
//!
//! At R < 1 the tolerance comes from the sampling itself. Sampling blocks with probability R,
//! a share `p` estimated over accesses (a Figure 3 group's share of reaccesses, a miss ratio)
//! is a ratio estimator `sum(d_i a_i p_i) / sum(d_i a_i)` over blocks `i` with `a_i`
//! accesses, `d_i` Bernoulli(R); its variance is about `(1 - R) / R * sum(a_i^2 (p_i -
//! p)^2) / (sum a_i)^2`, at most `1 / (R * n_eff)` with `n_eff = (sum a_i)^2 / sum(a_i^2)`
//! (the effective number of blocks; `|p_i - p| <= 1`). For Zipf(alpha) over N blocks, `a_i`
//! is proportional to `i^-alpha`, so `n_eff` follows from the trace's parameters. The test
//! allows three of these (already pessimistic) standard errors. On a Zipf(0.8) trace at
//! R = 0.01, `n_eff` is 1,823 and the bound is 0.7: the estimate is then meaningless, which is
//! why fixed-rate SHARDS needs a rate that keeps `R * n_eff` large (docs/reference/laboratory.md).
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "integration-test helpers")]

use std::path::Path;
use std::process::Command;

const EMBER: &str = env!("CARGO_BIN_EXE_ember");

fn ember(args: &[&str]) {
    let out = Command::new(EMBER).args(args).output().expect("run ember");
    assert!(out.status.success(), "ember {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

fn analyze(trace: &Path, out: &Path, extra: &[&str]) -> serde_json::Value {
    let (t, o) = (trace.to_str().expect("utf-8"), out.to_str().expect("utf-8"));
    let mut args = vec!["analyze", t, "-q", "--whole-only", "--mrc-points", "40", "--json", o];
    args.extend_from_slice(extra);
    ember(&args);
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out).expect("json")).expect("JSON");
    v["whole"].clone()
}

/// `n_eff = (sum a_i)^2 / sum(a_i^2)` for Zipf(`alpha`) weights over `n` blocks.
fn n_eff(alpha: f64, n: u64) -> f64 {
    let (mut s1, mut s2) = (0.0, 0.0);
    for i in 1..=n {
        let w = (i as f64).powf(-alpha);
        s1 += w;
        s2 += w * w;
    }
    s1 * s1 / s2
}

fn floats(v: &serde_json::Value) -> Vec<f64> {
    v.as_array().expect("array").iter().map(|x| x.as_f64().expect("number")).collect()
}

/// A Zipf(`alpha`) trace of 2 M one-block reads over 500,000 blocks: the exact analysis and
/// SHARDS at `rate`; checks the rate's tolerance and returns the largest errors seen
/// (Figure 3 groups in points, miss ratio).
fn within_tolerance(dir: &Path, alpha: f64, rate: f64) -> (f64, f64) {
    let trace = dir.join(format!("zipf{alpha}.bin"));
    let t = trace.to_str().expect("utf-8");
    let a = alpha.to_string();
    ember(&[
        "trace",
        "gen",
        "zipf",
        "--alpha",
        &a,
        "--blocks",
        "500000",
        "--requests",
        "2000000",
        "--seed",
        "2",
        "--format",
        "ember",
        "-o",
        t,
    ]);
    let exact = analyze(&trace, &dir.join("exact.json"), &[]);
    let r = rate.to_string();
    let est = analyze(&trace, &dir.join("sampled.json"), &["--sample-rate", &r]);
    assert_eq!(est["reuse"]["sample_rate"].as_f64(), Some(rate));
    assert!(est["mrc"]["exact"].is_null(), "the exact pass did not run");
    let tol = 3.0 / (rate * n_eff(alpha, 500_000)).sqrt();
    let groups = |v: &serde_json::Value| floats(&v["reuse"]["reaccess_bucket_percent"]);
    let group_err =
        groups(&exact).iter().zip(groups(&est)).map(|(x, y)| (x - y).abs()).fold(0.0, f64::max);
    let curve_err = floats(&exact["mrc"]["exact"]["miss_ratio"])
        .iter()
        .zip(floats(&est["mrc"]["shards"]["miss_ratio"]))
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f64::max);
    assert!(
        group_err <= 100.0 * tol,
        "Zipf({alpha}) at R = {rate}: a Figure 3 group off by {group_err:.2} points (tolerance {:.2})",
        100.0 * tol
    );
    assert!(
        curve_err <= tol,
        "Zipf({alpha}) at R = {rate}: the miss ratio off by {curve_err:.4} (tolerance {tol:.4})"
    );
    (group_err, curve_err)
}

#[test]
fn sample_rate_one_is_the_exact_reuse_section() {
    let dir = tempfile::tempdir().expect("tempdir");
    let trace = dir.path().join("z.bin");
    let t = trace.to_str().expect("utf-8");
    ember(&[
        "trace",
        "gen",
        "zipf",
        "--alpha",
        "0.8",
        "--blocks",
        "50000",
        "--requests",
        "400000",
        "--write-ratio",
        "0.2",
        "--format",
        "ember",
        "-o",
        t,
    ]);
    let exact = analyze(&trace, &dir.path().join("e.json"), &[]);
    let one = analyze(&trace, &dir.path().join("s.json"), &["--sample-rate", "1"]);
    let mut reuse = one["reuse"].clone();
    assert_eq!(reuse["sample_rate"].as_f64(), Some(1.0));
    reuse.as_object_mut().expect("object").remove("sample_rate");
    assert!(exact["reuse"]["distribution"].as_array().is_some_and(|d| d.len() > 1000));
    assert_eq!(reuse, exact["reuse"]);
    assert_eq!(one["mrc"]["shards"], exact["mrc"]["exact"]);
}

#[test]
fn sampled_reuse_distances_are_within_three_standard_errors_on_zipf() {
    let dir = tempfile::tempdir().expect("tempdir");
    // Zipf(0.5): n_eff = 145,689, so R = 0.01 samples about 1,457 effective blocks (tolerance
    // 7.9 points, 0.079 in miss ratio).
    let (g, c) = within_tolerance(dir.path(), 0.5, 0.01);
    eprintln!("Zipf(0.5) at R = 0.01: Figure 3 groups within {g:.2} points, miss ratio {c:.4}");
    // Zipf(0.8): n_eff = 1,823, so R = 0.1 is needed for about 182 (tolerance 22 points).
    let (g, c) = within_tolerance(dir.path(), 0.8, 0.1);
    eprintln!("Zipf(0.8) at R = 0.1: Figure 3 groups within {g:.2} points, miss ratio {c:.4}");
}

#[test]
fn a_rate_outside_zero_to_one_is_refused_with_its_value() {
    let dir = tempfile::tempdir().expect("tempdir");
    let trace = dir.path().join("z.bin");
    let t = trace.to_str().expect("utf-8");
    ember(&["trace", "gen", "zipf", "--blocks", "100", "--requests", "1000", "-o", t]);
    for rate in ["0", "1.5", "-0.1"] {
        let out = Command::new(EMBER)
            .args(["analyze", t, "-q", &format!("--sample-rate={rate}")])
            .output()
            .expect("run ember");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "rate {rate} accepted");
        assert!(err.contains("sampling rate must be in (0, 1]"), "rate {rate}: {err}");
    }
}
