//! Faults: the array tier restarts (SIGKILL, then started again on the same port,
//! cold) while a client tier with `--demote --nbd-reconnect` serves `ember replay`. The
//! replay sees no error and every read verified correct; the client tier reconnects and its
//! DEMOTEs resume: the new array receives and stores some (blocks read from it after the
//! restart; DEMOTEs of copies read from the old array are refused as stale, since the new
//! array never saw them).
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "integration-test helpers")]

mod serve_support;

use serve_support::*;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn start_array(spec: &str, listen: &str) -> Serve {
    Serve::start_exact(&[
        "--cache",
        "mem:16M",
        "--backing",
        spec,
        "--array-scheme",
        "demote",
        "--listen",
        listen,
        "--metrics",
        "127.0.0.1:0",
    ])
}

#[test]
fn client_tier_survives_an_array_restart_and_demotes_again() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("r.csv");
    run(
        Command::new(ember()).args(["trace", "gen", "ww-random", "--client-blocks", "3044"]).args(
            ["--array-blocks", "3044", "--timed-multiplier", "10", "-o", trace.to_str().unwrap()],
        ),
        Duration::from_secs(60),
    );
    let backing = dir.path().join("disk.img");
    sparse_file(&backing, 64 << 20);
    let spec = format!("disk={}", backing.display());
    let listen = format!("127.0.0.1:{}", free_port());
    let array = start_array(&spec, &listen);
    let up = format!("client0_0=nbd://{listen}/disk");
    let client = Serve::start(&[
        "--cache",
        "mem:16M",
        "--backing",
        &up,
        "--demote",
        "--nbd-reconnect",
        "30",
    ]);
    let server = format!("nbd://{}", client.nbd);
    // Every sector the trace reads holds the replay's pattern, through both tiers.
    let prefill = replay_json(&[trace.to_str().unwrap(), "--server", &server, "--prefill-only"]);
    assert_eq!(prefill["ops"][1]["errors"], 0, "{prefill:#}");
    let replay = Command::new(ember())
        .args(["replay", trace.to_str().unwrap(), "--server", &server])
        .args(["--assume-prefilled", "--queue-depth", "1", "--connections", "1", "--json"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    // Let the client tier fill up and demote, then kill the array mid-replay.
    let t0 = Instant::now();
    loop {
        let sent = metric(&scrape(&client.metrics), "ember_cache_demotes_sent_total");
        if sent > 2000.0 {
            break;
        }
        assert!(t0.elapsed() < Duration::from_secs(60), "no DEMOTEs sent: {}", client.output());
        std::thread::sleep(Duration::from_millis(20));
    }
    let before = metric(&scrape(&client.metrics), "ember_cache_demotes_sent_total");
    assert!(array.kill().is_ok(), "the array was running");
    std::thread::sleep(Duration::from_millis(300));
    let array = start_array(&spec, &listen);
    let (status, stdout) = wait_stdout(replay, Duration::from_secs(300), "ember replay");
    assert!(status.success(), "{}", client.output());
    let r: serde_json::Value = serde_json::from_slice(&stdout).unwrap();
    let v = &r["verification"];
    assert_eq!(v["reads_failed"], 0, "{r:#}");
    assert_eq!(r["ops"][0]["errors"], 0, "the client saw an I/O error: {r:#}");
    assert_eq!(v["reads_verified"], r["ops"][0]["count"], "every read verified: {r:#}");
    let c = scrape(&client.metrics);
    let a = scrape(&array.metrics);
    let sent = metric(&c, "ember_cache_demotes_sent_total");
    let received = metric(&a, "ember_cache_demotes_received_total");
    let stored = metric(&a, "ember_cache_demotes_stored_total");
    let stale = metric(&a, "ember_cache_demotes_refused_stale_total");
    eprintln!(
        "sent before the kill {before}, after {}; new array: received {received}, stored \
         {stored}, refused as stale {stale}",
        sent - before
    );
    assert!(sent > before, "DEMOTEs resumed");
    assert!(received > 0.0 && stored > 0.0, "the new array took DEMOTEs");
    assert!(stale > 0.0, "copies read from the old array are refused by the new one");
    client.stop();
    array.stop();
}
