//! `ember replay` against the built `ember serve`: every read verified after a prefill (queue
//! depth 8 over two connections, two trace volumes onto one export, unaligned and wrapped
//! requests), trace timing, wrong content detected as an error exit, and reads of never
//! written data reported as unverifiable.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "integration-test helpers")]

mod serve_support;

use std::process::Command;
use std::time::Duration;

use serve_support::*;

fn serve_file(dir: &std::path::Path, size: u64, cache: &str) -> Serve {
    let backing = dir.join("disk.img");
    sparse_file(&backing, size);
    ServeArgs::file_cache(dir.join("cache.img"), cache).backing("disk", backing.display()).start()
}

/// A mixed trace on volumes "a" and "b": 30% writes, 1-16 KiB, some unaligned, some past
/// the end of a 32 MiB export.
fn mixed_trace(n: usize, seed: u64) -> (Vec<Req>, usize, usize, usize) {
    let mut rng = Rng::new(seed);
    let (mut reads, mut unaligned, mut beyond) = (0, 0, 0);
    let mut reqs = Vec::new();
    for _ in 0..n {
        let volume = if rng.below(2) == 0 { "a" } else { "b" };
        let write = rng.below(10) < 3;
        let mut offset = rng.below(2048) * 4096;
        let mut len = (1 + rng.below(4) as u32) * 4096;
        if rng.below(10) == 0 {
            offset += 100;
            len -= 200;
            unaligned += 1;
        }
        if rng.below(20) == 0 {
            offset += 32 << 20;
            beyond += 1;
        }
        reads += usize::from(!write);
        reqs.push((volume.to_string(), write, offset, len));
    }
    (reqs, reads, unaligned, beyond)
}

#[test]
fn every_read_verifies_after_prefill_pipelined() {
    let dir = tempfile::tempdir().unwrap();
    let serve = serve_file(dir.path(), 32 << 20, "24M");
    let trace = dir.path().join("mixed.csv");
    let (reqs, reads, unaligned, beyond) = mixed_trace(3000, 11);
    write_csv_trace(&trace, &reqs);
    let replay = format!(
        "{} --format csv --server nbd://{} --export disk --prefill",
        trace.display(),
        serve.nbd
    );
    let r = replay_json(&words(&format!(
        "{replay} --queue-depth 8 --connections 2 --metrics-url {} --metrics-interval 0.1",
        serve.metrics
    )));
    let v = &r["verification"];
    assert_eq!(v["reads_failed"], 0, "{r:#}");
    assert_eq!(v["reads_verified"], reads as u64, "every read fully verified: {r:#}");
    assert_eq!(v["reads_unverifiable"], 0);
    assert!(v["sectors_checked"].as_u64().unwrap() >= reads as u64 * 8 - 1);
    assert_eq!(r["ops"][0]["op"], "read");
    assert_eq!(r["ops"][0]["count"], reads as u64);
    assert_eq!(r["ops"][1]["count"], (3000 - reads) as u64);
    assert_eq!(r["plan"]["realigned"], unaligned as u64);
    assert_eq!(r["plan"]["wrapped"], beyond as u64);
    assert_eq!(r["queue_depth"], 8);
    assert_eq!(r["connections"], 2);
    let mut mapping: Vec<String> = r["mapping"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| format!("{}->{}", m[0].as_str().unwrap(), m[1].as_str().unwrap()))
        .collect();
    mapping.sort();
    assert_eq!(mapping, ["a->disk", "b->disk"]);
    let p = r["prefill"]["bytes"].as_u64().unwrap();
    assert!(p > 0 && p <= 32 << 20, "{p}");
    let lat = &r["ops"][0]["latency"];
    assert!(lat["p50_us"].as_f64().unwrap() <= lat["p99_us"].as_f64().unwrap());
    assert!(lat["p99_us"].as_f64().unwrap() <= lat["p999_us"].as_f64().unwrap());
    // The server counted the replay's reads (in blocks): its hits and misses add up to at
    // least one block per read.
    let s = &r["server_metrics"];
    let blocks = s["hits"].as_u64().unwrap() + s["misses"].as_u64().unwrap();
    assert!(blocks >= reads as u64, "{s:#}");
    let timeline: u64 = s["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["hits"].as_u64().unwrap() + x["misses"].as_u64().unwrap())
        .sum();
    assert_eq!(timeline, blocks, "the timeline's intervals add up to the total");

    // Again, synchronously, at the trace's timing (1 ms apart) 100 times faster: the writes
    // of the first replay are overwritten by this one's own writes before they are read.
    let r = replay_json(&words(&format!("{replay} --timing trace --speed 100 --max-requests 500")));
    assert_eq!(r["timing"], "trace x100");
    assert_eq!(r["verification"]["reads_failed"], 0);
    // The last request is due 499 ms / 100 after the first: the replay cannot be shorter.
    assert!(r["seconds"].as_f64().unwrap() >= 0.00499 * 0.99, "{}", r["seconds"]);
    assert_eq!(r["plan"]["planned"], 500);
    serve.stop();
}

#[test]
fn wrong_content_is_an_error_exit() {
    let dir = tempfile::tempdir().unwrap();
    let serve = serve_file(dir.path(), 8 << 20, "8M");
    let trace = dir.path().join("reads.csv");
    write_csv_trace(&trace, &random_block_reads("disk", 50, 2048, 3));
    // Nothing was prefilled, but the replay is told it was: the zeros read are wrong.
    let o = run_status(
        Command::new(ember())
            .args(["replay", trace.to_str().unwrap(), "--format", "csv", "--server"])
            .arg(serve.uri("disk"))
            .arg("--assume-prefilled"),
        Duration::from_secs(60),
    );
    assert_eq!(o.status.code(), Some(1), "{}\n{}", o.stdout, o.stderr);
    assert!(o.stdout.contains("50 FAILED"), "{}", o.stdout);
    assert!(o.stdout.contains("found zeros"), "{}", o.stdout);
    assert!(o.stderr.contains("50 reads failed verification"), "{}", o.stderr);
    serve.stop();
}

#[test]
fn reads_of_unwritten_data_are_unverifiable() {
    let dir = tempfile::tempdir().unwrap();
    let serve = serve_file(dir.path(), 8 << 20, "8M");
    let trace = dir.path().join("reads.csv");
    let mut reqs = random_block_reads("disk", 40, 2048, 5);
    // One write, then a read of the same block: that read is verified.
    reqs.push(("disk".into(), true, 4096 * 7, 4096));
    reqs.push(("disk".into(), false, 4096 * 7, 8192));
    write_csv_trace(&trace, &reqs);
    let r =
        replay_json(&[trace.to_str().unwrap(), "--format", "csv", "--server", &serve.uri("disk")]);
    let v = &r["verification"];
    assert_eq!(v["reads_failed"], 0, "{r:#}");
    assert_eq!(v["reads_partly_verified"], 1, "{r:#}");
    assert_eq!(v["reads_unverifiable"], 40, "{r:#}");
    assert_eq!(v["sectors_checked"], 8);
    serve.stop();
}
