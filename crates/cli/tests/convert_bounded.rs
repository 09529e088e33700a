//! `ember trace convert` streams a regular file: a first pass reads the volume
//! names, a second writes request by request (oracleGeneral through temporary files), so
//! the trace is never held. 4 million requests of MSR-Cambridge CSV (128 MB as requests in
//! memory) convert to ember's format and to oracleGeneral under `ulimit -v` 64 MiB, byte for
//! byte what the in-memory path (the same file through a pipe, unlimited) writes; the
//! in-memory path dies under the same limit (the negative control).
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "integration-test helpers")]

use ember_testkit::{ember_on_trace, gen_trace};
use std::path::Path;

/// Address space allowed to the limited runs, in KiB.
const LIMIT_KIB: u64 = 64 * 1024;

/// `ember trace convert` of `input` (through a pipe if `pipe`) to `output`, under the limit
/// if `limited`; returns (success, stderr).
fn convert(input: &Path, output: &Path, to: &str, pipe: bool, limited: bool) -> (bool, String) {
    let line = format!("trace convert {{}} {{}} --format msr --to {to}");
    let o = ember_on_trace(&line, input, &[output], pipe, limited.then_some(LIMIT_KIB));
    (o.success(), o.stderr)
}

#[test]
fn four_million_csv_requests_convert_under_64_mib_as_the_in_memory_path_does() {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = |name: &str| dir.path().join(name);
    let csv = p("zipf.csv");
    gen_trace("zipf --alpha 0.9 --blocks 200000 --requests 4000000 --seed 9", &csv);
    for (to, name) in [("ember", "out.ember"), ("oracle-general", "out.oracleGeneral.bin")] {
        let (streamed, whole) = (p(&format!("streamed.{name}")), p(&format!("whole.{name}")));
        let (ok, err) = convert(&csv, &streamed, to, false, true);
        assert!(ok, "streamed convert to {to} failed under ulimit -v {LIMIT_KIB}: {err}");
        assert!(err.contains("converted 4000000 requests"), "{err}");
        let (ok, err) = convert(&csv, &whole, to, true, false);
        assert!(ok, "{err}");
        let (a, b) =
            (std::fs::read(&streamed).expect("read"), std::fs::read(&whole).expect("read"));
        assert!(a.len() > 4_000_000 * 20, "{to}: {} bytes", a.len());
        assert!(a == b, "{to}: the streamed output differs from the in-memory path's");
        std::fs::remove_file(&whole).expect("remove");
        std::fs::remove_file(&streamed).expect("remove");
    }
    // Negative control: the in-memory path cannot run in this limit.
    let (ok, _) = convert(&csv, &p("limited.ember"), "ember", true, true);
    assert!(!ok, "the in-memory convert fit in {LIMIT_KIB} KiB, so the limit proves nothing");
}
