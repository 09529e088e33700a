//! ember in front of a foreign NBD server: nbdkit's memory plugin behind its delay filter (a
//! slow disk), with qemu-io as the client of ember's export. Needs nbdkit and qemu-utils
//! (`make setup` installs both).

use ember_engine::device::MemDevice;
use ember_engine::{Device, Engine, EngineConfig, FormatSpec, VolumeConfig, VolumeSpec, WriteMode};
use ember_nbd::Server;
use ember_policy::admission::Aod;
use ember_policy::replacement::{build, Kind};
use ember_serve::{EngineExports, NbdDevice};
use std::process::{Child, Command};
use std::sync::Arc;

/// nbdkit in the foreground, killed on drop.
struct Nbdkit(Child);

impl Drop for Nbdkit {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn qemu_io_through_ember_to_nbdkit_with_a_delay_filter() {
    let dir = tempfile::tempdir().unwrap();
    let hdd = dir.path().join("hdd.sock");
    let child = Command::new("nbdkit")
        .args(["-f", "-U"])
        .arg(&hdd)
        .args(["--filter=delay", "memory", "16M", "rdelay=1ms", "wdelay=1ms"])
        .spawn()
        .expect("nbdkit (installed by `make setup`)");
    let _nbdkit = Nbdkit(child);
    for _ in 0..100 {
        if hdd.exists() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let up = format!("nbd+unix:///?socket={}", hdd.display());
    let backing = Arc::new(NbdDevice::connect(&up).expect("connect to nbdkit"));
    assert_eq!(backing.size(), 16 << 20);
    let cache: Arc<dyn Device> = Arc::new(MemDevice::new(8 << 20));
    let spec = FormatSpec::new(vec![VolumeSpec { name: "disk".into(), size: 16 << 20 }]);
    Engine::format(cache.as_ref(), &spec).unwrap();
    let engine = Arc::new(
        Engine::open(EngineConfig {
            cache,
            volumes: vec![VolumeConfig { name: "disk".into(), backing }],
            write_mode: WriteMode::WriteThrough,
            replacement: Box::new(|cap| build(Kind::Lru, cap)),
            admission: Box::new(Aod),
        })
        .unwrap(),
    );
    let sock = dir.path().join("ember.sock");
    let running = Server::builder(Arc::new(EngineExports::new(engine.clone())))
        .listen_unix(&sock)
        .unwrap()
        .build()
        .unwrap();
    let running = running.spawn().unwrap();
    let uri = format!("nbd+unix:///disk?socket={}", sock.display());
    let out = Command::new("qemu-io")
        .args(["-f", "raw", "-c", "write -P 0xab 0 1M", "-c", "read -P 0xab 0 1M"])
        .args(["-c", "read -P 0xab 512k 4k", "-c", "flush", &uri])
        .output()
        .expect("qemu-io (installed by `make setup`)");
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "qemu-io failed: {text}");
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
