//! The benches' results and the pages made from them: `bench/lib/record.py` (as the shell
//! benches call it) writes `<bench>-<commit>-<machine>.json` with each figure's spread, the
//! ratio against its target and the machine; `bench/lib/report.py` (`make report`) turns the
//! latest result per bench into docs/benchmarks.md and the reproductions into
//! docs/reproductions.md. Run on fixture results, never on a real benchmark.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "integration-test helpers")]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn python(results: &Path, args: &[&str]) -> Output {
    let out = Command::new("python3")
        .current_dir(repo_root())
        .env("EMBER_BENCH_RESULTS", results)
        .env("EMBER_BENCH_MACHINE", "testbox")
        .args(args)
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "python3 {args:?} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// One shell-style recording of bench `name`; returns the result's JSON.
fn record(results: &Path, name: &str, ember: &[&str], ratio: &str) -> serde_json::Value {
    let rec = "bench/lib/record.py";
    let out = python(
        results,
        &[rec, "start", name, "--peer", "a peer", "--target", ">= 2", "--ratio-of", "x / y", "--"],
    );
    let state = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let mut figure = vec![rec, "figure", &state, "ember IOPS", "--unit", "IOPS", "--who", "ember"];
    figure.extend_from_slice(ember);
    python(results, &figure);
    python(results, &[rec, "figure", &state, "peer IOPS", "--who", "peer", "5", "-", "7"]);
    python(results, &[rec, "note", &state, "a note"]);
    python(results, &[rec, "finish", &state, ratio]);
    assert!(!Path::new(&state).exists(), "finish leaves its state file");
    let file = std::fs::read_dir(results)
        .expect("results")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(&format!("{name}-")) && n.ends_with("-testbox.json"))
        })
        .unwrap_or_else(|| panic!("no {name}-<commit>-testbox.json in {}", results.display()));
    serde_json::from_str(&std::fs::read_to_string(file).expect("read")).expect("JSON")
}

#[test]
fn a_recorded_result_holds_spreads_ratio_target_and_machine() {
    let dir = tempfile::tempdir().expect("tempdir");
    let doc = record(dir.path(), "fixture", &["30", "10", "20"], "2.5");
    assert_eq!(doc["bench"], "fixture");
    assert_eq!(doc["ratio"]["value"], 2.5);
    assert_eq!(doc["ratio"]["target"], ">= 2");
    assert_eq!(doc["ratio"]["met"], true);
    let ember = &doc["figures"][0];
    assert_eq!(ember["rounds"], 3);
    assert_eq!(ember["min"], 10.0);
    assert_eq!(ember["max"], 30.0);
    assert_eq!(ember["median"], 20.0);
    assert_eq!(ember["unit"], "IOPS");
    // "-" marks a round without a measurement: not a value.
    assert_eq!(doc["figures"][1]["rounds"], 2);
    assert_eq!(doc["figures"][1]["median"], 6.0);
    let m = &doc["machine"];
    assert_eq!(m["name"], "testbox");
    assert!(m["cores"].as_u64().is_some_and(|c| c > 0), "{m}");
    assert!(m["kernel"].as_str().is_some_and(|k| !k.is_empty()), "{m}");
    assert!(m["cpu"].is_string(), "{m}");
    assert_eq!(doc["commit"].as_str().map(str::len), Some(40), "{}", doc["commit"]);
    assert!(doc["date"].is_string());
    assert_eq!(doc["notes"][0], "a note");
}

#[test]
fn make_report_writes_one_table_per_bench_and_the_reproductions() {
    let dir = tempfile::tempdir().expect("tempdir");
    let results = dir.path().join("results");
    std::fs::create_dir_all(results.join("reproduce")).expect("mkdir");
    record(&results, "serve", &["100", "120", "110"], "1.5");
    let reproduction = serde_json::json!({
        "name": "fixture", "paper": "A paper (2002)", "what": "Table 9: hit rates",
        "columns": ["case", "ember", "paper"], "rows": [["random", "46.2", 46]],
        "commands": ["ember demote t.ember --experiment"],
        "commit": "0123456789abcdef", "dirty": false, "date": "2026-01-01T00:00:00+00:00",
        "machine": {"name": "testbox", "cpu": "a CPU", "cores": 2, "memory_gib": 1.0,
                    "kernel": "6.1"}
    });
    std::fs::write(results.join("reproduce/fixture.json"), reproduction.to_string())
        .expect("write");
    let docs = dir.path().join("docs");
    python(
        &results,
        &[
            "bench/lib/report.py",
            "--results",
            results.to_str().expect("utf-8"),
            "--docs",
            docs.to_str().expect("utf-8"),
        ],
    );
    let bench = std::fs::read_to_string(docs.join("benchmarks.md")).expect("benchmarks.md");
    assert!(
        bench.contains("| [serve](#serve) | 1.50 | x / y | >= 2 | **not met** | testbox |"),
        "{bench}"
    );
    assert!(bench.contains("| ember IOPS | ember | 110 | 100..120 | 3 | IOPS |"), "{bench}");
    assert!(bench.contains("## writeback\n\nNo result recorded yet. Run `bench/writeback`."));
    assert!(bench.contains("- peer: a peer"), "{bench}");
    let rep = std::fs::read_to_string(docs.join("reproductions.md")).expect("reproductions.md");
    assert!(rep.contains("## A paper (2002): Table 9: hit rates"), "{rep}");
    assert!(rep.contains("| random | 46.2 | 46 |"), "{rep}");
    assert!(rep.contains("ember demote t.ember --experiment"), "{rep}");
}

/// docs/reference/laboratory.md's policy table holds, in its speed and memory columns, what
/// `make report` writes from the recorded results in bench/results/.
#[test]
fn the_policy_table_in_the_docs_is_what_make_report_writes() {
    let out = Command::new("python3")
        .current_dir(repo_root())
        .args(["bench/lib/report.py", "--check"])
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A figure of a fixture result: the name, whose, and the rounds' values.
fn figure(name: &str, who: &str, values: &[f64]) -> serde_json::Value {
    serde_json::json!({"name": name, "who": who, "values": values})
}

/// The policy table's speed column is ember's best round over libCacheSim's at 1 % and 10 %,
/// naming the measured form when it is not the row's default; a policy without a peer gives
/// ember's throughput; the simulator's bytes come from the memory notes; the real cache's are
/// bench/serve-scale's measured all-in bytes where recorded, else an estimate (the engine's 43
/// added to the simulator's); a policy with no result says so; the hand-written columns and the
/// rest of the page stay as they are.
#[test]
fn make_report_fills_the_policy_tables_speed_and_memory_columns() {
    let dir = tempfile::tempdir().expect("tempdir");
    let results = dir.path().join("results");
    std::fs::create_dir_all(&results).expect("mkdir");
    let note = |spec: &str, bytes: &str| {
        format!(
            "{spec} memory (counting allocator, 10% of the blocks): {spec}: capacity 100000 \
             blocks, 100000 resident, 5 misses, peak heap 1 bytes, {bytes} bytes per cached block"
        )
    };
    let doc = serde_json::json!({
        "bench": "sim-policies", "date": "2026-01-01T00:00:00+00:00",
        "figures": [
            figure("lfuda:lcs 1% ember", "ember", &[8.0, 10.0]),
            figure("lfuda:lcs 1% libCacheSim", "peer", &[2.0, 4.0]),
            figure("lfuda:lcs 10% ember", "ember", &[6.0]),
            figure("lfuda:lcs 10% libCacheSim", "peer", &[2.0]),
            figure("car 1% ember", "ember", &[9.5]),
            figure("car 10% ember", "ember", &[7.25]),
        ],
        "notes": [note("lfuda:lcs", "68.2"), note("car", "80.0"), note("lhd", "94.4")],
    });
    std::fs::write(results.join("sim-policies-x-testbox.json"), doc.to_string()).expect("write");
    let serve = serde_json::json!({
        "bench": "serve-scale", "date": "2026-01-01T00:00:00+00:00",
        "figures": [figure("all-in RSS per block, lfuda, 0.5M blocks", "ember", &[120.4])],
        "notes": [],
    });
    std::fs::write(results.join("serve-scale-x-testbox.json"), serve.to_string()).expect("write");
    let docs = dir.path().join("docs");
    std::fs::create_dir_all(docs.join("reference")).expect("mkdir");
    let begin = "<!-- policy table: the last three columns are written by `make report` \
                 (bench/lib/policy_table.py) from bench/results/; edit the others here -->";
    let page = format!(
        "# Page\n\nBefore.\n\n{begin}\n\n| policy | paper | parameters | exactness | a | b | c \
         |\n|---|---|---|---|---|---|---|\n| `lfuda` | Arlitt | `variant` (paper\\|lcs) | exact \
         | old | old | old |\n| `car` | Bansal | | none | | | |\n| `lhd` | Beckmann | | within \
         | | | |\n| `mq` | Zhou | | exact | 1 | 2 | 3 |\n\n<!-- end of the policy table -->\n\nAfter.\n"
    );
    let lab = docs.join("reference/laboratory.md");
    std::fs::write(&lab, &page).expect("write");
    let args = [
        "bench/lib/report.py",
        "--results",
        results.to_str().expect("utf-8"),
        "--docs",
        docs.to_str().expect("utf-8"),
    ];
    python(&results, &args);
    let got = std::fs::read_to_string(&lab).expect("laboratory.md");
    let rows: Vec<&str> = got.lines().filter(|l| l.starts_with("| `")).collect();
    assert_eq!(
        rows,
        [
            "| `lfuda` | Arlitt | `variant` (paper\\|lcs) | exact | 2.5 / 3.0 (`lfuda:lcs`) \
             | 68 (+ 24 a distinct count; `lfuda:lcs`) | 120 (at 0.5 M blocks) |",
            "| `car` | Bansal | | none | no peer; ember 9.5 / 7.2 M req/s | 80 | estimate 123 \
             (the engine's 43 + the policy's) |",
            "| `lhd` | Beckmann | | within | not recorded yet | 94 (38 of them the fixed 3.84 \
             MB of class tables at 100,000 blocks) | estimate 137 (the engine's 43 + the \
             policy's) |",
            "| `mq` | Zhou | | exact | not recorded yet | not recorded yet | not recorded yet |",
        ],
        "{got}"
    );
    assert!(got.starts_with("# Page\n\nBefore.\n\n") && got.ends_with("-->\n\nAfter.\n"), "{got}");
    // Written once, the page passes the check; changed by hand, it does not.
    let mut check = args.to_vec();
    check.push("--check");
    python(&results, &check);
    std::fs::write(&lab, got.replace("| 120 (at", "| 121 (at")).expect("write");
    let out = Command::new("python3")
        .current_dir(repo_root())
        .args(&check)
        .output()
        .expect("python3 runs");
    assert!(!out.status.success(), "a hand-edited measured column passes the check");
}
