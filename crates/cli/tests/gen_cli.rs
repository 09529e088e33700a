//! End-to-end tests of `ember trace gen`: run the binary, read the file back.

use ember_testkit::{ember_cmd, ember_fails, ember_stdout, words};
use ember_trace::gen::{Common, SeqConfig, ZipfConfig};
use ember_trace::{read_trace, Format, Op, ReadOptions, Trace};
use std::ffi::OsString;
use std::path::Path;

/// `ember trace gen LINE -o OUT` (LINE: the generator and its options), which must succeed;
/// its stdout.
fn gen(line: &str, out: &Path) -> String {
    ember_stdout(&gen_args(line, out))
}

/// `ember trace gen LINE -o OUT`, which must fail; its stderr.
fn gen_fails(line: &str, out: &Path) -> String {
    ember_fails(&gen_args(line, out))
}

fn gen_args(line: &str, out: &Path) -> Vec<OsString> {
    let line = format!("trace gen {line} -o");
    let mut args: Vec<OsString> = words(&line).into_iter().map(OsString::from).collect();
    args.push(out.into());
    args
}

fn read(path: &Path) -> (Trace, Format) {
    let (trace, stats) = read_trace(path, &ReadOptions::default())
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    (trace, stats.format)
}

#[test]
fn zipf_file_holds_exactly_the_library_trace() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("z.ember");
    let args = "zipf --alpha 0.9 --blocks 10000 --requests 20000 --seed 3 --write-ratio 0.2";
    let stdout = gen(args, &path);
    assert!(stdout.contains("wrote 20000 requests"), "{stdout}");
    let (trace, format) = read(&path);
    assert_eq!(format, Format::Ember);
    let common = Common { seed: 3, write_ratio: 0.2, ..Common::default() };
    let expected = ZipfConfig::new(0.9, 10_000, 20_000, common).trace().unwrap();
    assert_eq!(trace.requests, expected.requests);
    assert_eq!(trace.volumes.names(), &["zipf"]);
    let writes = trace.requests.iter().filter(|r| r.op == Op::Write).count();
    assert!(stdout.contains(&format!("{} writes", writes)), "{stdout}");
}

#[test]
fn same_seed_same_bytes_other_seed_other_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let run = |name: &str, seed: &str| {
        let path = dir.path().join(name);
        gen(&format!("uniform --blocks 500 --requests 3000 --seed {seed}"), &path);
        std::fs::read(&path).unwrap()
    };
    let a = run("a.ember", "7");
    let b = run("b.ember", "7");
    let c = run("c.ember", "8");
    assert_eq!(a, b);
    assert_ne!(a, c);
}

#[test]
fn ww_seq_reports_the_warmup_boundary() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("seq.ember");
    let stdout = gen("ww-seq --client-blocks 4 --array-blocks 4", &path);
    // N_seq = N_c + N_a - 1 = 7: 7 warm-up READS, 70 timed; 1000/s: timed from 7 ms.
    assert!(stdout.contains("warm-up: 7 requests (time_ns < 7000000)"), "{stdout}");
    assert!(stdout.contains("timed: 70 requests"), "{stdout}");
    let (trace, _) = read(&path);
    assert_eq!(trace.requests.len(), 77);
    let blocks: Vec<u64> = trace.requests.iter().map(|r| r.offset / 4096).collect();
    assert!(blocks.iter().enumerate().all(|(i, &b)| b == i as u64 % 7));
    assert_eq!(trace.volumes.names(), &["client0"]);
}

#[test]
fn ww_random_and_zipf_paper_defaults() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.ember");
    let stdout = gen("ww-random --seed 1", &path);
    assert!(stdout.contains("working set: 32768 blocks; warm-up: 32768 requests"), "{stdout}");
    assert!(stdout.contains("timed: 327680 requests"), "{stdout}");
    let path = dir.path().join("z.ember");
    let stdout = gen("ww-zipf --seed 1", &path);
    assert!(stdout.contains("working set: 49152 blocks; warm-up: 49152 requests"), "{stdout}");
    let (trace, _) = read(&path);
    assert_eq!(trace.requests.len(), 11 * 49152);
    assert!(trace.requests.iter().all(|r| r.offset / 4096 < 49152 && r.op == Op::Read));
}

#[test]
fn multi_client_disjoint_and_conjoint() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.ember");
    let args = "multi-client --clients 3 --blocks-per-client 100 --pattern zipf \
                --sharing disjoint --timed-per-client 400";
    let stdout = gen(args, &path);
    assert!(stdout.contains("array: 300 blocks"), "{stdout}");
    let (trace, _) = read(&path);
    assert_eq!(trace.volumes.names(), &["client0", "client1", "client2"]);
    assert_eq!(trace.requests.len(), 3 * 500);
    for r in &trace.requests {
        let block = r.offset / 4096;
        assert_eq!(block / 100, r.volume as u64, "client {} read block {block}", r.volume);
    }
    let stdout = gen("multi-client --clients 2 --blocks-per-client 50 --sharing conjoint", &path);
    assert!(stdout.contains("array: 50 blocks; shared blocks 0..50"), "{stdout}");
    let (trace, _) = read(&path);
    for pair in trace.requests.chunks(2) {
        assert_eq!((pair[0].volume, pair[1].volume), (0, 1));
        assert_eq!((pair[0].offset, pair[0].time_ns), (pair[1].offset, pair[1].time_ns));
    }
}

#[test]
fn format_follows_extension_or_flag() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("s.csv");
    let stdout = gen("seq --blocks 10 --requests 25", &csv);
    assert!(stdout.ends_with("(msr)\n"), "{stdout}");
    // Read as MSR explicitly: a trace starting at time 0 is stamped exactly at the FILETIME
    // epoch, which content sniffing does not take for MSR.
    let opts = ReadOptions { format: Some(Format::MsrCsv), ..ReadOptions::default() };
    let (trace, _) = read_trace(&csv, &opts).unwrap();
    let expected = SeqConfig::new(10, 25, Common::with_seed(1)).trace().unwrap();
    let blocks = |t: &Trace| t.requests.iter().map(|r| r.offset / 4096).collect::<Vec<_>>();
    assert_eq!(blocks(&trace), blocks(&expected));
    assert_eq!(trace.requests[24].time_ns - trace.requests[0].time_ns, 24_000_000);

    let og = dir.path().join("s.bin");
    gen("seq --blocks 10 --requests 25 --format oracle-general", &og);
    let keys = ember_trace::read_oracle_general_keys(&og).unwrap();
    assert_eq!(keys.len(), 25);
    assert_eq!(keys[13], ember_trace::block_key(0, 3));
}

#[test]
fn bad_arguments_fail_with_a_message() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("x.ember");
    for (line, want) in [
        ("uniform --blocks 10 --requests 5 --write-ratio 1.5", "write ratio"),
        ("zipf --blocks 0 --requests 5", "blocks"),
        ("seq --blocks 10 --requests 5 --format nope", "unknown trace format"),
    ] {
        assert!(gen_fails(line, &p).contains(want), "{line}");
    }
}

/// `ember trace gen … -o /dev/stdout` writes the trace alone on stdout (its summary goes to
/// stderr), so it can be piped into another command.
#[test]
fn a_trace_written_to_stdout_is_not_mixed_with_the_summary() {
    let args = words("trace gen uniform --blocks 100 --requests 500 --format ember -o /dev/stdout");
    let out = ember_cmd(&args).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("piped.ember");
    std::fs::write(&path, &out.stdout).unwrap();
    let (trace, format) = read(&path);
    assert_eq!(format, Format::Ember);
    assert_eq!(trace.requests.len(), 500);
    assert!(String::from_utf8_lossy(&out.stderr).contains("wrote 500 requests"));
}
