//! End to end through the `ember` binary: `ember trace gen bonfire` writes an MSR-Cambridge
//! trace, `ember analyze` characterizes it (Bonfire section 3), `ember warmup run`, `sweep`
//! and `advise` run the section 4 study on it.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "integration-test helpers")]

use std::path::Path;
use std::process::{Command, Output};

fn ember(args: &[&str]) -> Output {
    let out = Command::new(env!("CARGO_BIN_EXE_ember")).args(args).output().unwrap();
    assert!(out.status.success(), "ember {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    out
}

fn gen(dir: &Path, name: &str, rate: &str, extra: &[&str]) -> String {
    let p = dir.join(name).to_string_lossy().into_owned();
    let mut args =
        vec!["trace", "gen", "bonfire", "--days", "2.5", "--rate", rate, "--seed", "4", "-o", &p];
    args.extend_from_slice(extra);
    ember(&args);
    p
}

#[test]
fn analyze_then_warmup_on_a_generated_msr_trace() {
    let dir = tempfile::tempdir().unwrap();
    let hourly = gen(
        dir.path(),
        "hourly.csv",
        "0.2",
        &["--hourly", "0.8", "--daily-regions", "0", "--hourly-mean-age", "1800"],
    );
    let out = dir.path().join("an");
    let o = ember(&["analyze", &hourly, "--shards", "0.5", "--out", out.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("Table 1"), "{text}");
    let doc: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("analyze.json")).unwrap()).unwrap();
    let whole = &doc["whole"];
    // Figure 1a: every reaccess of this trace is hourly (mean age 30 min, truncated at 1 h).
    assert_eq!(whole["temporal"]["class_percent"][0].as_f64(), Some(100.0));
    assert_eq!(whole["temporal"]["class_blocks"][1].as_u64(), Some(0));
    let s = &whole["summary"];
    let wss = s["wss_blocks"].as_u64().unwrap();
    assert!(wss > 0 && wss < s["block_accesses"].as_u64().unwrap());
    assert!(whole["mrc"]["shards_mean_abs_error"].as_f64().unwrap() < 0.1);
    for f in [
        "fig1a_classes",
        "fig1b_recency",
        "fig2_daily",
        "fig3_reuse",
        "fig4_spatial",
        "popularity",
        "mrc",
    ] {
        assert!(out.join(format!("{f}.png")).metadata().unwrap().len() > 1000, "{f}");
    }
    let adv = ember(&["warmup", "advise", &hourly]);
    assert!(String::from_utf8_lossy(&adv.stdout).contains("Last-K"));
    // The same advice from the saved analysis.
    let adv2 = ember(&[
        "warmup",
        "advise",
        &hourly,
        "--analysis",
        out.join("analyze.json").to_str().unwrap(),
    ]);
    assert_eq!(adv.stdout, adv2.stdout);

    let json = dir.path().join("w.json");
    let wout = dir.path().join("w");
    ember(&[
        "warmup",
        "run",
        &hourly,
        "--cache",
        "50",
        "--warmup",
        "25",
        "--region",
        "4KiB",
        "--th-n",
        "0.01",
        "--json",
        json.to_str().unwrap(),
        "--out",
        wout.to_str().unwrap(),
    ]);
    let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let periods = doc["periods"].as_array().unwrap();
    assert_eq!(periods.len(), 2);
    let m = periods[0]["metrics"].as_array().unwrap();
    let conv = |s: &str| {
        m.iter().find(|x| x["scheme"] == s).unwrap()["converge_intervals"].as_u64().unwrap()
    };
    assert!(conv("Last-K") <= conv("cold"));
    assert!(wout.join("timeline_bonfire_0_p1.png").exists());

    let o = ember(&[
        "warmup",
        "sweep",
        &hourly,
        "--cache",
        "50",
        "--warmup",
        "10",
        "--region",
        "4KiB",
        "--th-v",
        "0.9",
        "--th-n",
        "0.01,0.05",
    ]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert_eq!(text.lines().filter(|l| l.contains(" | ")).count(), 3, "{text}");

    let daily = gen(
        dir.path(),
        "daily.csv",
        "0.02",
        &["--start-hour", "2", "--daily-minutes", "60", "--hourly", "0.3"],
    );
    let adv = ember(&["warmup", "advise", &daily]);
    let text = String::from_utf8_lossy(&adv.stdout);
    assert!(text.contains("First-K") && text.contains("02:00"), "{text}");
}

/// `advise` decides from evidence. On `make demo`'s Bonfire week, Figure 8's
/// tree says Last-K (hourly reaccesses dominate), but simulating every selector on the trace
/// shows Top-K ahead; the recommendation follows the simulation, and its table agrees with
/// `ember warmup run` on the same trace.
#[test]
fn advise_recommends_what_the_simulation_shows() {
    let dir = tempfile::tempdir().unwrap();
    let week = dir.path().join("week.csv");
    let w = week.to_str().unwrap();
    ember(&["trace", "gen", "bonfire", "--rate", "2", "--days", "7", "--seed", "1", "-o", w]);
    let out = ember(&["warmup", "advise", w]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(text.contains("Last-K (Figure 8's decision tree)"), "{text}");
    assert!(text.contains("recommended: Top-K"), "{text}");
    // Top-K's read hits in the table are the highest of the warmed selectors, and equal the
    // median of `ember warmup run`'s per-period figures for Top-K.
    let hits = |name: &str| -> f64 {
        let line = text.lines().find(|l| l.trim_start().starts_with(name)).unwrap();
        line.split_whitespace().last().unwrap().parse().unwrap()
    };
    for other in ["Last-K", "First-K", "Random-K"] {
        assert!(hits("Top-K") > hits(other), "{other}: {text}");
    }
    let json = dir.path().join("run.json");
    ember(&["warmup", "run", w, "--quiet", "--json", json.to_str().unwrap()]);
    let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let mut top: Vec<f64> = doc["periods"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| p["metrics"].as_array().unwrap().clone())
        .filter(|m| m["scheme"] == "Top-K")
        .filter_map(|m| m["read_hit_percent"].as_f64())
        .collect();
    top.sort_by(f64::total_cmp);
    let n = top.len();
    let median = if n % 2 == 1 { top[n / 2] } else { (top[n / 2 - 1] + top[n / 2]) / 2.0 };
    assert!((median - hits("Top-K")).abs() < 0.05, "run's median {median}: {text}");
}
