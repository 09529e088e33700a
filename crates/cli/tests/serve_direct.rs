//! `ember serve --direct` (an O_DIRECT cache file) under a real client at depth: fio's nbd
//! engine, random reads and writes at iodepth 32 with crc32c verification, so the reads of
//! blocks the cache holds arrive in runs that the server reads together
//! (`Volume::read_hits`, io_uring) while writes to the same blocks run beside them; every
//! byte fio reads back must be the last it wrote.

mod serve_support;

use std::process::Command;
use std::time::Duration;

use serve_support::*;

#[test]
fn fio_randrw_at_iodepth_32_on_an_o_direct_cache_verifies() {
    let dir = tempfile::tempdir().unwrap();
    let (cache, backing) = (dir.path().join("cache.img"), dir.path().join("fio.img"));
    sparse_file(&backing, 64 << 20);
    let serve = Serve::start(&[
        "--cache",
        cache.to_str().unwrap(),
        "--cache-size",
        "40M",
        "--format-if-needed",
        "--direct",
        "--backing",
        &format!("fio={}", backing.display()),
    ]);
    let out = run(
        Command::new("fio")
            .current_dir(dir.path())
            .args([
                "--name=randrw",
                "--ioengine=nbd",
                "--rw=randrw",
                "--bs=4k",
                "--size=16M",
                "--iodepth=32",
                "--verify=crc32c",
                "--verify_fatal=1",
                "--verify_state_save=0",
                "--output-format=json",
            ])
            .arg(format!("--uri={}", serve.uri("fio"))),
        Duration::from_secs(300),
    );
    let json = &out[out.find('{').unwrap_or(0)..];
    let report: serde_json::Value =
        serde_json::from_str(json).unwrap_or_else(|e| panic!("{e}: {out}"));
    let job = &report["jobs"][0];
    assert_eq!(job["error"], 0, "{out}");
    assert!(job["write"]["io_bytes"].as_u64().unwrap_or(0) > 0, "{out}");
    assert!(job["read"]["io_bytes"].as_u64().unwrap_or(0) > 0, "{out}");
    let samples = scrape(&serve.metrics);
    assert_eq!(metric(&samples, "ember_nbd_errors_total"), 0.0);
    // The verification pass reads blocks fio wrote through the cache: hits.
    assert!(metric(&samples, "ember_cache_read_hits_total") > 1000.0);
    serve.stop();
}
