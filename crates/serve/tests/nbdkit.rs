//! ember in front of a foreign NBD server: nbdkit's memory plugin behind its delay filter (a
//! slow disk), with qemu-io as the client of ember's export. Needs nbdkit and qemu-utils
//! (`make setup` installs both).

use ember_engine::device::MemDevice;
use ember_engine::{Device, WriteMode, WritebackConfig};
use ember_nbd::Server;
use ember_serve::{EngineExports, NbdDevice};
use ember_testkit::engine::{format, open_lru};
use ember_testkit::{qemu_io, Nbdkit};
use std::sync::Arc;

#[test]
fn qemu_io_through_ember_to_nbdkit_with_a_delay_filter() {
    let dir = tempfile::tempdir().unwrap();
    let nbdkit =
        Nbdkit::start(dir.path(), &["--filter=delay", "memory", "16M", "rdelay=1ms", "wdelay=1ms"]);
    let up = nbdkit.uri();
    let backing: Arc<dyn Device> = Arc::new(NbdDevice::connect(&up).expect("connect to nbdkit"));
    assert_eq!(backing.size(), 16 << 20);
    let cache: Arc<dyn Device> = Arc::new(MemDevice::new(8 << 20));
    format(cache.as_ref(), &[("disk", 16 << 20)], None);
    let wb = WritebackConfig::default();
    let engine =
        Arc::new(open_lru(cache, vec![("disk", backing)], WriteMode::WriteThrough, wb).unwrap());
    let sock = dir.path().join("ember.sock");
    let running = Server::builder(Arc::new(EngineExports::new(engine.clone())))
        .listen_unix(&sock)
        .unwrap()
        .build()
        .unwrap();
    let running = running.spawn().unwrap();
    let uri = format!("nbd+unix:///disk?socket={}", sock.display());
    let text = qemu_io(&uri, "write -P 0xab 0 1M; read -P 0xab 0 1M; read -P 0xab 512k 4k; flush");
    assert!(!text.contains("verification failed") && text.contains("read 4096/4096"), "{text}");
    let s = engine.stats();
    assert_eq!(s.total.write_misses, 256, "{:?}", s.total);
    assert_eq!(s.total.allocation_writes, 256, "write-through allocated every written block");
    assert_eq!((s.total.read_hits, s.total.read_misses), (257, 0), "{:?}", s.total);
    assert!(s.total.flushes >= 1);
    // The data is on nbdkit's disk, read without ember.
    let direct = NbdDevice::connect(&up).unwrap();
    let mut b = vec![0u8; 1 << 20];
    direct.read_at(0, &mut b).unwrap();
    assert!(b.iter().all(|&x| x == 0xab));
    running.shutdown().unwrap();
    assert_eq!(engine.shutdown().unwrap().persisted_blocks, 256);
}
