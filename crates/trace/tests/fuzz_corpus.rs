//! Replays the stored fuzz corpus of the `trace` target (`fuzz/corpus/trace`,
//! docs/design/testing.md)
//! through the entry point the AFL++ target uses: every input is read as a trace file the way
//! the CLI reads one. No input may panic; a failed read must be a clean error naming the
//! file. Files named `seed-*` are valid traces and must read without error.
//!
//! `EMBER_PEER_DATA=.cache/peer cargo test --release -p ember-trace --test fuzz_corpus --
//! --ignored write_seeds` re-writes the seeds (vscsi and oracleGeneral seeds come from the
//! head of libCacheSim's cloudPhysicsIO traces, which `make setup` fetches).
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "integration-test helpers")]

use std::io::Write;
use std::path::{Path, PathBuf};

use ember_trace::fuzz_entry::{input_prefix, read_trace_input};
use ember_trace::{write_trace, Format, Op, Request, Trace, TraceError, VolumeTable};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn corpus() -> PathBuf {
    root().join("fuzz/corpus/trace")
}

#[test]
fn trace_corpus() {
    let mut files: Vec<_> = std::fs::read_dir(corpus())
        .expect("fuzz/corpus/trace")
        .map(|e| e.expect("directory entry").path())
        .collect();
    files.sort();
    assert!(files.len() >= 10, "the trace corpus holds {} files", files.len());
    let mut ok = 0;
    for path in &files {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let data = std::fs::read(path).unwrap();
        let outcome = std::panic::catch_unwind(|| read_trace_input(&data))
            .unwrap_or_else(|_| panic!("fuzz corpus input trace/{name} panicked"));
        match &outcome.result {
            Ok(_) => ok += 1,
            Err(e) => {
                assert!(!name.starts_with("seed-"), "{name}: a valid seed failed: {e}");
                // A clean error says which file (or which option) is at fault.
                let message = e.to_string();
                let names_file =
                    message.contains("ember-fuzz-trace-") || matches!(e, TraceError::Invalid(_));
                assert!(names_file, "{name}: error without context: {message}");
            }
        }
        if name.starts_with("seed-") {
            let requests = outcome.result.as_ref().map(|&n| n).unwrap_or(0);
            assert!(requests > 0, "{name}: a seed read no requests");
        }
    }
    assert!(ok >= 10, "only {ok} of {} inputs read cleanly", files.len());
}

fn save(name: &str, format: Option<Format>, skip_bad: bool, body: &[u8]) {
    let mut data = input_prefix(format, skip_bad).to_vec();
    data.extend_from_slice(body);
    std::fs::create_dir_all(corpus()).unwrap();
    std::fs::write(corpus().join(name), &data).unwrap();
    println!("trace/{name}: {} bytes", data.len());
}

fn sample_trace() -> Trace {
    let mut volumes = VolumeTable::new();
    let a = volumes.intern("0");
    let b = volumes.intern("1");
    let requests = (0..12u64)
        .map(|i| Request {
            time_ns: i * 1_000_000,
            volume: if i % 3 == 0 { b } else { a },
            op: if i % 4 == 0 { Op::Write } else { Op::Read },
            offset: (i * 7 % 5) * 4096,
            length: 4096 * (1 + (i % 2) as u32),
        })
        .collect();
    Trace::new(requests, volumes)
}

fn written(format: Format, name: &str) -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join(name);
    write_trace(&p, format, &sample_trace(), 4096).unwrap();
    std::fs::read(p).unwrap()
}

fn head(path: &Path, bytes: usize) -> Option<Vec<u8>> {
    let mut all = std::fs::read(path).ok()?;
    all.truncate(bytes);
    Some(all)
}

#[test]
#[ignore = "re-writes the seed corpus; run by hand"]
fn write_seeds() {
    let data = root().join("crates/trace/tests/data");
    let read = |n: &str| std::fs::read(data.join(n)).unwrap();
    save("seed-msr", Some(Format::MsrCsv), false, &read("msr_sample.csv"));
    save("seed-spc", Some(Format::SpcCsv), false, &read("spc_sample.spc"));
    save("seed-blkparse", Some(Format::Blkparse), false, &read("blkparse_sample.txt"));
    save("seed-csv", Some(Format::Csv), false, &read("csv_sample.csv"));
    save("seed-detect-msr", None, false, &read("msr_sample.csv"));
    save("seed-detect-blkparse", None, false, &read("blkparse_sample.txt"));
    save("seed-msr-skip-bad", Some(Format::MsrCsv), true, &read("msr_bad.csv"));
    save("seed-csv-skip-bad", Some(Format::Csv), true, &read("csv_bad.csv"));
    save("seed-blkparse-skip-bad", Some(Format::Blkparse), true, &read("blkparse_bad.txt"));
    save("seed-spc-skip-bad", Some(Format::SpcCsv), true, &read("spc_bad.spc"));
    save("seed-ember", Some(Format::Ember), false, &written(Format::Ember, "t.ember"));
    save("seed-detect-ember", None, false, &written(Format::Ember, "t.ember"));
    save("seed-ember-csv", Some(Format::Csv), false, &written(Format::Csv, "t.csv"));
    save(
        "seed-oracle-written",
        Some(Format::OracleGeneral),
        false,
        &written(Format::OracleGeneral, "t.bin"),
    );
    save("seed-msr-written-gz", None, false, &written(Format::MsrCsv, "t.csv.gz"));
    save(
        "seed-spc-written-zst",
        Some(Format::SpcCsv),
        false,
        &written(Format::SpcCsv, "t.spc.zst"),
    );
    // Malformed inputs that must fail cleanly.
    save("bad-msr", Some(Format::MsrCsv), false, &read("msr_bad.csv"));
    save(
        "bad-truncated-ember",
        Some(Format::Ember),
        false,
        &written(Format::Ember, "t.ember")[..40],
    );
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(&read("msr_sample.csv")).unwrap();
    let mut gz = gz.finish().unwrap();
    gz.truncate(gz.len() - 9);
    save("bad-truncated-gz", Some(Format::MsrCsv), false, &gz);

    let peer = std::env::var_os("EMBER_PEER_DATA").map(PathBuf::from);
    let peer =
        peer.expect("set EMBER_PEER_DATA to the directory of libCacheSim's cloudPhysicsIO traces");
    // 960 bytes: 20 vscsi v2 records (48 bytes) and 40 oracleGeneral records (24 bytes).
    let vscsi = head(&peer.join("cloudPhysicsIO.vscsi"), 960).expect("cloudPhysicsIO.vscsi");
    save("seed-vscsi", Some(Format::Vscsi), false, &vscsi);
    save("seed-detect-vscsi", None, false, &vscsi);
    let og = head(&peer.join("cloudPhysicsIO.oracleGeneral.bin"), 960).expect("oracleGeneral");
    save("seed-oracle", Some(Format::OracleGeneral), false, &og);
    save("bad-detect-oracle", None, false, &og);
    save("bad-truncated-oracle", Some(Format::OracleGeneral), false, &og[..100]);
}

/// Found by the `trace` fuzz target (`fuzz/corpus/trace/crash-time-fraction-overflow`): a
/// time with a 30-digit fraction overflowed the exact decimal conversion, so a release build
/// read a wrong time. A fraction rounds to the nearest nanosecond however long it is.
#[test]
fn long_time_fractions_round_to_the_nanosecond() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("long.spc");
    std::fs::write(
        &path,
        "0,303567,3584,w,0.555555555555555555555551080080\n\
         0,1,512,r,1.999999999999999999999999999999\n\
         0,2,512,r,0.0000000005000000000000000000001\n",
    )
    .unwrap();
    let opts = ember_trace::ReadOptions { format: Some(Format::SpcCsv), ..Default::default() };
    let (trace, _) = ember_trace::read_trace(&path, &opts).unwrap();
    let times: Vec<u64> = trace.requests.iter().map(|r| r.time_ns).collect();
    assert_eq!(times, vec![555_555_556, 2_000_000_000, 1]);
}
