//! `ember trace gen bonfire` writes its trace in bounded memory ("`ember trace gen`
//! writes billion-request traces in bounded memory"): 21.6 million requests (2.5 days at 100
//! requests a second, and the daily job) go to a pipe under an address-space limit
//! (`ulimit -v`) of 64 MiB. The generator that held the whole trace needed 32 bytes a request
//! (690 MB here) and died under that limit (seen: "memory allocation of ... bytes failed");
//! the stream keeps only the last hour of background accesses (360,000 of them) and the
//! daily job's block list. The library's `bonfire` (the stream collected) is pinned to the
//! held generator's output in `crates/trace/src/gen/bonfire.rs`.
//!
//! The generators whose length is set by the cache sizes they model (`ww-random`, `ww-seq`,
//! `ww-zipf` and `multi-client` in each sharing mode) stream as well: 10 to 23 million
//! requests each under `ulimit -v` 64 MiB, where the generators that held the trace died
//! ("memory allocation of 704000000 bytes failed" for 22 million requests). Their bytes in
//! every output format are pinned to what the held generators wrote.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "integration-test helpers")]

use ember_testkit::fnv;
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

/// The generators whose length is set by the cache sizes they model, with small sizes, an
/// awkward rate and writes: `ember trace gen` arguments and a file stem.
const SIZED: [(&str, &str); 6] = [
    ("ww-random", "ww-random --client-blocks 300 --array-blocks 200 --timed-multiplier 3"),
    ("ww-seq", "ww-seq --client-blocks 300 --array-blocks 200 --timed-multiplier 3"),
    ("ww-zipf", "ww-zipf --alpha 0.8 --client-blocks 300 --array-blocks 200 --timed-multiplier 3"),
    (
        "mc-disjoint",
        "multi-client --clients 3 --blocks-per-client 200 --pattern zipf --sharing disjoint \
         --warmup-per-client 150 --timed-per-client 700",
    ),
    (
        "mc-conjoint",
        "multi-client --clients 3 --blocks-per-client 200 --pattern random --sharing conjoint \
         --warmup-per-client 150 --timed-per-client 700",
    ),
    (
        "mc-partial",
        "multi-client --clients 3 --blocks-per-client 200 --pattern seq --sharing partial \
         --shared-fraction 0.3 --warmup-per-client 150 --timed-per-client 700",
    ),
];

/// Each sized generator's output in every format (ember to a file, to a pipe and zstd;
/// MSR CSV; oracleGeneral) and the lines it prints, pinned as the generators that held the
/// whole trace wrote them: (name, FNV-1a of the bytes, length, FNV-1a of what it printed).
#[test]
fn sized_generators_write_the_pinned_bytes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut got = Vec::new();
    for (stem, args) in SIZED {
        let common = ["--seed", "7", "--rate", "333", "--write-ratio", "0.3"];
        for ext in ["ember", "csv", "oracleGeneral.bin", "ember.zst", "pipe"] {
            let path = dir.path().join(format!("{stem}.{ext}"));
            let mut cmd = Command::new(EMBER);
            cmd.args(["trace", "gen"]).args(args.split_whitespace()).args(common).arg("-o");
            let out = if ext == "pipe" {
                cmd.args(["/dev/stdout", "--format", "ember"]).output().expect("run")
            } else {
                cmd.arg(&path).output().expect("run")
            };
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(out.status.success(), "{stem} {ext}: {err}");
            let (bytes, said) = if ext == "pipe" {
                (out.stdout, out.stderr)
            } else {
                (std::fs::read(&path).expect("read"), out.stdout)
            };
            // What it printed names the output file: leave the name out.
            let said = String::from_utf8_lossy(&said).replace(&path.display().to_string(), "OUT");
            got.push((format!("{stem}.{ext}"), fnv(&bytes), bytes.len(), fnv(said.as_bytes())));
        }
    }
    let want: Vec<(String, u64, usize, u64)> = include_str!("data/sized_generators.txt")
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            let n = |i: usize| w[i].parse::<u64>().unwrap_or_else(|e| panic!("{l}: {e}"));
            (w[0].to_string(), n(1), n(2) as usize, n(3))
        })
        .collect();
    assert_eq!(want.len(), SIZED.len() * 5);
    assert_eq!(got, want);
}

/// One record of ember's format.
struct Rec {
    time: u64,
    offset: u64,
    length: u32,
    volume: u32,
}

/// What a generator run under an address-space limit wrote and said.
struct Run {
    /// Records read.
    records: u64,
    /// The header's record count.
    header_count: u64,
    /// The header's volume names.
    volumes: Vec<String>,
    /// What ember printed (on stderr, the trace going to stdout).
    said: String,
}

/// Run `ember trace gen ARGS -o /dev/stdout --format ember` under `ulimit -v LIMIT_KIB`,
/// reading ember's format from the pipe as it comes and handing each record to `each`.
fn gen_under_limit(limit_kib: u64, args: &str, mut each: impl FnMut(&Rec)) -> Run {
    use std::io::BufRead;
    let cmd = format!(
        "ulimit -v {limit_kib} && exec \"$0\" trace gen {args} -o /dev/stdout --format ember"
    );
    let mut child = Command::new("bash")
        .args(["-c", &cmd, EMBER])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn ember trace gen");
    let mut err_pipe = child.stderr.take().expect("stderr");
    let err_reader = std::thread::spawn(move || {
        let mut s = String::new();
        err_pipe.read_to_string(&mut s).map(|_| s)
    });
    let mut out = std::io::BufReader::with_capacity(1 << 20, child.stdout.take().expect("out"));
    let u32_of = |out: &mut std::io::BufReader<_>| -> Option<u32> {
        let mut b = [0u8; 4];
        out.read_exact(&mut b).ok().map(|_| u32::from_le_bytes(b))
    };
    let mut magic = [0u8; 8];
    let header_ok = out.read_exact(&mut magic).is_ok() && &magic == b"EMBERTRC";
    let mut run = Run { records: 0, header_count: 0, volumes: Vec::new(), said: String::new() };
    if header_ok {
        assert_eq!((u32_of(&mut out), u32_of(&mut out)), (Some(1), Some(RECORD as u32)));
        let mut count = [0u8; 8];
        out.read_exact(&mut count).expect("record count");
        run.header_count = u64::from_le_bytes(count);
        let names = u32_of(&mut out).expect("volume count");
        for _ in 0..names {
            let len = u32_of(&mut out).expect("name length") as usize;
            let mut name = vec![0u8; len];
            out.read_exact(&mut name).expect("name");
            run.volumes.push(String::from_utf8(name).expect("UTF-8 name"));
        }
        let mut r = [0u8; RECORD];
        while !out.fill_buf().expect("read the trace").is_empty() {
            out.read_exact(&mut r).expect("a whole record");
            let vo = u32::from_le_bytes(r[20..24].try_into().expect("4 bytes"));
            each(&Rec {
                time: u64::from_le_bytes(r[0..8].try_into().expect("8 bytes")),
                offset: u64::from_le_bytes(r[8..16].try_into().expect("8 bytes")),
                length: u32::from_le_bytes(r[16..20].try_into().expect("4 bytes")),
                volume: vo & !(1 << 31),
            });
            run.records += 1;
        }
    }
    let status = child.wait().expect("wait");
    run.said = err_reader.join().expect("stderr thread").expect("stderr");
    assert!(status.success(), "ember trace gen {args} failed under {limit_kib} KiB: {}", run.said);
    assert!(header_ok, "no ember header from {args}: {}", run.said);
    run
}

/// The warm-up line of a sized generator: (working set, warm-up requests, timed_start_ns).
fn warm_up_line(said: &str) -> (u64, u64, u64) {
    let num = |after: &str| -> u64 {
        said.split(after)
            .nth(1)
            .and_then(|s| s.split(|c: char| !c.is_ascii_digit()).next())
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("no '{after}' in {said}"))
    };
    (num("working set: "), num("warm-up: "), num("(time_ns < "))
}

/// `ember trace gen ww-random` streams: N_c = N_a = 10^6 gives N_rand = 2 million blocks and
/// 22 million requests, written to a pipe under `ulimit -v` 64 MiB. Uniform over the working
/// set with 11 draws a block, all but about e^-11 of the blocks are read.
#[test]
fn ww_random_streams_22_million_requests_under_64_mib() {
    let n = 2_000_000u64;
    let mut seen = vec![false; n as usize];
    let (mut last, mut warm_up, mut outside) = (None::<u64>, 0u64, 0u64);
    let run = gen_under_limit(
        65536,
        "ww-random --client-blocks 1000000 --array-blocks 1000000 --seed 3",
        |r| {
            assert!(last.is_none_or(|t| r.time > t), "times must increase");
            last = Some(r.time);
            assert_eq!((r.length, r.volume), (4096, 0));
            match seen.get_mut((r.offset / 4096) as usize) {
                Some(s) => *s = true,
                None => outside += 1,
            }
            warm_up += u64::from(r.time < n * 1_000_000);
        },
    );
    let (ws, warm, start) = warm_up_line(&run.said);
    assert_eq!((ws, warm), (n, n));
    assert_eq!(start, n * 1_000_000, "1000 requests a second: request n at n ms");
    assert_eq!((run.records, run.header_count), (11 * n, 11 * n));
    assert_eq!(run.volumes, ["client0"]);
    assert_eq!(outside, 0, "blocks beyond N_rand");
    let read = seen.iter().filter(|&&s| s).count() as f64;
    // Expected unread: n e^-11 = 33.4 blocks (sd about 5.8).
    assert!(n as f64 - read < 80.0, "{read} of {n} blocks read");
    assert_eq!(warm_up, n, "requests stamped before the timed part");
}

/// `ember trace gen ww-seq` streams: N_seq = N_c + N_a - 1 = 1,999,999 blocks, one warm-up
/// pass and ten timed passes (21,999,989 requests) to a pipe under `ulimit -v` 64 MiB; request
/// `i` reads block `i mod N_seq`.
#[test]
fn ww_seq_streams_22_million_requests_under_64_mib() {
    let n = 1_999_999u64;
    let (mut i, mut wrong) = (0u64, 0u64);
    let run = gen_under_limit(
        65536,
        "ww-seq --client-blocks 1000000 --array-blocks 1000000 --write-ratio 0.1",
        |r| {
            wrong += u64::from(r.offset != (i % n) * 4096 || r.time != i * 1_000_000);
            i += 1;
        },
    );
    assert_eq!(wrong, 0, "requests off the loop or off the clock");
    assert_eq!((run.records, run.header_count), (11 * n, 11 * n));
    assert_eq!(warm_up_line(&run.said), (n, n, n * 1_000_000));
    assert!(run.said.contains("timed: 19999990 requests"), "{}", run.said);
}

/// `ember trace gen ww-zipf` streams: N_c = N_a = 700,000 gives N_Zipf = 2.1 million blocks
/// and 23.1 million requests, to a pipe under `ulimit -v` 64 MiB. The thirds Z_0, Z_1, Z_2 of
/// the blocks get the exact Zipf(1) masses H(N/3) / H(N), ... (Wong and Wilkes section 3.4's
/// construction; at this N they are 92.7 %, 4.6 % and 2.7 %).
#[test]
fn ww_zipf_streams_23_million_requests_under_64_mib() {
    let n = 2_100_000u64;
    let third = n / 3;
    let mut thirds = [0u64; 3];
    let mut outside = 0u64;
    let run = gen_under_limit(
        65536,
        "ww-zipf --client-blocks 700000 --array-blocks 700000 --seed 9",
        |r| match thirds.get_mut((r.offset / 4096 / third) as usize) {
            Some(t) => *t += 1,
            None => outside += 1,
        },
    );
    assert_eq!((run.records, run.header_count, outside), (11 * n, 11 * n, 0));
    assert_eq!(warm_up_line(&run.said), (n, n, n * 1_000_000));
    let h = |k: u64| (1..=k).map(|i| 1.0 / i as f64).sum::<f64>();
    let total = h(n);
    let exact =
        [h(third) / total, (h(2 * third) - h(third)) / total, (total - h(2 * third)) / total];
    for z in 0..3 {
        let share = thirds[z] as f64 / run.records as f64;
        // 23.1 million draws: sd below sqrt(0.25 / 23.1e6) = 0.0001.
        assert!((share - exact[z]).abs() < 0.001, "Z_{z}: {share} vs {}", exact[z]);
    }
}

/// `ember trace gen multi-client` streams: 4 partially sharing clients (a quarter of each
/// 500,000-block working set common), 22 million requests in all, to a pipe under
/// `ulimit -v` 64 MiB. Every request is a shared block or one of its own client's private
/// blocks, the clients take turns, and a quarter of the uniform READS go to shared blocks.
#[test]
fn multi_client_partial_streams_22_million_requests_under_64_mib() {
    let (clients, w, shared) = (4u64, 500_000u64, 125_000u64);
    let private = w - shared;
    let (mut i, mut strays, mut to_shared) = (0u64, 0u64, 0u64);
    let mut last = 0u64;
    let run = gen_under_limit(
        65536,
        "multi-client --clients 4 --blocks-per-client 500000 --sharing partial \
         --shared-fraction 0.25 --pattern random",
        |r| {
            let k = r.volume as u64;
            let b = r.offset / 4096;
            let own = shared + k * private..shared + (k + 1) * private;
            strays += u64::from(k != i % clients || !(b < shared || own.contains(&b)));
            to_shared += u64::from(b < shared);
            assert!(r.time >= last, "request {i}: time goes back");
            last = r.time;
            i += 1;
        },
    );
    let total = clients * 11 * w;
    assert_eq!((run.records, run.header_count, strays), (total, total, 0));
    assert_eq!(run.volumes, ["client0", "client1", "client2", "client3"]);
    assert_eq!(warm_up_line(&run.said), (shared + clients * private, clients * w, w * 1_000_000));
    let f = to_shared as f64 / total as f64;
    // 22 million Bernoulli(0.25) draws: sd 0.0001.
    assert!((f - 0.25).abs() < 0.001, "shared share {f}");
}

/// The other two sharing modes stream too (under `ulimit -v` 64 MiB): conjoint clients issue
/// the same READ at the same instant, 4 x 3.3 million requests; disjoint clients never meet,
/// 3 x 3.3 million.
#[test]
fn multi_client_conjoint_and_disjoint_stream_under_64_mib() {
    let mut group: Vec<(u64, u64)> = Vec::new();
    let mut unequal = 0u64;
    let run = gen_under_limit(
        65536,
        "multi-client --clients 4 --blocks-per-client 300000 --sharing conjoint --pattern zipf",
        |r| {
            group.push((r.time, r.offset));
            if group.len() == 4 {
                unequal += u64::from(group.iter().any(|g| *g != group[0]));
                group.clear();
            }
        },
    );
    assert_eq!((run.records, run.header_count), (4 * 3_300_000, 4 * 3_300_000));
    assert_eq!((unequal, group.len()), (0, 0));
    let mut strays = 0u64;
    let run = gen_under_limit(
        65536,
        "multi-client --clients 3 --blocks-per-client 300000 --sharing disjoint --pattern seq",
        |r| strays += u64::from(r.offset / 4096 / 300_000 != r.volume as u64),
    );
    assert_eq!((run.records, run.header_count, strays), (9_900_000, 9_900_000, 0));
}
