//! The power-cut harness of the engine's write-policy trials (`writeback_power.rs`,
//! `live_power.rs`): one power supply for the cache device and backing (the n-th I/O over
//! both cuts both, dropping every unsynced write, or tearing it), a small volume over it,
//! and the model of what each byte may hold after the cut.

use ember_engine::device::fault::PowerCut;
use ember_engine::device::{FaultDevice, MemDevice};
use ember_engine::{
    Device, DirtyLimit, Engine, EngineConfig, FormatSpec, VolumeConfig, VolumeSpec, WriteMode,
    WritebackConfig,
};
use ember_policy::admission::{Aod, Wmna};
use ember_policy::replacement::{build, Kind};
use parking_lot::Mutex;
use rand::Rng;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::sync::Arc;

use crate::devices::{Wrap, Wrapper};
use crate::engine::{rng, BS};

pub const BLOCKS: u64 = 48;
pub const VOL: u64 = BLOCKS * BS;
pub const OPS: usize = 160;
/// A client whose power cut is still to come goes on past `OPS` requests, up to this many.
pub const MAX_OPS: usize = 10 * OPS;

/// One power supply for the cache device and backing: the n-th I/O over both cuts both.
pub struct Power {
    pub ios: AtomicU64,
    pub cut_at: AtomicU64,
    /// The armed cut has happened.
    pub fired: AtomicBool,
    pub cut: Mutex<PowerCut>,
    pub devices: Vec<Arc<FaultDevice>>,
}

impl Power {
    pub fn tick(&self) {
        let n = self.ios.fetch_add(1, SeqCst) + 1;
        if n == self.cut_at.load(SeqCst) {
            self.fired.store(true, SeqCst);
            let pc = *self.cut.lock();
            for d in &self.devices {
                d.power_cut(pc);
            }
        }
    }
    pub fn arm(&self, after: u64, pc: PowerCut) {
        *self.cut.lock() = pc;
        self.fired.store(false, SeqCst);
        self.cut_at.store(self.ios.load(SeqCst) + after, SeqCst);
    }
    /// Whether the armed cut has happened.
    pub fn fired(&self) -> bool {
        self.fired.load(SeqCst)
    }
    /// Whether a cut is armed and still to come.
    pub fn pending(&self) -> bool {
        self.cut_at.load(SeqCst) != 0 && !self.fired()
    }
    pub fn disarm(&self) {
        self.cut_at.store(0, SeqCst);
    }
    pub fn revive(&self) {
        self.disarm();
        for d in &self.devices {
            d.revive();
        }
    }
}

/// A device on the shared power supply: every I/O through it counts toward the cut.
pub struct Rail(pub Arc<FaultDevice>, pub Arc<Power>);

impl Wrapper for Rail {
    fn inner(&self) -> &dyn Device {
        self.0.as_ref()
    }
    fn describe(&self) -> String {
        self.0.describe()
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        self.1.tick();
        self.0.read_at(offset, buf)
    }
    fn write_at(&self, offset: u64, data: &[u8]) -> std::io::Result<()> {
        self.1.tick();
        self.0.write_at(offset, data)
    }
    fn sync(&self) -> std::io::Result<()> {
        self.1.tick();
        self.0.sync()
    }
    fn trim(&self, offset: u64, len: u64) -> std::io::Result<()> {
        self.1.tick();
        self.0.trim(offset, len)
    }
    fn write_zeroes(&self, offset: u64, len: u64) -> std::io::Result<()> {
        self.1.tick();
        self.0.write_zeroes(offset, len)
    }
}

pub struct Bench {
    pub power: Arc<Power>,
    pub cache: Arc<FaultDevice>,
    pub backing: Arc<FaultDevice>,
    pub backing_mem: Arc<MemDevice>,
    pub lru: bool,
    pub seed: u64,
}

impl Bench {
    pub fn new(seed: u64) -> Self {
        let mut r = rng(seed ^ 0xB1);
        let mut init = vec![0u8; VOL as usize];
        r.fill(&mut init[..]);
        let backing_mem = Arc::new(MemDevice::from_bytes(init));
        let backing = Arc::new(FaultDevice::new(backing_mem.clone()).unwrap());
        let cache = Arc::new(FaultDevice::new(Arc::new(MemDevice::new(512 * 1024))).unwrap());
        let mut spec = FormatSpec::new(vec![VolumeSpec { name: "v".into(), size: VOL }]);
        // A 16-block journal: barriers fill it and checkpoints take over, both exercised.
        spec.journal_bytes = 16 * BS;
        Engine::format(cache.as_ref(), &spec).unwrap();
        let power = Arc::new(Power {
            ios: AtomicU64::new(0),
            cut_at: AtomicU64::new(0),
            fired: AtomicBool::new(false),
            cut: Mutex::new(PowerCut::DROP_ALL),
            devices: vec![cache.clone(), backing.clone()],
        });
        Self { power, cache, backing, backing_mem, lru: seed % 2 == 1, seed }
    }

    pub fn open(&self, mode: WriteMode) -> Result<Engine, ember_engine::EngineError> {
        Engine::open_with(
            EngineConfig {
                cache: Arc::new(Wrap(Rail(self.cache.clone(), self.power.clone()))),
                volumes: vec![VolumeConfig {
                    name: "v".into(),
                    backing: Arc::new(Wrap(Rail(self.backing.clone(), self.power.clone()))),
                }],
                write_mode: mode,
                replacement: Box::new(|cap| build(Kind::Lru, cap)),
                // Ordered write-back: every fourth seed refuses write misses (WMNA), so
                // refused writes go to backing directly, behind the older epochs.
                admission: if mode == WriteMode::OrderedWriteBack && self.seed.is_multiple_of(4) {
                    Box::new(Wmna)
                } else {
                    Box::new(Aod)
                },
            },
            // Small limits so fallbacks, epochs and eviction all happen in 48 blocks.
            WritebackConfig {
                max_dirty: Some(DirtyLimit::Blocks(40)),
                min_dirty: Some(DirtyLimit::Blocks(6)),
                max_epochs: 4,
                batch_blocks: 8,
                // Odd seeds flush in LRU order, even ones in ascending order.
                lru_flush_order: self.lru,
            },
        )
    }
}

/// What each byte may hold after a crash: its value at the last durable point, or the
/// value of a write issued after that point.
pub struct Model {
    pub latest: Vec<u8>,
    pub base: Vec<u8>,
    /// Writes issued after the last FLUSH: (offset, bytes).
    pub pending: Vec<(u64, Vec<u8>)>,
    /// Per byte: pending writes before this index are older than a durable FUA write.
    pub floor: Vec<usize>,
    /// Ordered write-back's check: the volume at the start of each epoch (after each
    /// acknowledged FLUSH) and the writes issued in each epoch.
    pub epochs: Vec<Epoch>,
}

/// One epoch of the client (between two FLUSHes): what every write before it left, and the
/// writes issued in it (also the one the power cut may have interrupted).
pub struct Epoch {
    pub start: Vec<u8>,
    pub writes: Vec<(u64, Vec<u8>)>,
}

impl Model {
    pub fn new(init: Vec<u8>) -> Self {
        Self {
            base: init.clone(),
            epochs: vec![Epoch { start: init.clone(), writes: Vec::new() }],
            latest: init,
            pending: Vec::new(),
            floor: vec![0; VOL as usize],
        }
    }
    pub fn issue(&mut self, off: u64, data: Vec<u8>) {
        if let Some(e) = self.epochs.last_mut() {
            e.writes.push((off, data.clone()));
        }
        self.pending.push((off, data));
    }
    pub fn acked(&mut self, fua_durable: bool) {
        let Some((off, data)) = self.pending.last() else { return };
        let (o, n) = (*off as usize, data.len());
        self.latest[o..o + n].copy_from_slice(data);
        if fua_durable {
            self.base[o..o + n].copy_from_slice(data);
            let idx = self.pending.len();
            self.floor[o..o + n].iter_mut().for_each(|f| *f = idx);
        }
    }
    pub fn flushed(&mut self) {
        self.base.copy_from_slice(&self.latest);
        self.pending.clear();
        self.floor.iter_mut().for_each(|f| *f = 0);
        self.epochs.push(Epoch { start: self.latest.clone(), writes: Vec::new() });
    }
    /// Ordered write-back's promise (prefix consistency at epoch granularity): for some
    /// epoch E, every byte holds its value after all epochs before E, or a value a write of
    /// E gave it (any subset of E's writes, in any order, torn at any sector). Returns the
    /// newest such E, or the bytes that fit no epoch for the E that fits best.
    pub fn prefix_epoch(&self, got: &[u8]) -> Result<usize, (usize, usize)> {
        let mut best = (usize::MAX, 0);
        for (i, e) in self.epochs.iter().enumerate().rev() {
            let mut first = None;
            let mut count = 0;
            for (b, &v) in got.iter().enumerate() {
                if v == e.start[b] {
                    continue;
                }
                let ok = e.writes.iter().any(|(o, d)| {
                    let o = *o as usize;
                    b >= o && b < o + d.len() && d[b - o] == v
                });
                if !ok {
                    first.get_or_insert(b);
                    count += 1;
                }
            }
            match first {
                None => return Ok(i),
                Some(f) if count < best.0 => best = (count, f),
                Some(_) => {}
            }
        }
        Err((best.1, best.0))
    }
    /// Bytes that hold none of their allowed values: (first offset, count).
    pub fn violations(&self, got: &[u8]) -> Option<(usize, usize)> {
        let mut first = None;
        let mut count = 0;
        for (b, &v) in got.iter().enumerate() {
            if v == self.base[b] {
                continue;
            }
            let ok = self.pending[self.floor[b].min(self.pending.len())..].iter().any(|(o, d)| {
                let o = *o as usize;
                b >= o && b < o + d.len() && d[b - o] == v
            });
            if !ok {
                first.get_or_insert(b);
                count += 1;
            }
        }
        first.map(|f| (f, count))
    }
}

/// What a trial adds to the client of [`client`]: when an acknowledged FLUSH (or FUA write)
/// counts as a durable point, and requests of its own.
pub trait Rules {
    /// Whether a FLUSH or FUA write acknowledged now promises durability; asked before the
    /// request is sent and after it is acknowledged, and both must say yes.
    fn durable(&self) -> bool {
        true
    }
    /// A request of the trial's own in place of the FLUSH the draw `x` (85 to 99) would
    /// send: its result, with the model updated, or `None` to send the FLUSH.
    fn request(&mut self, _x: u32, _model: &mut Model) -> Option<Result<(), String>> {
        None
    }
}

/// Durable at every acknowledged FLUSH, no requests of its own.
pub struct Plain;

impl Rules for Plain {}

/// The seeded client of the trials: random writes (unique random content, whole and partial
/// blocks, some FUA), WRITE_ZEROES, TRIMs, reads checked against the model, and FLUSHes (or
/// `rules`' own requests) to volume "v", until the power fails: `OPS` requests, or more
/// while a cut is armed and still to come (at most `MAX_OPS`). Returns the model and the
/// requests completed, or what failed if a request failed before the power did.
pub fn client(
    e: &Engine,
    seed: u64,
    init: Vec<u8>,
    power: &Power,
    rules: &mut impl Rules,
) -> Result<(Model, usize), String> {
    let v = e.volume("v").unwrap();
    let mut r = rng(seed);
    let mut m = Model::new(init);
    let mut done = 0;
    for i in 0..MAX_OPS {
        if i >= OPS && !power.pending() {
            break;
        }
        let b = r.gen_range(0..BLOCKS);
        let nb = r.gen_range(1..=4u64).min(BLOCKS - b);
        let (off, len) = if r.gen_bool(0.8) {
            (b * BS, nb * BS)
        } else {
            let off = b * BS + r.gen_range(0..BS);
            (off, r.gen_range(1..=(nb * BS).min(VOL - off)))
        };
        let x = r.gen_range(0..100);
        let res = if x < 55 {
            let mut data = vec![0u8; len as usize];
            r.fill(&mut data[..]);
            let fua = r.gen_bool(0.05);
            let before = rules.durable();
            m.issue(off, data.clone());
            let res = v.write(off, &data, fua).map_err(|e| format!("write {off}+{len}: {e}"));
            if res.is_ok() {
                m.acked(fua && before && rules.durable());
            }
            res
        } else if x < 62 {
            let zero = vec![0u8; len as usize];
            m.issue(off, zero);
            let res = if x < 59 {
                v.write_zeroes(off, len, false, true)
                    .map_err(|e| format!("write_zeroes {off}+{len}: {e}"))
            } else {
                v.trim(off, len, false).map_err(|e| format!("trim {off}+{len}: {e}"))
            };
            if res.is_ok() {
                m.acked(false);
            }
            res
        } else if x < 85 {
            let mut got = vec![0u8; len as usize];
            let res = v.read(off, &mut got).map_err(|e| format!("read {off}+{len}: {e}"));
            if res.is_ok() {
                let want = &m.latest[off as usize..(off + len) as usize];
                assert!(got == want, "seed {seed}: a read returned other than the last write");
            }
            res
        } else if let Some(res) = rules.request(x, &mut m) {
            res
        } else {
            let before = rules.durable();
            let res = v.flush().map_err(|e| format!("flush: {e}"));
            // Acknowledged: the client may rely on it (unsafe write-back lies here).
            if res.is_ok() && before && rules.durable() {
                m.flushed();
            }
            res
        };
        if let Err(what) = res {
            if power.fired() {
                break; // the power failed: the client stops here
            }
            return Err(format!("request {i} failed before the power cut: {what}"));
        }
        done += 1;
    }
    Ok((m, done))
}
