//! Replays the stored fuzz corpus of the `layout` target (`fuzz/corpus/layout`,
//! docs/design/testing.md) through the entry point the AFL++ target uses: every input describes a
//! cache device image that goes through the superblock, checkpoint and journal decoders and
//! `Engine::inspect`. No input may panic. Files named `seed-*` are images written by the
//! engine itself and must decode.
//!
//! `cargo test --release -p ember-engine --test fuzz_corpus -- --ignored write_seeds`
//! re-writes the seeds.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "integration-test helpers")]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use ember_engine::device::MemDevice;
use ember_engine::fuzz_entry::{decode_layout, input_from_device};
use ember_engine::{Device, Engine, WriteMode, WritebackConfig};
use ember_testkit::engine::open_lru;

fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/layout")
}

#[test]
fn layout_corpus() {
    let mut files: Vec<_> = std::fs::read_dir(corpus())
        .expect("fuzz/corpus/layout")
        .map(|e| e.expect("directory entry").path())
        .collect();
    files.sort();
    assert!(files.len() >= 4, "the layout corpus holds {} files", files.len());
    for path in &files {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let data = std::fs::read(path).unwrap();
        let outcome = std::panic::catch_unwind(|| decode_layout(&data))
            .unwrap_or_else(|_| panic!("fuzz corpus input layout/{name} panicked"));
        if name.starts_with("seed-") {
            assert!(outcome.inspected, "{name}: {outcome:?}");
            assert!(outcome.error.is_none(), "{name}: {outcome:?}");
        }
        if name.starts_with("seed-checkpoint") {
            assert!(outcome.checkpoint_entries.is_some_and(|n| n > 0), "{name}: {outcome:?}");
        }
        if name.starts_with("seed-journal") {
            assert!(outcome.journal_commits.is_some_and(|n| n > 0), "{name}: {outcome:?}");
        }
        if name.starts_with("bad-") || name.starts_with("crash-geometry") {
            assert!(!outcome.inspected, "{name}: a corrupt image was inspected: {outcome:?}");
        }
    }
}

const BS: u64 = 4096;
const VOLUME_BLOCKS: u64 = 64;

fn format(journal_bytes: u64) -> (Arc<MemDevice>, Vec<Arc<MemDevice>>) {
    let cache = Arc::new(MemDevice::new(64 * BS + journal_bytes + 4 * BS));
    let backing: Vec<Arc<MemDevice>> = (0..2)
        .map(|v| {
            let bytes = (0..VOLUME_BLOCKS * BS).map(|i| (i / BS + v) as u8).collect();
            Arc::new(MemDevice::from_bytes(bytes))
        })
        .collect();
    let volumes = [("vol0", VOLUME_BLOCKS * BS), ("vol1", VOLUME_BLOCKS * BS)];
    ember_testkit::engine::format(cache.as_ref(), &volumes, Some(journal_bytes));
    (cache, backing)
}

fn open(cache: &Arc<MemDevice>, backing: &[Arc<MemDevice>], mode: WriteMode) -> Engine {
    let names = ["vol0", "vol1"];
    let volumes: Vec<(&str, Arc<dyn Device>)> =
        backing.iter().zip(names).map(|(b, n)| (n, b.clone() as Arc<dyn Device>)).collect();
    open_lru(cache.clone(), volumes, mode, WritebackConfig::default()).expect("open")
}

fn save(name: &str, bytes: &[u8]) {
    std::fs::create_dir_all(corpus()).unwrap();
    std::fs::write(corpus().join(name), bytes).unwrap();
    println!("layout/{name}: {} bytes", bytes.len());
}

#[test]
#[ignore = "re-writes the seed corpus; run by hand"]
fn write_seeds() {
    // Just formatted: no checkpoint.
    let (cache, backing) = format(0);
    save("seed-formatted", &input_from_device(cache.as_ref(), 0).unwrap());

    // A clean shutdown after reads: a checkpoint of the resident blocks.
    let engine = open(&cache, &backing, WriteMode::WriteThrough);
    let mut buf = vec![0u8; BS as usize];
    for v in engine.volume_names() {
        let export = engine.volume(&v).unwrap();
        for b in [0, 3, 7, 20] {
            export.read(b * BS, &mut buf).unwrap();
        }
    }
    engine.shutdown().unwrap();
    drop(engine);
    let seed = input_from_device(cache.as_ref(), 0).unwrap();
    save("seed-checkpoint", &seed);
    // The same with a flipped entry byte (its CRC kept): the checkpoint is refused.
    let mut bad = seed.clone();
    let at = 2 * 4096 + 4 + 4096 + 3;
    bad[at] ^= 0x40;
    save("corrupt-checkpoint-entry", &bad);

    // Write-back persist, crashed after two flushed barriers: dirty entries in the journal.
    let (cache, backing) = format(8 * BS);
    let engine = open(&cache, &backing, WriteMode::WriteBackPersist);
    let export = engine.volume("vol1").unwrap();
    for (i, b) in [2u64, 5, 9].into_iter().enumerate() {
        export.write(b * BS, &vec![0xC0 | i as u8; BS as usize], false).unwrap();
        export.flush().unwrap();
    }
    // The image as a power cut would leave it, with the engine still running.
    let crashed = MemDevice::from_bytes(cache.snapshot());
    save("seed-journal-crashed-persist", &input_from_device(&crashed, 8).unwrap());
    engine.shutdown().unwrap();
    drop(engine);
    save("seed-persist-clean", &input_from_device(cache.as_ref(), 8).unwrap());

    // Corrupt images that must be refused: a future layout version, a geometry beyond the
    // device, more volumes than allowed (superblock CRCs zeroed so the harness fills them in).
    let base = input_from_device(cache.as_ref(), 0).unwrap();
    let mut version = base.clone();
    version[8..12].copy_from_slice(&9u32.to_le_bytes());
    version[4092..4096].fill(0);
    version[4096..8192].fill(0);
    save("bad-version-9", &version);
    let mut count = base.clone();
    count[180..184].copy_from_slice(&33u32.to_le_bytes());
    count[4092..4096].fill(0);
    count[4096..8192].fill(0);
    save("bad-volume-count", &count);
    let mut size = base;
    size[40..48].copy_from_slice(&(4 * BS).to_le_bytes());
    size[4092..4096].fill(0);
    size[4096..8192].fill(0);
    save("bad-device-size", &size);
}
