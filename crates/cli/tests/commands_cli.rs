//! One subcommand per experiment: `ember sievestore` and `ember demote` give what the old
//! `ember sim` spellings gave, and those spellings still run, with a deprecation note.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "integration-test helpers")]

use std::path::Path;
use std::process::{Command, Output};

fn ember(args: &[&str]) -> Output {
    let o = Command::new(env!("CARGO_BIN_EXE_ember")).args(args).output().unwrap();
    assert!(o.status.success(), "ember {args:?}: {}", String::from_utf8_lossy(&o.stderr));
    o
}

fn json(p: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn new_commands_equal_the_deprecated_spellings() {
    let dir = tempfile::tempdir().unwrap();
    let d = |n: &str| dir.path().join(n).to_string_lossy().into_owned();
    let trace = d("ens.csv");
    ember(
        &["trace", "gen", "ensemble", "--volumes", "3", "--days", "2", "--accesses-per-day"]
            .iter()
            .copied()
            .chain(["5000", "-o", &trace])
            .collect::<Vec<_>>(),
    );

    // SieveStore's runs.
    let sieve = ["--admission", "aod,sievestore-c", "--size", "1%,5%", "--quiet"];
    let new = ember(&[&["sievestore", &trace][..], &sieve, &["--json", &d("new.json")]].concat());
    assert!(!stderr(&new).contains("deprecated"), "{}", stderr(&new));
    let old = ember(&[&["sim", &trace][..], &sieve, &["--json", &d("old.json")]].concat());
    assert!(
        stderr(&old).contains("`ember sim --admission` is deprecated")
            && stderr(&old).contains("use `ember sievestore`"),
        "{}",
        stderr(&old)
    );
    let (a, b) = (json(&dir.path().join("new.json")), json(&dir.path().join("old.json")));
    assert_eq!(a, b);
    assert_eq!(a.as_array().map(Vec::len), Some(4));

    // The hierarchy.
    let h = ["--client-size", "64", "--array-size", "64", "--scheme", "demote", "--quiet"];
    ember(&[&["demote", &trace][..], &h, &["--json", &d("dn.json")]].concat());
    let old =
        ember(&[&["sim", &trace, "--hierarchy"][..], &h, &["--json", &d("do.json")]].concat());
    assert!(stderr(&old).contains("`ember sim --hierarchy` is deprecated"), "{}", stderr(&old));
    let strip = |mut v: serde_json::Value| {
        for s in v["schemes"].as_array_mut().unwrap() {
            let o = s.as_object_mut().unwrap();
            o.remove("run_seconds");
            o.remove("run_cpu_seconds");
        }
        v
    };
    let (a, b) =
        (strip(json(&dir.path().join("dn.json"))), strip(json(&dir.path().join("do.json"))));
    assert_eq!(a, b);
    assert_eq!(a["schemes"].as_array().map(Vec::len), Some(2));

    // `ember sim` itself no longer takes the experiments' flags under its own name.
    let o = Command::new(env!("CARGO_BIN_EXE_ember"))
        .args(["sim", &trace, "--experiment", "nope"])
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(stderr(&o).contains("--experiment"), "{}", stderr(&o));
}
