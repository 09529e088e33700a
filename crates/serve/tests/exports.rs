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

/// A cache device read as if with O_DIRECT: a hit waits on the medium.
struct OnTheMedium(MemDevice);

impl Device for OnTheMedium {
    fn size(&self) -> u64 {
        self.0.size()
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        self.0.read_at(offset, buf)
    }
    fn write_at(&self, offset: u64, data: &[u8]) -> std::io::Result<()> {
        self.0.write_at(offset, data)
    }
    fn sync(&self) -> std::io::Result<()> {
        self.0.sync()
    }
    fn trim(&self, offset: u64, len: u64) -> std::io::Result<()> {
        self.0.trim(offset, len)
    }
    fn describe(&self) -> String {
        "memory read as if O_DIRECT".into()
    }
    fn reads_from_memory(&self) -> bool {
        false
    }
}

/// `read_if_fast`, the server's hit path: a hit is served at once (with the backing's bytes),
/// a miss declined; on an O_DIRECT-like cache device only for an idle connection, since
/// there a hit waits on the device.
#[test]
fn read_if_fast_serves_hits_and_respects_the_direct_rule() {
    for memory in [true, false] {
        let cache: Arc<dyn Device> = if memory {
            Arc::new(MemDevice::new(16 * MIB))
        } else {
            Arc::new(OnTheMedium(MemDevice::new(16 * MIB)))
        };
        Engine::format(
            cache.as_ref(),
            &FormatSpec::new(vec![VolumeSpec { name: "a".into(), size: MIB }]),
        )
        .unwrap();
        let content: Vec<u8> = (0..MIB).map(|i| (i % 253) as u8).collect();
        let engine = Arc::new(
            Engine::open(EngineConfig {
                cache,
                volumes: vec![VolumeConfig {
                    name: "a".into(),
                    backing: Arc::new(MemDevice::from_bytes(content.clone())),
                }],
                write_mode: WriteMode::WriteThrough,
                replacement: Box::new(|cap| build(Kind::Lru, cap)),
                admission: Box::new(Aod),
            })
            .unwrap(),
        );
        let export = EngineExports::new(engine.clone()).get("a").unwrap();
        let mut buf = vec![0u8; 4096];
        assert!(export.read_if_fast(8192, &mut buf, true).is_none(), "a miss is declined");
        export.read(8192, &mut buf).unwrap(); // now cached
        buf.fill(0);
        let busy = export.read_if_fast(8192, &mut buf, false);
        assert_eq!(busy.is_some(), memory, "memory {memory}: a busy connection's hit");
        buf.fill(0);
        export.read_if_fast(8192, &mut buf, true).expect("an idle connection's hit").unwrap();
        assert_eq!(buf, content[8192..12288]);
        engine.shutdown().unwrap();
    }
}
