//! SieveStore-C, continuous sieving by hysteresis-based lazy allocation (SieveStore section
//! 3.3): a block is allocated on its n-th miss within a recent window W, through a two-tier
//! sieve.
//!
//! - Tier 1, the *imprecise miss-count table* (IMCT): a fixed-size table indexed by a hash
//!   of the block key; many blocks share (alias) an entry. A miss increments the block's
//!   entry; when the entry's windowed count reaches `t1`, the block passes to tier 2.
//! - Tier 2, the exact *miss-count table* (MCT): a hash table keyed by the block itself. A
//!   block that passed the IMCT must see `t2` *additional* misses of its own within the
//!   window; the miss that brings its MCT count to `t2` is allocated. So an unaliased block is
//!   allocated on miss `t1 + t2` in the window, and an aliased IMCT entry alone never
//!   allocates (the MCT count starts at zero).
//!
//! Both tiers keep `k` sub-window counters and the last sub-window updated ([`super::window`]);
//! counts older than W are forgotten. The MCT is pruned of stale blocks every
//! `prune_interval_ns` of (trace) time. Paper defaults, tuned on the MSR-Cambridge traces:
//! t1 = 9, t2 = 4, W = 8 h, k = 4.

use super::config_error::SieveConfigError;
use super::key_hash::{key_map, KeyMap, FIB};
use super::window::{bump, is_stale, MAX_SUBWINDOWS};
use super::Admission;
use crate::Access;

/// One hour in nanoseconds.
const HOUR_NS: u64 = 3_600_000_000_000;

/// Parameters of [`SieveStoreC`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SieveStoreCConfig {
    /// IMCT threshold: misses (of any aliasing block) before a block reaches the MCT.
    pub t1: u32,
    /// MCT threshold: further misses of the block itself before it is allocated.
    pub t2: u32,
    /// The window W, in nanoseconds.
    pub window_ns: u64,
    /// Sub-windows per window (`k`).
    pub k: usize,
    /// IMCT entries (rounded up to a power of two).
    pub imct_entries: usize,
    /// How often (trace time) stale blocks are pruned from the MCT.
    pub prune_interval_ns: u64,
}

impl Default for SieveStoreCConfig {
    /// The paper's tuned parameters (t1 = 9, t2 = 4, W = 8 h, k = 4), an IMCT of 2^18 entries (2 MiB),
    /// and pruning once per window.
    fn default() -> Self {
        Self {
            t1: 9,
            t2: 4,
            window_ns: 8 * HOUR_NS,
            k: 4,
            imct_entries: 1 << 18,
            prune_interval_ns: 8 * HOUR_NS,
        }
    }
}

/// One MCT entry: the block's own sub-window miss counts.
#[derive(Clone, Copy, Debug)]
struct MctEntry {
    counts: [u8; MAX_SUBWINDOWS],
    last: u64,
}

/// Counters of what the sieve did, for reports and tests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SieveStoreCStats {
    /// Misses the sieve was asked about.
    pub misses: u64,
    /// Blocks that passed the IMCT into the MCT.
    pub imct_passes: u64,
    /// Blocks allocated.
    pub allocations: u64,
    /// MCT entries removed by pruning.
    pub pruned: u64,
    /// Largest number of MCT entries seen.
    pub peak_mct_entries: usize,
}

/// The SieveStore-C sieve (IMCT + MCT).
#[derive(Clone, Debug)]
pub struct SieveStoreC {
    cfg: SieveStoreCConfig,
    sub_ns: u64,
    imct_shift: u32,
    /// IMCT entries of `imct_stride` bytes: the last sub-window updated (u32, little endian,
    /// wrapping) then `k` one-byte counters, so one entry is one memory access.
    imct: Vec<u8>,
    imct_stride: usize,
    mct: KeyMap<MctEntry>,
    next_prune_ns: Option<u64>,
    stats: SieveStoreCStats,
}

impl SieveStoreC {
    /// A sieve with `cfg`; rejects thresholds outside 1..=255, `k` outside
    /// 1..=[`MAX_SUBWINDOWS`], a window shorter than `k` ns, or an empty IMCT.
    pub fn new(cfg: SieveStoreCConfig) -> Result<Self, SieveConfigError> {
        const NAME: &str = "sievestore-c";
        if !(1..=255).contains(&cfg.t1) {
            return Err(SieveConfigError::out_of_range(NAME, "t1", cfg.t1, "1..=255"));
        }
        if !(1..=255).contains(&cfg.t2) {
            return Err(SieveConfigError::out_of_range(NAME, "t2", cfg.t2, "1..=255"));
        }
        if !(1..=MAX_SUBWINDOWS).contains(&cfg.k) {
            return Err(SieveConfigError::out_of_range(NAME, "k", cfg.k, "1..=16"));
        }
        if cfg.window_ns < cfg.k as u64 {
            return Err(SieveConfigError::out_of_range(NAME, "window_ns", cfg.window_ns, ">= k"));
        }
        if cfg.imct_entries == 0 || cfg.imct_entries > 1 << 40 {
            return Err(SieveConfigError::out_of_range(
                NAME,
                "imct_entries",
                cfg.imct_entries,
                "1..=2^40",
            ));
        }
        let entries = cfg.imct_entries.next_power_of_two();
        let bits = entries.trailing_zeros();
        Ok(Self {
            cfg,
            sub_ns: cfg.window_ns / cfg.k as u64,
            imct_shift: 64 - bits,
            imct: vec![0; entries * (4 + cfg.k)],
            imct_stride: 4 + cfg.k,
            mct: key_map(),
            next_prune_ns: None,
            stats: SieveStoreCStats::default(),
        })
    }

    /// The sieve with the paper's parameters.
    pub fn paper() -> Self {
        // The defaults are valid by construction.
        match Self::new(SieveStoreCConfig::default()) {
            Ok(s) => s,
            Err(e) => unreachable!("paper defaults rejected: {e}"),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &SieveStoreCConfig {
        &self.cfg
    }

    /// What the sieve has done so far.
    pub fn stats(&self) -> SieveStoreCStats {
        self.stats
    }

    /// Blocks currently tracked exactly (MCT entries).
    pub fn mct_len(&self) -> usize {
        self.mct.len()
    }

    /// True if `key` currently has an MCT entry.
    pub fn in_mct(&self, key: u64) -> bool {
        self.mct.contains_key(&key)
    }

    /// The IMCT entry a block key maps to (blocks with equal indices alias).
    #[inline]
    pub fn imct_index(&self, key: u64) -> usize {
        if self.imct_shift >= 64 {
            0
        } else {
            (key.wrapping_mul(FIB) >> self.imct_shift) as usize
        }
    }

    fn prune(&mut self, time_ns: u64) {
        let now = time_ns / self.sub_ns;
        let k = self.cfg.k;
        let before = self.mct.len();
        self.mct.retain(|_, e| !is_stale(k, e.last, now));
        self.stats.pruned += (before - self.mct.len()) as u64;
    }
}

/// The full sub-window index of a stored (wrapped, 32-bit) `last`, given the current full
/// index `now`: the candidate nearest `now` (so a `last` up to 2^31 sub-windows behind or ahead
/// is recovered exactly; an entry never written reads as far in the past, i.e. stale).
#[inline]
fn widen(stored: u32, now: u64) -> u64 {
    let back = (now as u32).wrapping_sub(stored);
    if back <= u32::MAX / 2 {
        now.saturating_sub(back as u64)
    } else {
        now + (stored.wrapping_sub(now as u32)) as u64
    }
}

impl Admission for SieveStoreC {
    fn name(&self) -> &'static str {
        "sievestore-c"
    }

    #[inline]
    fn observe(&mut self, _access: &Access, _hit: bool) {}

    fn admit(&mut self, access: &Access) -> bool {
        let t = access.time_ns;
        match self.next_prune_ns {
            None => self.next_prune_ns = Some(t.saturating_add(self.cfg.prune_interval_ns)),
            Some(p) if t >= p => {
                self.prune(t);
                self.next_prune_ns = Some(t.saturating_add(self.cfg.prune_interval_ns));
            }
            Some(_) => {}
        }
        self.stats.misses += 1;
        let now = t / self.sub_ns;
        let k = self.cfg.k;
        if let Some(e) = self.mct.get_mut(&access.key) {
            if !is_stale(k, e.last, now) {
                let n = bump(&mut e.counts[..k], &mut e.last, now);
                if n >= self.cfg.t2 {
                    self.mct.remove(&access.key);
                    self.stats.allocations += 1;
                    return true;
                }
                return false;
            }
            // Every MCT count is older than W: the block must pass the IMCT again.
            self.mct.remove(&access.key);
        }
        let slot = self.imct_index(access.key);
        let e = &mut self.imct[slot * self.imct_stride..(slot + 1) * self.imct_stride];
        let (last_bytes, counts) = e.split_at_mut(4);
        let stored =
            u32::from_le_bytes([last_bytes[0], last_bytes[1], last_bytes[2], last_bytes[3]]);
        let mut last = widen(stored, now);
        let n = bump(counts, &mut last, now);
        last_bytes.copy_from_slice(&(last as u32).to_le_bytes());
        if n >= self.cfg.t1 {
            self.mct.insert(access.key, MctEntry { counts: [0; MAX_SUBWINDOWS], last: now });
            self.stats.imct_passes += 1;
            self.stats.peak_mct_entries = self.stats.peak_mct_entries.max(self.mct.len());
        }
        false
    }

    /// Start loading the IMCT entry of `access.key` (a CPU prefetch; no state changes).
    #[inline]
    fn prefetch(&self, access: &Access) {
        let i = self.imct_index(access.key) * self.imct_stride;
        if let Some(b) = self.imct.get(i) {
            crate::prefetch::prefetch(b);
        }
    }

    /// IMCT (k one-byte counters and a 4-byte sub-window stamp per entry) plus the MCT's table
    /// (key, entry and one control byte per bucket of its capacity).
    fn memory_bytes(&self) -> usize {
        let imct = self.imct.len();
        let bucket = std::mem::size_of::<u64>() + std::mem::size_of::<MctEntry>() + 1;
        imct + self.mct.capacity() * bucket
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const H: u64 = HOUR_NS;

    fn miss(s: &mut SieveStoreC, key: u64, time_ns: u64) -> bool {
        let a = Access { key, time_ns, op: ember_trace::Op::Read, vtime: 0, next_vtime: 0 };
        s.observe(&a, false);
        s.admit(&a)
    }

    /// SieveStore section 3.3: with t1 = 9, t2 = 4 an unaliased block is allocated on exactly
    /// its 13th miss inside the window, not the 12th.
    #[test]
    fn allocates_on_exactly_the_t1_plus_t2_th_miss() {
        let mut s = SieveStoreC::paper();
        let t0 = 1_000 * H;
        for i in 1..=12u64 {
            assert!(!miss(&mut s, 42, t0 + i * 60_000_000_000), "miss {i} must not allocate");
            assert_eq!(s.in_mct(42), i >= 9, "the 9th miss passes the IMCT (miss {i})");
        }
        assert!(miss(&mut s, 42, t0 + 13 * 60_000_000_000), "the 13th miss allocates");
        assert!(!s.in_mct(42), "an allocated block leaves the MCT");
        assert_eq!(s.stats().allocations, 1);
    }

    /// SieveStore section 3.3: counts older than W (8 h, four 2-hour sub-windows) are
    /// forgotten, so 12 misses spread thinly over two windows never allocate.
    #[test]
    fn forgets_counts_older_than_the_window() {
        let mut s = SieveStoreC::paper();
        let t0 = 1_000 * 8 * H; // aligned to a sub-window boundary
                                // 8 misses early in the window, then 5 more after more than W has passed.
        for i in 0..8 {
            assert!(!miss(&mut s, 7, t0 + i * 60_000_000_000));
        }
        for i in 0..5 {
            assert!(!miss(&mut s, 7, t0 + 9 * H + i * 60_000_000_000), "stale counts revived");
        }
        assert!(!s.in_mct(7), "5 fresh misses are below t1 = 9");
        // The same 13 misses inside one window do allocate.
        let mut s = SieveStoreC::paper();
        let hits: Vec<bool> =
            (0..13).map(|i| miss(&mut s, 7, t0 + i * 30 * 60_000_000_000)).collect();
        assert_eq!(hits.iter().filter(|&&b| b).count(), 1);
        assert!(hits[12], "13 misses within 6.5 h < W allocate on the last");
    }

    /// Sub-window granularity: a count made in sub-window s is forgotten at sub-window s + k.
    #[test]
    fn mct_counts_expire_and_the_block_must_requalify() {
        let cfg = SieveStoreCConfig { t1: 2, t2: 2, ..SieveStoreCConfig::default() };
        let mut s = SieveStoreC::new(cfg).unwrap();
        let t0 = 5_000 * 2 * H;
        assert!(!miss(&mut s, 1, t0));
        assert!(!miss(&mut s, 1, t0 + 1));
        assert!(s.in_mct(1));
        assert!(!miss(&mut s, 1, t0 + 2)); // MCT count 1
                                           // 8 h later the MCT count is stale: the block goes back through the IMCT (whose count
                                           // is stale too), so this miss only counts 1 in the IMCT.
        assert!(!miss(&mut s, 1, t0 + 8 * H));
        assert!(!s.in_mct(1));
    }

    /// SieveStore section 3.3: an aliased IMCT entry alone never allocates. With a one-entry
    /// IMCT every block aliases; a block whose first miss finds the entry already past t1
    /// still needs t2 misses of its own.
    #[test]
    fn an_aliased_imct_entry_alone_never_allocates() {
        let cfg = SieveStoreCConfig { imct_entries: 1, ..SieveStoreCConfig::default() };
        let mut s = SieveStoreC::new(cfg).unwrap();
        assert_eq!(s.imct_index(1), s.imct_index(999));
        let t = 3_000 * H;
        // Nine distinct blocks, one miss each, saturate the shared entry.
        for key in 100..109 {
            assert!(!miss(&mut s, key, t));
        }
        // A hundred more distinct blocks, each missing once: each passes the aliased IMCT but
        // none is allocated.
        for key in 1_000..1_100 {
            assert!(!miss(&mut s, key, t + 1), "block {key} allocated on an aliased count");
            assert!(s.in_mct(key));
        }
        // Block 1000 itself needs t2 = 4 own misses: allocated on the 4th further miss.
        assert!(!miss(&mut s, 1_000, t + 2));
        assert!(!miss(&mut s, 1_000, t + 3));
        assert!(!miss(&mut s, 1_000, t + 4));
        assert!(miss(&mut s, 1_000, t + 5));
        assert_eq!(s.stats().allocations, 1);
    }

    #[test]
    fn pruning_removes_stale_mct_entries_and_memory_is_reported() {
        let cfg = SieveStoreCConfig { t1: 1, imct_entries: 1024, ..SieveStoreCConfig::default() };
        let mut s = SieveStoreC::new(cfg).unwrap();
        let t = 10_000 * H;
        for key in 0..50 {
            miss(&mut s, key, t);
        }
        assert_eq!(s.mct_len(), 50);
        let mem = s.memory_bytes();
        assert!(mem >= 1024 * (4 + 4) + 50 * 24, "memory {mem} too small");
        // One prune interval (8 h) later the first miss triggers pruning of all 50.
        miss(&mut s, 9_999, t + 8 * H);
        assert_eq!(s.stats().pruned, 50);
        assert_eq!(s.mct_len(), 1);
    }

    #[test]
    fn widen_recovers_the_full_subwindow() {
        assert_eq!(widen(5, 7), 5);
        assert_eq!(widen(9, 7), 9, "a little ahead (out-of-order time)");
        let now = (3u64 << 32) + 2;
        assert_eq!(widen(u32::MAX, now), now - 3, "across a 2^32 wrap");
        assert_eq!(widen(0, 1_000_000), 0);
    }

    #[test]
    fn rejects_bad_parameters() {
        let bad = |c: SieveStoreCConfig| SieveStoreC::new(c).is_err();
        let d = SieveStoreCConfig::default();
        assert!(bad(SieveStoreCConfig { t1: 0, ..d }));
        assert!(bad(SieveStoreCConfig { t2: 256, ..d }));
        assert!(bad(SieveStoreCConfig { k: 17, ..d }));
        assert!(bad(SieveStoreCConfig { imct_entries: 0, ..d }));
        assert!(!bad(d));
    }
}
