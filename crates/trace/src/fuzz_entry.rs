//! Entry point for the coverage-guided fuzz target `trace` in `fuzz/` and for the corpus
//! replay test (`tests/fuzz_corpus.rs`); not part of ember's API. See docs/design/testing.md.

use std::path::PathBuf;

use crate::{open, write_trace, Format, ReadOptions, Trace, TraceError, VolumeTable};

/// The format an input's first byte selects, `b % 9`: `Format::ALL[0..7]`, content
/// detection (`None`) for 7, the warmup log for 8.
pub fn selected_format(selector: u8) -> Option<Format> {
    match selector % 9 {
        7 => None,
        8 => Some(Format::WarmupLog),
        i => Format::ALL.get(usize::from(i)).copied(),
    }
}

/// The first two bytes of an input for `format` (`None`: detect) read with or without
/// `--skip-bad`; the file's bytes follow them.
pub fn input_prefix(format: Option<Format>, skip_bad: bool) -> [u8; 2] {
    let index = match format {
        None => 7,
        Some(Format::WarmupLog) => 8,
        Some(f) => Format::ALL.iter().position(|&g| g == f).unwrap_or(7),
    };
    [index as u8, u8::from(skip_bad)]
}

/// What reading one input gave.
#[derive(Debug)]
pub struct TraceOutcome {
    /// The requests read, or the error that ended reading.
    pub result: Result<usize, TraceError>,
    /// Malformed records skipped.
    pub skipped: u64,
}

struct TempFile(PathBuf);

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn temp_path(tag: &str) -> TempFile {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    // No known extension: the format is given, or detected from the content.
    TempFile(
        std::env::temp_dir().join(format!("ember-fuzz-trace-{}-{n}.{tag}", std::process::id())),
    )
}

/// Read `input` as a trace file the way the CLI does (`ember trace info TRACE [--format F]
/// [--skip-bad]`, through [`crate::open`]): byte 0 selects the format
/// ([`selected_format`]), bit 0 of byte 1 is `--skip-bad`, the rest is the file.
///
/// Checks on what a reader accepts (a panic means a bug): every request ends at or below
/// 2^64 bytes and its blocks can be computed; a trace that reads cleanly survives a round
/// trip through ember's binary format unchanged; an oracleGeneral file gives the same
/// records through every oracleGeneral entry point.
pub fn read_trace_input(input: &[u8]) -> TraceOutcome {
    let (format, skip_bad, body) = match input {
        [f, s, rest @ ..] => (selected_format(*f), s & 1 != 0, rest),
        _ => (None, false, &[][..]),
    };
    let file = temp_path("in");
    if let Err(source) = std::fs::write(&file.0, body) {
        return TraceOutcome { result: Err(crate::error::io_err(&file.0, source)), skipped: 0 };
    }
    let opts = ReadOptions { format, skip_bad, ..ReadOptions::default() };
    let mut reader = match open(&file.0, &opts) {
        Ok(r) => r,
        Err(e) => return TraceOutcome { result: Err(e), skipped: 0 },
    };
    let mut requests = Vec::new();
    let mut failure = None;
    for r in reader.by_ref() {
        match r {
            Ok(request) => {
                assert!(
                    request.offset.checked_add(u64::from(request.length)).is_some(),
                    "a reader accepted a request ending beyond 2^64 bytes: {request:?}"
                );
                let _ = request.blocks(opts.block_size);
                requests.push(request);
            }
            Err(e) => {
                failure = Some(e);
                break;
            }
        }
    }
    let skipped = reader.skipped();
    let read_format = reader.format();
    let volumes = reader.volumes().clone();
    if let Some(e) = failure {
        return TraceOutcome { result: Err(e), skipped };
    }
    let count = requests.len();
    round_trip(Trace::new(requests, volumes));
    if read_format == Format::OracleGeneral {
        oracle_entry_points_agree(&file.0, count, skip_bad);
    }
    TraceOutcome { result: Ok(count), skipped }
}

/// A trace read cleanly must come back unchanged from ember's binary format.
fn round_trip(trace: Trace) {
    let out = temp_path("ember");
    if write_trace(&out.0, Format::Ember, &trace, crate::DEFAULT_BLOCK_SIZE).is_err() {
        return;
    }
    let opts = ReadOptions { format: Some(Format::Ember), ..ReadOptions::default() };
    let (back, _) = crate::read_trace(&out.0, &opts)
        .unwrap_or_else(|e| panic!("ember could not read back the trace it wrote: {e}"));
    assert_eq!(back.requests, trace.requests, "requests changed in an ember-format round trip");
    assert_eq!(names(&back.volumes), names(&trace.volumes), "volume names changed");
}

fn names(volumes: &VolumeTable) -> Vec<String> {
    volumes.names().to_vec()
}

fn oracle_entry_points_agree(path: &std::path::Path, count: usize, skip_bad: bool) {
    let keys = crate::read_oracle_general_keys(path);
    let records = crate::read_oracle_general_records(path);
    match (keys, records) {
        (Ok(keys), Ok(records)) => {
            assert_eq!(keys.len(), records.len(), "oracleGeneral keys and records disagree");
            if !skip_bad {
                assert!(
                    records.len() >= count,
                    "open() read more oracleGeneral records than exist"
                );
            }
        }
        (Err(_), Err(_)) => {}
        (k, r) => panic!(
            "oracleGeneral entry points disagree: keys {:?}, records {:?}",
            k.map(|k| k.len()),
            r.map(|r| r.len())
        ),
    }
}
