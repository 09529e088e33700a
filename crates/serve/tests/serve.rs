//! End to end: an NBD client → ember's NBD server → the engine → an upstream NBD server (the
//! backing volume) and a cache file; then a clean shutdown and a warm restart.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "integration-test helpers")]

use ember_engine::device::{FileDevice, FileOptions};
use ember_engine::{Device, Engine, StartKind, WriteMode};
use ember_nbd::server::ServerConfig;
use ember_nbd::{Client, ClientBuilder, Export, ExportMap, MemExport, Server};
use ember_serve::{EngineExports, NbdDevice};
use ember_testkit::engine::lru_config;
use ember_testkit::nbd::serve_with;
use std::path::Path;
use std::sync::Arc;

const MIB: u64 = 1 << 20;

fn open_engine(cache: &Path, upstream: &str) -> Engine {
    let cache: Arc<dyn Device> =
        Arc::new(FileDevice::open(cache, FileOptions::default()).expect("cache file"));
    // Only ember writes the upstream export here: trust it across the restart.
    let backing: Arc<dyn Device> =
        Arc::new(NbdDevice::connect(upstream).expect("upstream").trust_unchanged());
    Engine::open(lru_config(cache, vec![("disk", backing)], WriteMode::WriteThrough)).expect("open")
}

fn connect(sock: &Path) -> Client {
    ClientBuilder::new().export("disk").connect_unix(sock).expect("connect to ember")
}

#[test]
fn a_client_through_ember_to_an_upstream_server_and_a_warm_restart() {
    let dir = tempfile::tempdir().unwrap();
    let ember_sock = dir.path().join("ember.sock");
    let cache_path = dir.path().join("cache.img");
    let upstream_disk = Arc::new(MemExport::new(8 * MIB));
    let exports = ExportMap::new().with("disk", "hdd", upstream_disk.clone());
    let upstream = serve_with(exports, ServerConfig::default());
    let up_uri = upstream.unix_uri("disk");

    let cache = FileDevice::open(
        &cache_path,
        FileOptions { direct: false, create_size: Some(8 * MIB), exclusive: false },
    )
    .unwrap();
    ember_testkit::engine::format(&cache, &[("disk", 8 * MIB)], None);
    drop(cache);

    let engine = Arc::new(open_engine(&cache_path, &up_uri));
    let server = Server::builder(Arc::new(EngineExports::new(engine.clone())))
        .listen_unix(&ember_sock)
        .unwrap()
        .build()
        .unwrap();
    let running = server.spawn().unwrap();
    let client = connect(&ember_sock);
    assert_eq!(client.size(), 8 * MIB);
    assert!(
        client.info().can_flush() && client.info().can_trim() && client.info().can_multi_conn()
    );
    let data: Vec<u8> = (0..MIB as usize).map(|i| (i * 7 % 251) as u8).collect();
    client.write(MIB, &data, false).unwrap();
    client.flush().unwrap();
    // The write went through to the upstream disk.
    let mut up = vec![0u8; data.len()];
    upstream_disk.read(MIB, &mut up).unwrap();
    assert_eq!(up, data);
    client.trim(MIB, 4096, false).unwrap();
    let mut got = vec![0u8; data.len()];
    client.read(MIB, &mut got).unwrap();
    assert!(got[..4096].iter().all(|&b| b == 0));
    assert_eq!(got[4096..], data[4096..]);
    let s = engine.stats();
    assert_eq!(s.total.write_misses, 256, "{:?}", s.total);
    assert_eq!(s.total.read_hits, 255, "every block but the trimmed one hits: {:?}", s.total);
    assert_eq!(s.total.read_misses, 1);
    client.disconnect().unwrap();
    running.shutdown().unwrap();
    let report = engine.shutdown().unwrap();
    assert_eq!(report.persisted_blocks, 256, "the trimmed block was re-read and cached");
    drop(engine);

    let inspect =
        Engine::inspect(&FileDevice::open(&cache_path, FileOptions::default()).unwrap()).unwrap();
    assert!(inspect.clean_shutdown);
    assert_eq!(inspect.volumes[0].cached_blocks, Some(256));

    let engine = Arc::new(open_engine(&cache_path, &up_uri));
    assert_eq!(engine.open_report().start, StartKind::Warm);
    let running = Server::builder(Arc::new(EngineExports::new(engine.clone())))
        .listen_unix(&ember_sock)
        .unwrap()
        .build()
        .unwrap()
        .spawn()
        .unwrap();
    let client = connect(&ember_sock);
    let mut again = vec![0u8; data.len()];
    client.read(MIB, &mut again).unwrap();
    assert_eq!(again, got);
    let s = engine.stats();
    assert_eq!((s.total.read_hits, s.total.read_misses), (256, 0), "warm after restart");
    client.disconnect().unwrap();
    running.shutdown().unwrap();
    engine.shutdown().unwrap();
    upstream.stop();
}
