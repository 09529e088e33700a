//! The engine under test: formatting a cache and opening an engine with LRU and
//! admit-on-demand, a rig of volumes over memory, a reference model of every acknowledged
//! byte, and a seeded random workload.

use ember_engine::device::MemDevice;
use ember_engine::layout::Superblock;
use ember_engine::{
    Device, Engine, EngineConfig, EngineError, FormatSpec, Volume, VolumeConfig, VolumeSpec,
    WriteMode, WritebackConfig,
};
use ember_policy::admission::Aod;
use ember_policy::replacement::{build, Kind};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use std::sync::Arc;

use crate::devices::Jitter;

/// The block size the tests use.
pub const BS: u64 = 4096;

/// A seeded generator.
pub fn rng(seed: u64) -> Xoshiro256PlusPlus {
    Xoshiro256PlusPlus::seed_from_u64(seed)
}

/// Format `cache` for one volume per (name, size); `journal_bytes` of journal (`None`: the
/// default). Panics on failure; returns the superblock.
pub fn format(
    cache: &dyn Device,
    volumes: &[(&str, u64)],
    journal_bytes: Option<u64>,
) -> Superblock {
    let mut spec = FormatSpec::new(
        volumes.iter().map(|&(name, size)| VolumeSpec { name: name.into(), size }).collect(),
    );
    if let Some(j) = journal_bytes {
        spec.journal_bytes = j;
    }
    Engine::format(cache, &spec).unwrap_or_else(|e| panic!("format: {e}"))
}

/// The configuration of an engine over `cache` with one volume per (name, backing), LRU
/// replacement and admit-on-demand (Aod).
pub fn lru_config(
    cache: Arc<dyn Device>,
    volumes: Vec<(&str, Arc<dyn Device>)>,
    mode: WriteMode,
) -> EngineConfig {
    EngineConfig {
        cache,
        volumes: volumes
            .into_iter()
            .map(|(name, backing)| VolumeConfig { name: name.into(), backing })
            .collect(),
        write_mode: mode,
        replacement: Box::new(|cap| build(Kind::Lru, cap)),
        admission: Box::new(Aod),
    }
}

/// [`Engine::open_with`] of [`lru_config`].
pub fn open_lru(
    cache: Arc<dyn Device>,
    volumes: Vec<(&str, Arc<dyn Device>)>,
    mode: WriteMode,
    wb: WritebackConfig,
) -> Result<Engine, EngineError> {
    Engine::open_with(lru_config(cache, volumes, mode), wb)
}

/// Volumes over memory (their content is the truth a crash never loses) and a cache device.
pub struct Rig {
    /// The cache device.
    pub cache: Arc<dyn Device>,
    /// The volumes' names: vol0, vol1, …
    pub names: Vec<String>,
    /// The volumes' backing memory.
    pub backing: Vec<Arc<MemDevice>>,
    /// Serve the backing through [`Jitter`] (widens race windows).
    pub jitter: bool,
}

impl Rig {
    /// Format `cache` for `volumes` volumes of `blocks` blocks each, filled with seeded bytes.
    pub fn new(cache: Arc<dyn Device>, volumes: usize, blocks: u64, seed: u64) -> Self {
        let mut r = rng(seed);
        let backing: Vec<Arc<MemDevice>> = (0..volumes)
            .map(|_| {
                let mut b = vec![0u8; (blocks * BS) as usize];
                r.fill(&mut b[..]);
                Arc::new(MemDevice::from_bytes(b))
            })
            .collect();
        let names: Vec<String> = (0..volumes).map(|i| format!("vol{i}")).collect();
        let sizes: Vec<(&str, u64)> = names.iter().map(|n| (n.as_str(), blocks * BS)).collect();
        format(cache.as_ref(), &sizes, Some(0));
        Self { cache, names, backing, jitter: false }
    }

    /// Open an engine over the rig (LRU, admit-on-demand) with `mode`.
    pub fn open(&self, mode: WriteMode) -> Result<Engine, EngineError> {
        let volumes = self
            .names
            .iter()
            .zip(&self.backing)
            .map(|(n, b)| {
                let backing: Arc<dyn Device> =
                    if self.jitter { Arc::new(Jitter::new(b.clone())) } else { b.clone() };
                (n.as_str(), backing)
            })
            .collect();
        open_lru(self.cache.clone(), volumes, mode, WritebackConfig::default())
    }

    /// The reference: what every volume must read as (the backing content, which receives
    /// every acknowledged write before the acknowledgement).
    pub fn model(&self) -> Vec<Vec<u8>> {
        self.backing.iter().map(|b| b.snapshot()).collect()
    }
}

/// One client request.
#[derive(Clone, Debug)]
#[allow(missing_docs)]
pub enum Req {
    Read { vol: usize, off: u64, len: usize },
    Write { vol: usize, off: u64, data: Vec<u8>, fua: bool },
    Trim { vol: usize, off: u64, len: u64 },
    Zeroes { vol: usize, off: u64, len: u64 },
    Flush { vol: usize },
}

/// A random request inside blocks `[lo, hi)` of one of `volumes` volumes: mostly
/// block-aligned, sometimes unaligned byte ranges, up to 5 blocks long.
pub fn random_req(r: &mut impl Rng, volumes: usize, lo: u64, hi: u64, reads: u32) -> Req {
    let vol = r.gen_range(0..volumes);
    let b = r.gen_range(lo..hi);
    let nb = r.gen_range(1..=5u64).min(hi - b);
    let (off, len) = if r.gen_bool(0.75) {
        (b * BS, nb * BS)
    } else {
        let off = b * BS + r.gen_range(0..BS);
        let max = hi * BS - off;
        (off, r.gen_range(1..=(nb * BS).min(max)))
    };
    match r.gen_range(0..100u32) {
        x if x < reads => Req::Read { vol, off, len: len as usize },
        x if x < reads + (100 - reads) * 7 / 10 => {
            let mut data = vec![0u8; len as usize];
            r.fill(&mut data[..]);
            Req::Write { vol, off, data, fua: r.gen_bool(0.1) }
        }
        x if x < 96 => Req::Trim { vol, off, len },
        x if x < 99 => Req::Zeroes { vol, off, len },
        _ => Req::Flush { vol },
    }
}

/// Apply a request to the model (what it must look like once acknowledged).
pub fn apply(model: &mut [Vec<u8>], req: &Req) {
    match req {
        Req::Write { vol, off, data, .. } => {
            model[*vol][*off as usize..*off as usize + data.len()].copy_from_slice(data)
        }
        Req::Trim { vol, off, len } | Req::Zeroes { vol, off, len } => {
            model[*vol][*off as usize..(*off + *len) as usize].fill(0)
        }
        Req::Read { .. } | Req::Flush { .. } => {}
    }
}

/// Issue a request; a read's bytes come back.
pub fn issue(exports: &[Volume], req: &Req) -> Result<Option<Vec<u8>>, EngineError> {
    match req {
        Req::Read { vol, off, len } => {
            let mut b = vec![0u8; *len];
            exports[*vol].read(*off, &mut b)?;
            Ok(Some(b))
        }
        Req::Write { vol, off, data, fua } => exports[*vol].write(*off, data, *fua).map(|_| None),
        Req::Trim { vol, off, len } => exports[*vol].trim(*off, *len, false).map(|_| None),
        Req::Zeroes { vol, off, len } => {
            exports[*vol].write_zeroes(*off, *len, false, true).map(|_| None)
        }
        Req::Flush { vol } => exports[*vol].flush().map(|_| None),
    }
}

/// The rig's volumes in `e`, in order.
pub fn exports(e: &Engine, rig: &Rig) -> Vec<Volume> {
    rig.names.iter().map(|n| e.volume(n).expect("volume")).collect()
}

/// Read every volume through the engine in `chunk`-byte pieces and compare with the model;
/// returns the first mismatch as (volume, byte offset).
pub fn verify(exports: &[Volume], model: &[Vec<u8>], chunk: usize) -> Result<(), String> {
    for (v, want) in model.iter().enumerate() {
        let mut off = 0;
        while off < want.len() {
            let n = chunk.min(want.len() - off);
            let mut got = vec![0u8; n];
            exports[v]
                .read(off as u64, &mut got)
                .map_err(|e| format!("vol{v} read at {off}: {e}"))?;
            if let Some(i) = (0..n).find(|&i| got[i] != want[off + i]) {
                return Err(format!(
                    "vol{v} byte {} (block {}): got {:#04x}, want {:#04x}",
                    off + i,
                    (off + i) as u64 / BS,
                    got[i],
                    want[off + i]
                ));
            }
            off += n;
        }
    }
    Ok(())
}
