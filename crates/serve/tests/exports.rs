//! The adapter's export set over an engine: the empty name selects the first volume, the list
//! names every volume with its policy and backing, and engine errors become the NBD errors a
//! client sees (EINVAL for a request beyond the end, ESHUTDOWN after shutdown).

use ember_engine::device::MemDevice;
use ember_engine::{Device, WriteMode, WritebackConfig};
use ember_nbd::{ExportError, ExportSet};
use ember_serve::EngineExports;
use ember_testkit::devices::OnTheMedium;
use ember_testkit::engine::{format, open_lru};
use std::sync::Arc;

const MIB: u64 = 1 << 20;

#[test]
fn export_set_names_volumes_and_maps_errors() {
    let cache: Arc<dyn Device> = Arc::new(MemDevice::new(16 * MIB));
    format(cache.as_ref(), &[("a", MIB), ("b", 2 * MIB)], None);
    let a: Arc<dyn Device> = Arc::new(MemDevice::from_bytes(vec![7u8; MIB as usize]));
    let b: Arc<dyn Device> = Arc::new(MemDevice::new(2 * MIB));
    let engine = Arc::new(
        open_lru(cache, vec![("a", a), ("b", b)], WriteMode::WriteThrough, Default::default())
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

/// `read_if_fast`, the server's hit path: a hit is served at once (with the backing's bytes),
/// a miss declined; on an O_DIRECT-like cache device only for an idle connection, since
/// there a hit waits on the device.
#[test]
fn read_if_fast_serves_hits_and_respects_the_direct_rule() {
    for memory in [true, false] {
        let cache: Arc<dyn Device> = if memory {
            Arc::new(MemDevice::new(16 * MIB))
        } else {
            Arc::new(OnTheMedium::new(16 * MIB))
        };
        format(cache.as_ref(), &[("a", MIB)], None);
        let content: Vec<u8> = (0..MIB).map(|i| (i % 253) as u8).collect();
        let backing: Arc<dyn Device> = Arc::new(MemDevice::from_bytes(content.clone()));
        let wb = WritebackConfig::default();
        let engine =
            Arc::new(open_lru(cache, vec![("a", backing)], WriteMode::WriteThrough, wb).unwrap());
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

/// NBD_CMD_CACHE replies before its load ends, and a loaded block never overwrites a later
/// write: a CACHE of a block and a WRITE of it sent at once (the load races the write), then
/// a read, many times over, under each policy that updates or bypasses the cache on a write.
/// The race rounds use the volume's first half only; a long CACHE of the second half, which
/// no write touched, then loads every one of its blocks in the background, and the loads
/// are counted. (Whether a racing load wins against its write is timing: under write-back
/// every written block is cached by its write, so only the untouched half must load.)
#[test]
fn a_cache_then_a_write_of_the_same_block_reads_back_the_write() {
    for mode in [WriteMode::WriteThrough, WriteMode::WriteAround, WriteMode::WriteBackFlush] {
        let cache: Arc<dyn Device> = Arc::new(MemDevice::new(16 * MIB));
        format(cache.as_ref(), &[("a", MIB)], None);
        let backing: Arc<dyn Device> = Arc::new(MemDevice::from_bytes(vec![7u8; MIB as usize]));
        let engine = Arc::new(
            open_lru(cache, vec![("a", backing)], mode, WritebackConfig::default()).unwrap(),
        );
        let export = EngineExports::new(engine.clone()).get("a").unwrap();
        let half = MIB / 4096 / 2;
        for round in 0..400u64 {
            let b = round % half;
            let data = vec![(round % 251) as u8 + 1; 4096];
            export.cache(b * 4096, 4096).unwrap();
            export.write(b * 4096, &data, false).unwrap();
            let mut got = vec![0u8; 4096];
            export.read(b * 4096, &mut got).unwrap();
            assert!(got == data, "{mode}: round {round}, block {b}: the write is read back");
        }
        // A long CACHE of the untouched half, queued, then loaded in the background: every
        // one of its blocks is loaded, on top of whatever the racing loads counted.
        let before = engine.stats().total.cache_loads;
        export.cache(MIB / 2, MIB / 2).unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while engine.stats().total.cache_loads < before + half
            && std::time::Instant::now() < deadline
        {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let loads = engine.stats().total.cache_loads - before;
        assert!(loads >= half, "{mode}: the untouched half's {half} blocks are loaded ({loads})");
        let mut got = vec![0u8; 4096];
        export.read(MIB / 2, &mut got).unwrap();
        assert!(got.iter().all(|&x| x == 7), "{mode}: a loaded block reads backing's bytes");
        let _ = engine.shutdown();
    }
}

/// A degraded cache reads no device: on an O_DIRECT-like cache a busy connection's READ is
/// answered at once from backing's memory (a pass-through, no worker), with backing's bytes.
#[test]
fn a_degraded_read_is_answered_at_once_even_on_a_direct_cache() {
    let cache: Arc<dyn Device> = Arc::new(OnTheMedium::new(16 * MIB));
    format(cache.as_ref(), &[("a", MIB)], None);
    let content: Vec<u8> = (0..MIB).map(|i| (i % 241) as u8).collect();
    let backing: Arc<dyn Device> = Arc::new(MemDevice::from_bytes(content.clone()));
    let engine = Arc::new(
        open_lru(cache, vec![("a", backing)], WriteMode::WriteThrough, Default::default()).unwrap(),
    );
    let export = EngineExports::new(engine.clone()).get("a").unwrap();
    let mut buf = vec![0u8; 4096];
    assert!(export.read_if_fast(8192, &mut buf, false).is_none(), "a miss while healthy");
    assert!(engine.degrade("test"));
    export.read_if_fast(8192, &mut buf, false).expect("answered at once").unwrap();
    assert_eq!(buf, content[8192..12288]);
}
