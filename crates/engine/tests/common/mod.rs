//! Shared by the end-to-end tests: a rig of volumes over memory, a reference model of every
//! acknowledged byte, and a seeded random workload.

#![allow(dead_code)]
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "integration-test helpers")]

use ember_engine::device::MemDevice;
use ember_engine::{
    Device, Engine, EngineConfig, FormatSpec, Volume, VolumeConfig, VolumeSpec, WriteMode,
};
use ember_policy::admission::Aod;
use ember_policy::replacement::{build, Kind};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use std::sync::Arc;

pub const BS: u64 = 4096;

pub fn rng(seed: u64) -> Xoshiro256PlusPlus {
    Xoshiro256PlusPlus::seed_from_u64(seed)
}

/// Volumes over memory (their content is the truth a crash never loses) and a cache device.
pub struct Rig {
    pub cache: Arc<dyn Device>,
    pub names: Vec<String>,
    pub backing: Vec<Arc<MemDevice>>,
    /// Serve the backing through [`Jitter`] (widens race windows).
    pub jitter: bool,
}

/// Sleeps up to 100 µs after about one read or write in three of the device it wraps, so
/// requests racing on a block overlap in every possible order.
pub struct Jitter(pub Arc<dyn Device>, pub std::sync::atomic::AtomicU64);

impl Jitter {
    fn pause(&self) {
        let n = self.1.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let h = n.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40;
        if h.is_multiple_of(3) {
            std::thread::sleep(std::time::Duration::from_micros(h % 100));
        }
    }
}

impl Device for Jitter {
    fn size(&self) -> u64 {
        self.0.size()
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        self.0.read_at(offset, buf)?;
        self.pause();
        Ok(())
    }
    fn write_at(&self, offset: u64, data: &[u8]) -> std::io::Result<()> {
        self.pause();
        self.0.write_at(offset, data)
    }
    fn sync(&self) -> std::io::Result<()> {
        self.0.sync()
    }
    fn trim(&self, offset: u64, len: u64) -> std::io::Result<()> {
        self.pause();
        self.0.trim(offset, len)
    }
    fn write_zeroes(&self, offset: u64, len: u64) -> std::io::Result<()> {
        self.0.write_zeroes(offset, len)
    }
    fn describe(&self) -> String {
        format!("jittery {}", self.0.describe())
    }
    fn identity(&self) -> std::io::Result<ember_engine::device::Identity> {
        self.0.identity()
    }
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
        let mut spec = FormatSpec::new(
            names.iter().map(|n| VolumeSpec { name: n.clone(), size: blocks * BS }).collect(),
        );
        spec.journal_bytes = 0;
        Engine::format(cache.as_ref(), &spec).expect("format");
        Self { cache, names, backing, jitter: false }
    }

    pub fn open(&self, mode: WriteMode) -> Result<Engine, ember_engine::EngineError> {
        Engine::open(EngineConfig {
            cache: self.cache.clone(),
            volumes: self
                .names
                .iter()
                .zip(&self.backing)
                .map(|(n, b)| {
                    let backing: Arc<dyn Device> = if self.jitter {
                        Arc::new(Jitter(b.clone(), Default::default()))
                    } else {
                        b.clone()
                    };
                    VolumeConfig { name: n.clone(), backing }
                })
                .collect(),
            write_mode: mode,
            replacement: Box::new(|cap| build(Kind::Lru, cap)),
            admission: Box::new(Aod),
        })
    }

    /// The reference: what every volume must read as (the backing content, which receives
    /// every acknowledged write before the acknowledgement).
    pub fn model(&self) -> Vec<Vec<u8>> {
        self.backing.iter().map(|b| b.snapshot()).collect()
    }
}

/// One client request.
#[derive(Clone, Debug)]
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
pub fn issue(exports: &[Volume], req: &Req) -> Result<Option<Vec<u8>>, ember_engine::EngineError> {
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
