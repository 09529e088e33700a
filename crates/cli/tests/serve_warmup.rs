//! Bonfire in `ember serve` with real clients: the warmup log of a memory cache
//! read as a trace by the laboratory; a restarted memory cache preloads and every logged
//! block hits (`ember replay`, every read verified); qemu-io writes during a preload over a
//! slow backing (nbdkit's delay filter) win over the preload's older data; kill -9 during a
//! preload, restart, still correct; a damaged, truncated or foreign log falls back to cold.

mod serve_support;

use std::time::Duration;

use serve_support::*;

const SEED: &str = "31";

#[test]
fn memory_cache_restart_preloads_the_logged_blocks_and_they_hit() {
    let (dir, backing, trace) = patterned_disk(31, 300, 5);
    let log = dir.path().join("warmup.wlog");
    let args = ServeArgs::mem_cache("32M").backing("disk", backing.display()).args([
        "--warmup-log",
        log.to_str().unwrap(),
        "--warmup-region",
        "4K",
    ]);
    let serve = Serve::start(&args);
    assert!(serve.output().contains("no warmup log at"), "{}", serve.output());
    assert_eq!(replay_verified(&trace, "csv", &serve, SEED), (0, 300));
    let samples = scrape(&serve.metrics);
    assert_eq!(metric(&samples, "ember_warmup_state"), 1.0, "monitoring");
    serve.stop();

    // The laboratory reads the log as a trace: 300 reads of one block each.
    let info: serde_json::Value =
        serde_json::from_str(&ember_stdout(&["trace", "info", "--json", log.to_str().unwrap()]))
            .unwrap();
    assert_eq!(info["format"], "warmup-log");
    assert_eq!(info["requests"], 300);
    assert_eq!(info["reads"], 300);
    assert_eq!(info["wss_blocks"], 300);
    assert_eq!(info["volumes"][0]["name"], "disk");
    let csv = dir.path().join("log.csv");
    assert_eq!(convert_trace(&log, &csv, "msr").len(), 300);
    let out = dir.path().join("analysis");
    ember_stdout(&["analyze", log.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    assert!(out.join("analyze.json").exists());

    // A restart: the memory cache is empty, the preload brings the 300 blocks back.
    let serve = Serve::start(&args);
    assert!(serve.output().contains("preloading 300 blocks"), "{}", serve.output());
    wait_warmup_state(&serve, 3.0);
    assert_eq!(
        replay_verified(&trace, "csv", &serve, SEED),
        (300, 0),
        "every preloaded block hits"
    );
    let stats = serve_stats(&serve);
    assert_eq!(stats["warmup"]["preloaded_blocks"], 300.0, "{stats:#}");
    assert_eq!(stats["warmup"]["preloaded_bytes"], 300.0 * 4096.0);
    assert!(stats["warmup"]["log_bytes_written"].as_f64().unwrap() >= 300.0 * 32.0);
    let table = serve_stats_table(&serve);
    assert!(table.contains("warmup: preload done; preloaded 300 of 300 planned blocks"), "{table}");
    let log_out = serve.stop();
    assert!(log_out.contains("warmup: preload done: 300 blocks preloaded"), "{log_out}");
    // The log continued across the restart: 600 reads, each block read twice within the
    // hour, which `ember warmup advise` classifies as hourly reaccesses (Bonfire Figure 8).
    let info: serde_json::Value =
        serde_json::from_str(&ember_stdout(&["trace", "info", "--json", log.to_str().unwrap()]))
            .unwrap();
    assert_eq!((info["requests"].as_u64(), info["wss_blocks"].as_u64()), (Some(600), Some(300)));
    let advice = ember_stdout(&["warmup", "advise", log.to_str().unwrap()]);
    assert!(advice.contains("disk: Last-K") && advice.contains("hourly 100.0 %"), "{advice}");
}

#[test]
fn writes_during_preload_win_and_a_kill_during_preload_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let backing = dir.path().join("disk.img");
    let log = dir.path().join("warmup.wlog");
    sparse_file(&backing, 32 << 20);
    // Backing content: 0x11 over the first 8 MiB.
    {
        let serve = ServeArgs::mem_cache("32M").backing("disk", backing.display()).start();
        qemu_io(&serve.uri("disk"), "write -P 0x11 0 8M");
        serve.stop();
    }
    // 100 ms per backing read: the preload of 8 MiB (32 reads of 256 KiB) takes ≥ 3.2 s.
    let kit = Nbdkit::start(
        dir.path(),
        &["--filter=delay", "file", backing.to_str().unwrap(), "rdelay=100ms"],
    );
    let b = format!("disk={}", kit.uri());
    let mem = ["--cache", "mem:32M", "--backing", &b, "--warmup-log", log.to_str().unwrap()];
    // History: the 8 MiB read once.
    let serve = Serve::start(&mem);
    qemu_io(&serve.uri("disk"), "read -P 0x11 0 8M");
    serve.stop();

    // Restart: preload; a client writes 16 pieces spread over the preloaded range meanwhile.
    let serve = Serve::start(&mem);
    assert!(serve.output().contains("preloading 2048 blocks"), "{}", serve.output());
    let writes: Vec<String> =
        (0..16u64).map(|i| format!("write -P 0x33 {} 12288", i * (512 << 10) + 4096)).collect();
    qemu_io(&serve.uri("disk"), &writes.join(";"));
    assert_eq!(
        metric(&scrape(&serve.metrics), "ember_warmup_state"),
        2.0,
        "the writes must land while the preload runs"
    );
    wait_warmup_state(&serve, 3.0);
    let mut checks = Vec::new();
    for i in 0..16u64 {
        let at = i * (512 << 10);
        checks.push(format!("read -P 0x11 {at} 4096"));
        checks.push(format!("read -P 0x33 {} 12288", at + 4096));
        checks.push(format!("read -P 0x11 {} {}", at + 16384, (512 << 10) - 16384));
    }
    qemu_io(&serve.uri("disk"), &checks.join(";"));
    let samples = scrape(&serve.metrics);
    assert!(metric(&samples, "ember_warmup_preloaded_blocks_total") > 0.0);
    serve.stop();

    // A file cache under write-through, killed during its preload, restarted: cold after
    // the crash, preloads again, and every byte is still right.
    let cache = dir.path().join("cache.img");
    let file = ServeArgs::file_cache(&cache, "32M").args([
        "--backing",
        &b,
        "--warmup-log",
        log.to_str().unwrap(),
    ]);
    let serve = Serve::start(&file);
    assert!(serve.output().contains("preloading"), "{}", serve.output());
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(metric(&scrape(&serve.metrics), "ember_warmup_state"), 2.0);
    assert!(serve.kill().is_ok(), "ember serve exited before the kill");
    let serve = Serve::start(&file);
    let out = serve.output();
    assert!(out.contains("start Cold") && out.contains("not clean"), "{out}");
    assert!(out.contains("preloading"), "{out}");
    wait_warmup_state(&serve, 3.0);
    qemu_io(&serve.uri("disk"), &checks.join(";"));
    serve.stop();
}

#[test]
fn damaged_truncated_or_foreign_logs_fall_back_to_cold() {
    let (dir, backing, trace) = patterned_disk(31, 50, 8);
    let log = dir.path().join("warmup.wlog");
    let run_with = |name: &str| {
        ServeArgs::mem_cache("32M")
            .backing(name, backing.display())
            .args(["--warmup-log", log.to_str().unwrap(), "--warmup-log-size", "64K"])
            .start()
    };
    let serve = run_with("disk");
    replay_verified(&trace, "csv", &serve, SEED);
    serve.stop();
    let good = std::fs::read(&log).unwrap();
    let mut header = good.clone();
    header[100] ^= 0x40;
    let mut record = good.clone();
    record[4096 + 32 * 3 + 10] ^= 1;
    for (bytes, why) in [
        (header, "checksum does not match"),
        (good[..good.len() - 100].to_vec(), "truncated"),
        (record, "damaged"),
        (b"not a log at all".to_vec(), "no EMBRWLOG magic"),
    ] {
        std::fs::write(&log, &bytes).unwrap();
        let serve = run_with("disk");
        let out = serve.output();
        assert!(out.contains("no preload, starting cold") && out.contains(why), "{why}: {out}");
        assert_eq!(
            replay_verified(&trace, "csv", &serve, SEED),
            (0, 50),
            "{why}: cold, and serving"
        );
        serve.stop();
    }
    // The log now holds the last run's 50 reads of "disk"; a server of another volume
    // name finds it foreign.
    let serve = run_with("other");
    let out = serve.output();
    assert!(out.contains("from another cache"), "{out}");
    serve.stop();
}
