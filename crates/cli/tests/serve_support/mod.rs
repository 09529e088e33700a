//! Shared by the `serve_*` and `replay_*` end-to-end tests: everything of `ember_testkit`
//! (`ember serve` and nbdkit as child processes, commands with deadlines, clients, trace
//! builders), and what needs `ember replay`'s pattern and metrics scraper: backings holding
//! the replay pattern, verified replays, and the server's metrics.

#![allow(dead_code)]
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "integration-test helpers")]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use ember_replay::pattern;
pub use ember_testkit::*;

/// Create a backing file of `size` bytes holding the replay pattern (generation 0, export 0,
/// `seed`) everywhere: what `ember replay --prefill` would have written, written beneath the
/// cache, so `--assume-prefilled --seed SEED` verifies every read from the first one.
pub fn patterned_backing(path: &Path, size: u64, seed: u64) {
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    let chunk = 1u64 << 20;
    let mut buf = vec![0u8; chunk as usize];
    let mut at = 0;
    while at < size {
        let n = chunk.min(size - at) as usize;
        pattern::fill(&mut buf[..n], 0, at / 512, 0, seed);
        f.write_all(&buf[..n]).unwrap();
        at += n as u64;
    }
    f.flush().unwrap();
}

/// A temporary directory with `disk.img`, 16 MiB holding the replay pattern of `seed`
/// ([`patterned_backing`]), and `reads.csv`, reads of `reads` distinct random 4 KiB blocks
/// of export `disk` in an order drawn from `order`: (directory, backing, trace).
pub fn patterned_disk(seed: u64, reads: u64, order: u64) -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let (backing, trace) = (dir.path().join("disk.img"), dir.path().join("reads.csv"));
    patterned_backing(&backing, 16 << 20, seed);
    write_csv_trace(&trace, &random_block_reads("disk", reads, 4096, order));
    (dir, backing, trace)
}

/// `ember replay … --json`; returns the parsed report (panics unless it succeeds).
pub fn replay_json(args: &[&str]) -> serde_json::Value {
    let out =
        run(Command::new(ember()).arg("replay").args(args).arg("--json"), Duration::from_secs(120));
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("replay JSON: {e}\n{out}"))
}

/// Metrics of a running server as parsed samples.
pub fn scrape(addr: &str) -> Vec<ember_replay::Sample> {
    ember_replay::MetricsUrl::parse(addr).unwrap().scrape().unwrap()
}

/// Sum of a metric over its label sets.
pub fn metric(samples: &[ember_replay::Sample], name: &str) -> f64 {
    ember_replay::scrape::sum(samples, name)
}

/// Replay `trace` (`format`: csv, msr) onto `export` of `serve` with `ember replay` (backing
/// prefilled by [`patterned_backing`] with `seed`), every read verified; returns the report.
pub fn replay_checked(
    trace: &Path,
    format: &str,
    serve: &Serve,
    export: &str,
    seed: &str,
) -> serde_json::Value {
    let t = trace.to_str().unwrap();
    let r = replay_json(
        &[t, "--format", format, "--server", &serve.uri(export)]
            .into_iter()
            .chain(["--assume-prefilled", "--seed", seed, "--metrics-url", &serve.metrics])
            .collect::<Vec<_>>(),
    );
    assert_eq!(r["verification"]["reads_failed"], 0, "{r:#}");
    assert_eq!(r["verification"]["reads_unverifiable"], 0, "{r:#}");
    r
}

/// The server's (hits, misses) over a replay, from its report.
pub fn hits_misses(r: &serde_json::Value) -> (u64, u64) {
    let s = &r["server_metrics"];
    (s["hits"].as_u64().unwrap(), s["misses"].as_u64().unwrap())
}

/// [`replay_checked`] onto export `disk`; the server's (hits, misses) over the replay.
pub fn replay_verified(trace: &Path, format: &str, serve: &Serve, seed: &str) -> (u64, u64) {
    hits_misses(&replay_checked(trace, format, serve, "disk", seed))
}

/// Wait until `serve`'s warmup state (`ember_warmup_state`) is `state` (3: preload done);
/// panics after a minute.
pub fn wait_warmup_state(serve: &Serve, state: f64) {
    let t = Instant::now();
    loop {
        let v = metric(&scrape(&serve.metrics), "ember_warmup_state");
        if v == state {
            return;
        }
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "warmup state {v}, waiting for {state}:\n{}",
            serve.output()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// fio's verified random reads and writes of `size` at `iodepth` ([`fio_randrw_verify`]) on
/// export `fio` of an `ember serve` with a 40 MiB cache file (and the `extra` arguments) over
/// a 64 MiB sparse backing file; the server's metrics after the run (then stopped cleanly).
pub fn fio_through_serve(extra: &[&str], size: &str, iodepth: u32) -> Vec<ember_replay::Sample> {
    let dir = tempfile::tempdir().unwrap();
    let (cache, backing) = (dir.path().join("cache.img"), dir.path().join("fio.img"));
    sparse_file(&backing, 64 << 20);
    let serve = ServeArgs::file_cache(&cache, "40M").args(extra).backing("fio", backing.display());
    let serve = serve.start();
    fio_randrw_verify(dir.path(), &serve.uri("fio"), size, iodepth, Duration::from_secs(300));
    let samples = scrape(&serve.metrics);
    serve.stop();
    samples
}

/// `ember stats --json` of a running server.
pub fn serve_stats(serve: &Serve) -> serde_json::Value {
    let out = run(&mut ember_cmd(&["stats", "--json", "--metrics", &serve.metrics]), MIN);
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("stats JSON: {e}\n{out}"))
}

/// `ember stats` of a running server: its table.
pub fn serve_stats_table(serve: &Serve) -> String {
    run(&mut ember_cmd(&["stats", "--metrics", &serve.metrics]), MIN)
}

/// `ember serve` on `dir`'s `cache.img` (a cache file of `cache_size`) over its `backing.img`
/// (export `disk`) under `policy`, listening only on the Unix socket `dir/ember.sock`.
pub fn serve_on_unix(dir: &Path, cache_size: &str, policy: &str) -> Serve {
    let sock = dir.join("ember.sock");
    let _ = std::fs::remove_file(&sock);
    ServeArgs::file_cache(dir.join("cache.img"), cache_size)
        .backing("disk", dir.join("backing.img").display())
        .args(["--unix", &sock.display().to_string(), "--write-policy", policy])
        .start_exact()
}

/// An array tier: `ember serve` with a memory cache of `cache` over `backing` (export `disk`)
/// under `--array-scheme SCHEME`, and the `extra` arguments.
pub fn array_tier(backing: &Path, cache: &str, scheme: &str, extra: &[&str]) -> Serve {
    let args = ServeArgs::mem_cache(cache).backing("disk", backing.display());
    args.args(["--array-scheme", scheme]).args(extra).start()
}

/// A client tier: `ember serve` with a memory cache of `cache` whose volume `volume` is
/// export `disk` of `array`, handing its clean victims down (`--demote`).
pub fn client_tier(array: &Serve, cache: &str, volume: &str) -> Serve {
    ServeArgs::mem_cache(cache).backing(volume, array.uri("disk")).arg("--demote").start()
}

/// `ember replay TRACE --server nbd://SERVE --queue-depth 1 --connections 1` and the words of
/// `extra`; the report, with no read failing verification.
pub fn replay_qd1(trace: &Path, serve: &Serve, extra: &str) -> serde_json::Value {
    let line = format!(
        "{} --server nbd://{} --queue-depth 1 --connections 1 {extra}",
        trace.display(),
        serve.nbd
    );
    let r = replay_json(&words(&line));
    assert_eq!(r["verification"]["reads_failed"], 0, "{r:#}");
    r
}
