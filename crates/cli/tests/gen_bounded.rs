//! `ember trace gen bonfire` writes its trace in bounded memory (issue 17: "`ember trace gen`
//! writes billion-request traces in bounded memory"): 21.6 million requests (2.5 days at 100
//! requests a second, and the daily job) go to a pipe under an address-space limit
//! (`ulimit -v`) of 64 MiB. The generator that held the whole trace needed 32 bytes a request
//! (690 MB here) and died under that limit (seen: "memory allocation of ... bytes failed");
//! the stream keeps only the last hour of background accesses (360,000 of them) and the
//! daily job's block list. The library's `bonfire` (the stream collected) is pinned to the
//! held generator's output in `crates/trace/src/gen/bonfire.rs`.

use std::io::Read;
use std::process::{Command, Stdio};

const EMBER: &str = env!("CARGO_BIN_EXE_ember");
/// ember's format: a 39-byte header for one volume named "bonfire", then 24-byte records.
const HEADER: usize = 28 + 4 + 7;
const RECORD: usize = 24;

#[test]
fn bonfire_streams_millions_of_requests_under_64_mib() {
    let cmd = "ulimit -v 65536 && exec \"$0\" trace gen bonfire --rate 100 --days 2.5 --seed 5 \
               -o /dev/stdout --format ember";
    let mut child = Command::new("bash")
        .args(["-c", cmd, EMBER])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn ember trace gen bonfire");
    let mut out = child.stdout.take().expect("stdout");
    // Read the stream as it comes: count the records and check that times never go back (the
    // background and the daily job are merged in time order).
    let mut buf = vec![0u8; 1 << 20];
    let mut pending: Vec<u8> = Vec::new();
    let (mut bytes, mut records, mut last_time, mut job) = (0usize, 0u64, 0u64, 0u64);
    let mut header_left = HEADER;
    loop {
        let n = out.read(&mut buf).expect("read the trace");
        if n == 0 {
            break;
        }
        bytes += n;
        let mut data = &buf[..n];
        if header_left > 0 {
            let skip = header_left.min(data.len());
            header_left -= skip;
            data = &data[skip..];
        }
        pending.extend_from_slice(data);
        let whole = pending.len() / RECORD * RECORD;
        for r in pending[..whole].chunks_exact(RECORD) {
            let time = u64::from_le_bytes(r[0..8].try_into().expect("8 bytes"));
            let offset = u64::from_le_bytes(r[8..16].try_into().expect("8 bytes"));
            assert!(time >= last_time, "record {records}: time {time} before {last_time}");
            last_time = time;
            // The daily job's regions lie past the one-off space (2^28 blocks of 4 KiB).
            job += u64::from(offset >= (1u64 << 28) * 4096);
            records += 1;
        }
        pending.drain(..whole);
    }
    let status = child.wait().expect("wait");
    let mut err = String::new();
    child.stderr.take().expect("stderr").read_to_string(&mut err).expect("stderr");
    assert!(status.success(), "ember trace gen bonfire failed under 64 MiB: {err}");
    assert!(pending.is_empty(), "a truncated last record");
    // 2.5 days from 17:00 at 100 requests a second, and the daily job (64 regions of 1 MiB,
    // 256 blocks each) at 02:00 on the 3 days it covers.
    let background = 250 * 86_400;
    assert_eq!(job, 3 * 64 * 256, "daily-job requests");
    assert_eq!(records, background as u64 + job, "records");
    assert_eq!(bytes, HEADER + records as usize * RECORD);
    assert!(err.contains(&format!("wrote {records} requests")), "{err}");
}

/// `ember trace gen ensemble` draws a day at a time (`EnsembleStream`): 10 days of a million
/// block accesses (8.9 million requests) go to a pipe under `ulimit -v` 96 MiB. The generator
/// that held and sorted the whole trace (284 MB of requests) died under that limit (seen:
/// "memory allocation of ... bytes failed").
#[test]
fn ensemble_streams_day_by_day_under_96_mib() {
    let cmd = "ulimit -v 98304 && exec \"$0\" trace gen ensemble --days 10 \
               --accesses-per-day 1000000 -o /dev/stdout --format ember";
    let out = Command::new("bash").args(["-c", cmd, EMBER]).output().expect("run ensemble");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "ember trace gen ensemble failed under 96 MiB: {err}");
    let n: usize = err
        .split("ensemble: ")
        .nth(1)
        .and_then(|s| s.split(' ').next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no request count in {err}"));
    assert!(n > 8_000_000, "{n} requests");
    // ember's format: the header (magic, version, record size, count, the 12 volume names),
    // then 24 bytes a request.
    let header = out.stdout.len() - n * RECORD;
    assert!(out.stdout.starts_with(b"EMBERTRC"));
    assert!((28..28 + 12 * 16).contains(&header), "header of {header} bytes");
}

/// What the streamed `ember trace gen ensemble` writes is the trace the library generates
/// whole, written by the whole-trace writer: byte for byte.
#[test]
fn ensemble_stream_writes_the_whole_trace_byte_for_byte() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cli = dir.path().join("cli.ember");
    let st = Command::new(EMBER)
        .args(["trace", "gen", "ensemble", "--days", "3", "--accesses-per-day", "60000"])
        .args(["--seed", "4", "--format", "ember", "-o"])
        .arg(&cli)
        .output()
        .expect("run ensemble");
    assert!(st.status.success(), "{}", String::from_utf8_lossy(&st.stderr));
    let cfg = ember_trace::gen::ensemble::EnsembleConfig {
        days: 3,
        accesses_per_day: 60_000,
        seed: 4,
        ..ember_trace::gen::ensemble::EnsembleConfig::with_volumes(12)
    };
    let whole = ember_trace::gen::ensemble::generate(&cfg).expect("generate");
    let lib = dir.path().join("lib.ember");
    ember_trace::write_trace(&lib, ember_trace::Format::Ember, &whole, 4096).expect("write");
    let (a, b) = (std::fs::read(&cli).expect("cli"), std::fs::read(&lib).expect("lib"));
    assert!(whole.requests.len() > 100_000);
    assert_eq!(a.len(), b.len());
    assert!(a == b, "the streamed trace differs from the whole trace");
}
