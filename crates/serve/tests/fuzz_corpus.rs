//! Replays the stored fuzz corpora of the control protocol and the config file
//! (`fuzz/corpus/control`, `fuzz/corpus/config`, docs/design/testing.md) through the entry
//! points the AFL++ targets use. A panic fails the test with the input's name. Files named
//! `seed-*` are valid and must succeed: every line of a control seed is a request, a config
//! seed parses; files named `bad-*` must be refused.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "integration-test helpers")]

use std::path::Path;

use ember_serve::fuzz_entry::{config_file, control_session, LineOutcome};
use ember_testkit::{fuzz_corpus as corpus, fuzz_inputs as inputs};

fn named<T>(name: &str, run: impl FnOnce() -> T + std::panic::UnwindSafe) -> T {
    std::panic::catch_unwind(run).unwrap_or_else(|_| panic!("fuzz corpus input {name} panicked"))
}

#[test]
fn control_corpus() {
    let mut refused = 0;
    for (name, data) in inputs("control") {
        let outcomes = named(&name, || control_session(&data));
        if name.starts_with("seed-") {
            assert!(!outcomes.is_empty(), "{name}: no request");
            for o in &outcomes {
                assert!(matches!(o, LineOutcome::Request(_)), "{name}: {o:?}");
            }
        }
        if name.starts_with("bad-") {
            assert!(
                outcomes.iter().all(|o| !matches!(o, LineOutcome::Request(_))),
                "{name}: {outcomes:?}"
            );
            refused += outcomes.len();
        }
    }
    assert!(refused > 0);
}

#[test]
fn config_corpus() {
    for (name, data) in inputs("config") {
        let result = named(&name, || config_file(&data));
        if name.starts_with("seed-") {
            assert!(result.is_ok(), "{name}: {result:?}");
        }
        if name.starts_with("bad-") {
            let e = result.expect_err(&name);
            assert!(e.starts_with("fuzz.toml"), "{name}: {e}");
        }
    }
}

/// The commented example a user starts from is in the corpus as it is.
#[test]
fn the_example_is_a_seed() {
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/ember.toml");
    let seed = corpus("config").join("seed-example");
    assert_eq!(std::fs::read(example).unwrap(), std::fs::read(seed).unwrap());
}
