//! Bonfire's warmup log in the cache device's own layout ("or the region
//! reserved in the cache layout"): `ember cache format --warmup-log 1M` reserves it,
//! `ember serve --warmup-log cache:` logs into it; after `kill -9` under write-through the
//! cache starts cold (its map is not trusted) and preloads from the region, and every logged
//! block hits (`ember replay`, every read verified); the trace commands read the log off the
//! cache file. A cache without the region, and a memory cache, are refused with the reason.

mod serve_support;

use serve_support::*;

use std::time::{Duration, Instant};

const MIN: Duration = Duration::from_secs(60);

#[test]
fn the_cache_device_holds_the_warmup_log_and_a_killed_server_preloads_from_it() {
    let (dir, backing, trace) = patterned_disk(43, 300, 9);
    let cache = dir.path().join("cache.img");
    let (c, b) = (cache.to_str().unwrap(), format!("disk={}", backing.display()));
    let vol = format!("disk={}", backing.display());
    ember_stdout(&[
        "cache",
        "format",
        "--cache",
        c,
        "--size",
        "40M",
        "--volume",
        &vol,
        "--warmup-log",
        "1M",
    ]);
    let args = ["--cache", c, "--backing", &b, "--warmup-log", "cache:", "--warmup-region", "4K"];
    let serve = Serve::start(&args);
    assert!(serve.output().contains("warmup log cache: (the region of"), "{}", serve.output());
    assert_eq!(replay_verified(&trace, "csv", &serve, "43"), (0, 300));
    // The writer drains every 10 ms: wait until the 300 records are in the region, then kill.
    let t = Instant::now();
    while metric(&scrape(&serve.metrics), "ember_warmup_log_bytes_written_total") < 300.0 * 32.0 {
        assert!(t.elapsed() < MIN, "log not written:\n{}", serve.output());
        std::thread::sleep(Duration::from_millis(10));
    }
    serve.kill().expect("running until killed");

    // The laboratory reads the log from the cache file.
    let info: serde_json::Value =
        serde_json::from_str(&ember_stdout(&["trace", "info", "--json", c])).unwrap();
    assert_eq!(info["format"], "warmup-log", "{info:#}");
    assert_eq!((info["requests"].as_u64(), info["reads"].as_u64()), (Some(300), Some(300)));

    // After kill -9 under write-through the map is not trusted: cold, then the preload.
    let serve = Serve::start(&args);
    assert!(serve.output().contains("preloading 300 blocks"), "{}", serve.output());
    wait_warmup_state(&serve, 3.0);
    assert_eq!(
        replay_verified(&trace, "csv", &serve, "43"),
        (300, 0),
        "every preloaded block hits"
    );
    serve.stop();

    // No region reserved: refused, saying how to get one; a memory cache has none either.
    let plain = dir.path().join("plain.img");
    let p = plain.to_str().unwrap();
    ember_stdout(&["cache", "format", "--cache", p, "--size", "40M", "--volume", &vol]);
    let mut no_region = args.to_vec();
    no_region[1] = p;
    let err = serve_fails(&no_region);
    assert!(err.contains("the cache device has no warmup-log region"), "{err}");
    let mut mem = args.to_vec();
    mem[1] = "mem:32M";
    let err = serve_fails(&mem);
    assert!(err.contains("the cache device has no warmup-log region"), "{err}");
}
