//! The adapter's export set over an engine: the empty name selects the first volume, the list
//! names every volume with its policy and backing, and engine errors become the NBD errors a
//! client sees (EINVAL for a request beyond the end, ESHUTDOWN after shutdown).

use ember_engine::device::MemDevice;
use ember_engine::{Device, Engine, EngineConfig, FormatSpec, VolumeConfig, VolumeSpec, WriteMode};
use ember_nbd::{ExportError, ExportSet};
use ember_policy::admission::Aod;
use ember_policy::replacement::{build, Kind};
use ember_serve::EngineExports;
use std::sync::Arc;

const MIB: u64 = 1 << 20;

#[test]
fn export_set_names_volumes_and_maps_errors() {
    let cache: Arc<dyn Device> = Arc::new(MemDevice::new(16 * MIB));
    let spec = FormatSpec::new(vec![
        VolumeSpec { name: "a".into(), size: MIB },
        VolumeSpec { name: "b".into(), size: 2 * MIB },
    ]);
    Engine::format(cache.as_ref(), &spec).unwrap();
    let a = Arc::new(MemDevice::from_bytes(vec![7u8; MIB as usize]));
    let b = Arc::new(MemDevice::new(2 * MIB));
    let engine = Arc::new(
        Engine::open(EngineConfig {
            cache,
            volumes: vec![
                VolumeConfig { name: "a".into(), backing: a },
                VolumeConfig { name: "b".into(), backing: b },
            ],
            write_mode: WriteMode::WriteThrough,
            replacement: Box::new(|cap| build(Kind::Lru, cap)),
            admission: Box::new(Aod),
        })
        .unwrap(),
    );
    let set = EngineExports::new(engine.clone());
    let first = set.get("").expect("the empty name selects the first volume");
    assert_eq!(first.size(), MIB);
    assert_eq!(set.get("b").unwrap().size(), 2 * MIB);
    assert!(set.get("c").is_none());
    let list = set.list();
    assert_eq!(list.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(), ["a", "b"]);
    assert!(list[0].1.starts_with("ember write-through cache over "), "{}", list[0].1);
    let mut buf = [0u8; 16];
    first.read(100, &mut buf).unwrap();
    assert_eq!(buf, [7u8; 16]);
    let e = first.read(MIB - 8, &mut buf).unwrap_err();
    assert!(matches!(e, ExportError::Invalid(_)), "{e}");
    engine.shutdown().unwrap();
    let e = first.read(0, &mut buf).unwrap_err();
    assert!(matches!(e, ExportError::Shutdown), "{e}");
}
