//! A server built from a `ServeConfig` alone (`Server::start`): it says what `ember serve`
//! says, serves its exports at the addresses it reports, stops from a handle, shuts down
//! cleanly and starts warm; a refused setting opens nothing.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "integration-test helpers")]

use ember_nbd::ClientBuilder;
use ember_serve::console::Console;
use ember_serve::{BackingVolume, Options, ServeConfig, Server};
use std::sync::{Arc, Mutex};

const MIB: u64 = 1 << 20;

/// A console that keeps every line.
#[derive(Default)]
struct Lines(Mutex<Vec<String>>);

impl Console for Lines {
    fn say(&self, line: &str) {
        self.0.lock().unwrap().push(line.to_string());
    }

    fn warn(&self, line: &str) {
        self.0.lock().unwrap().push(format!("warn: {line}"));
    }
}

impl Lines {
    fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.0.lock().unwrap())
    }
}

fn config(dir: &std::path::Path) -> ServeConfig {
    let backing = dir.join("disk.img");
    if !backing.exists() {
        std::fs::File::create(&backing).unwrap().set_len(4 * MIB).unwrap();
    }
    let mut c = ServeConfig::new(
        dir.join("cache.img"),
        vec![BackingVolume::new("disk", backing.display().to_string())],
    );
    c.cache.size = Some(8 * MIB);
    c.cache.format_if_needed = true;
    c.listen.tcp = Some("127.0.0.1:0".into());
    c.listen.unix = Some(dir.join("ember.sock"));
    c.metrics = Some("127.0.0.1:0".into());
    c.workers = Some(2);
    c
}

#[test]
fn a_server_from_a_config_serves_stops_and_starts_warm() {
    let dir = tempfile::tempdir().unwrap();
    let lines = Arc::new(Lines::default());
    let options = Options { console: lines.clone(), ..Options::default() };
    let running = Server::start_with(config(dir.path()), options.clone()).unwrap();
    let said = lines.take();
    assert!(said[0].starts_with("formatted "), "{said:?}");
    assert!(said[1].contains("start Fresh") && said[1].ends_with("admission aod, write-through"));
    let metrics = running.metrics_addr().unwrap();
    assert_eq!(said[2], format!("metrics http://{metrics}/metrics"));
    let exports: Vec<String> = running.exports().iter().map(|e| e.uri.clone()).collect();
    assert_eq!(exports.len(), 2, "TCP and Unix");
    assert!(exports[0].starts_with("nbd://127.0.0.1:") && exports[0].ends_with("/disk"));
    assert!(exports[1].starts_with("nbd+unix:///disk?socket="));
    assert_eq!(said[3..5], exports.iter().map(|u| format!("export disk {u}")).collect::<Vec<_>>());
    assert_eq!(said.last().map(String::as_str), Some("ready"));

    let sock = dir.path().join("ember.sock");
    let client = ClientBuilder::new().export("disk").connect_unix(&sock).unwrap();
    let data: Vec<u8> = (0..MIB as usize).map(|i| (i * 13 % 251) as u8).collect();
    client.write(MIB, &data, false).unwrap();
    client.flush().unwrap();
    let mut got = vec![0u8; data.len()];
    client.read(MIB, &mut got).unwrap();
    assert_eq!(got, data);
    let scraped = ember_replay::scrape::MetricsUrl::parse(&metrics.to_string())
        .and_then(|u| u.scrape())
        .unwrap();
    assert_eq!(ember_replay::scrape::sum(&scraped, ember_replay::scrape::READ_HITS), 256.0);
    client.disconnect().unwrap();

    // A stop from another thread; wait returns once the cache shut down cleanly.
    let stopper = running.stopper();
    std::thread::spawn(move || stopper.shutdown());
    let stopped = running.wait().unwrap();
    assert_eq!(stopped.report.persisted_blocks, 256);
    let last = lines.take();
    assert!(last[0].starts_with("clean shutdown: 256 blocks persisted"), "{last:?}");
    assert!(!sock.exists(), "the Unix socket is removed");

    let running = Server::start_with(config(dir.path()), options).unwrap();
    let said = lines.take();
    assert!(said[0].contains("start Warm (256 blocks loaded;"), "{said:?}");
    let client = ClientBuilder::new().export("disk").connect_unix(&sock).unwrap();
    let mut again = vec![0u8; data.len()];
    client.read(MIB, &mut again).unwrap();
    assert_eq!(again, data);
    let hits = running.engine().stats().total;
    assert_eq!((hits.read_hits, hits.read_misses), (256, 0), "warm after the restart");
    client.disconnect().unwrap();
    running.shutdown().unwrap();
}

#[test]
fn a_refused_setting_opens_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let lines = Arc::new(Lines::default());
    let options = Options { console: lines.clone(), ..Options::default() };
    let mut c = config(dir.path());
    c.live.write_policy = "write-back-persist".into();
    c.cache.device = "mem:64M".into();
    c.cache.size = None;
    let e = Server::start_with(c, options.clone()).err().unwrap().to_string();
    assert!(e.starts_with("--write-policy write-back-persist on a memory cache"), "{e}");
    let mut c = config(dir.path());
    c.live.writeback.max_dirty = Some("200%".into());
    let e = Server::start_with(c, options.clone()).err().unwrap().to_string();
    assert!(e.contains("a percentage from 0 to 100"), "{e}");
    assert!(lines.take().is_empty());
    assert!(!dir.path().join("cache.img").exists(), "nothing was created");
    // A threshold the engine resolves against the cache, in the flag's words.
    let mut c = config(dir.path());
    c.live.writeback.max_dirty = Some("100000".into());
    let e = Server::start_with(c, options).err().unwrap().to_string();
    assert!(e.starts_with("--max-dirty 100000: more than the cache's"), "{e}");
}
