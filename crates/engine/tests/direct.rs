//! The engine on an O_DIRECT cache file: a random workload checked against the model, a
//! clean shutdown, and a warm restart that reads everything back.

use ember_engine::device::{FileDevice, FileOptions};
use ember_engine::{Device, StartKind, WriteMode};
use ember_testkit::engine::*;
use std::sync::Arc;

#[test]
fn o_direct_cache_file_round_trip_and_warm_restart() {
    // Under target/, which is on a disk file system (tmpfs refuses O_DIRECT).
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let path = dir.path().join("cache.img");
    let dev = FileDevice::open(
        &path,
        FileOptions { direct: true, create_size: Some(1 << 20), exclusive: false },
    )
    .expect("O_DIRECT cache file");
    assert!(dev.is_direct());
    let cache: Arc<dyn Device> = Arc::new(dev);
    let rig = Rig::new(cache, 2, 128, 5);
    let mut model = rig.model();
    let engine = rig.open(WriteMode::WriteThrough).unwrap();
    let ex = exports(&engine, &rig);
    let mut r = rng(5);
    for i in 0..600 {
        let req = random_req(&mut r, 2, 0, 128, 50);
        let got = issue(&ex, &req).unwrap_or_else(|e| panic!("#{i} {req:?}: {e}"));
        if let (Req::Read { vol, off, len }, Some(got)) = (&req, got) {
            assert_eq!(got, model[*vol][*off as usize..*off as usize + len], "#{i} {req:?}");
        }
        apply(&mut model, &req);
    }
    assert!(engine.stats().total.read_hits > 100, "{:?}", engine.stats().total);
    verify(&ex, &model, 5 * BS as usize + 3).unwrap();
    let persisted = engine.shutdown().unwrap().persisted_blocks;
    drop((ex, engine));
    let engine = rig.open(WriteMode::WriteThrough).unwrap();
    assert_eq!(engine.open_report().start, StartKind::Warm);
    assert_eq!(engine.open_report().loaded_blocks, persisted);
    verify(&exports(&engine, &rig), &model, BS as usize).unwrap();
}
