//! Warm start and clean stop of the engine alone (no process start, no NBD, no data I/O),
//! per million cached blocks (target: under 1 s each).
//!
//! `cargo run --release -p ember-engine --example warm_start -- BLOCKS [DIR]`: formats a
//! sparse cache file in DIR (default: a temporary directory) in front of a sparse backing
//! file, writes a checkpoint naming BLOCKS cached blocks (as a clean stop would), then three
//! rounds of: open (warm), one read hit (so the map changed), clean stop (the checkpoint
//! written). Prints each round's times and the medians per million blocks, then one open and
//! stop with no request (the map unchanged). The data region is never written: the blocks'
//! contents are not this measurement's business.

use ember_engine::device::{FileDevice, FileOptions};
use ember_engine::layout::{block_key, Checkpoint, MapEntry, Superblock};
use ember_engine::{
    Device, Engine, EngineConfig, FormatSpec, StartKind, VolumeConfig, VolumeSpec, WriteMode,
};
use ember_policy::admission::Aod;
use ember_policy::replacement::Lru;
use std::sync::Arc;
use std::time::Instant;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let blocks: u64 = args.next().ok_or("usage: warm_start BLOCKS [DIR]")?.parse()?;
    let tmp = tempfile::tempdir()?;
    let dir = args.next().map_or_else(|| tmp.path().to_path_buf(), Into::into);
    let bs = 4096u64;
    let file = |name: &str, size: u64| -> Result<Arc<FileDevice>, std::io::Error> {
        let opts = FileOptions { create_size: Some(size), ..FileOptions::default() };
        Ok(Arc::new(FileDevice::open(&dir.join(name), opts)?))
    };
    let cache = file("cache.img", blocks * bs + blocks * bs / 16 + (256 << 20))?;
    let backing = file("backing.img", blocks * bs)?;
    Engine::format(
        cache.as_ref(),
        &FormatSpec::new(vec![VolumeSpec { name: "disk".into(), size: blocks * bs }]),
    )?;
    let open = || {
        Engine::open(EngineConfig {
            cache: cache.clone(),
            volumes: vec![VolumeConfig { name: "disk".into(), backing: backing.clone() }],
            write_mode: WriteMode::WriteThrough,
            replacement: Box::new(|cap| Box::new(Lru::new(cap))),
            admission: Box::new(Aod),
        })
    };
    // A first run records the backing's identity; then the checkpoint is replaced by one
    // naming every block (keys in a scrambled order, as a real map's are).
    open()?.shutdown()?;
    let mut sb = Superblock::read(cache.as_ref())?;
    let entries: Vec<MapEntry> = (0..blocks)
        .map(|i| MapEntry {
            key: block_key(0, (i * 2_654_435_761) % blocks),
            cache_block: i as u32,
            flags: 0,
        })
        .collect();
    let (slot, generation) = (1 - sb.checkpoint_slot.min(1), sb.checkpoint_generation + 1);
    sb.checkpoint_crc =
        Checkpoint::write(cache.as_ref(), &sb.geometry, slot, generation, &entries)?;
    (sb.checkpoint_slot, sb.checkpoint_generation) = (slot, generation);
    sb.checkpoint_entries = blocks;
    sb.sequence += 1;
    cache.sync()?;
    sb.write(cache.as_ref())?;
    drop(entries);
    let m = blocks as f64 / 1e6;
    let (mut starts, mut stops) = (Vec::new(), Vec::new());
    for round in 1..=3 {
        let t = Instant::now();
        let eng = open()?;
        let start = t.elapsed().as_secs_f64();
        let rep = eng.open_report();
        if rep.start != StartKind::Warm || rep.loaded_blocks != blocks {
            return Err(format!("round {round}: not warm with {blocks} blocks: {rep:?}").into());
        }
        let mut b = vec![0u8; bs as usize];
        eng.volume("disk").ok_or("no volume")?.read(0, &mut b)?;
        let t = Instant::now();
        let done = eng.shutdown()?;
        let stop = t.elapsed().as_secs_f64();
        println!(
            "round {round}: warm start {start:.3} s, stop {stop:.3} s ({} entries written)",
            done.persisted_blocks
        );
        starts.push(start / m);
        stops.push(stop / m);
    }
    let t = Instant::now();
    let eng = open()?;
    let start = t.elapsed().as_secs_f64();
    let t = Instant::now();
    eng.shutdown()?;
    println!("unchanged: warm start {start:.3} s, stop {:.3} s", t.elapsed().as_secs_f64());
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    println!(
        "{blocks} blocks: warm start {:.3} s, clean stop {:.3} s per million blocks (medians of 3)",
        median(&mut starts),
        median(&mut stops)
    );
    Ok(())
}
