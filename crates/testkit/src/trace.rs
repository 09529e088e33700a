//! Trace builders: a small seeded generator, CSV traces for `ember replay`, MSR-Cambridge CSV
//! rows for the laboratory, clients that share blocks with a lag, and an FNV-1a digest to pin a file's bytes.

use std::io::Write;
use std::path::{Path, PathBuf};

/// A small deterministic generator (xorshift64*), so traces need no extra crate.
pub struct Rng(u64);

impl Rng {
    /// A generator seeded with `seed` (0 is taken as 1).
    pub fn new(seed: u64) -> Rng {
        Rng(seed.max(1))
    }

    /// The next 64 bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number below `n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    /// Shuffle `v` in place (Fisher-Yates).
    pub fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            let j = self.below(i as u64 + 1) as usize;
            v.swap(i, j);
        }
    }
}

/// One trace request: (volume, is_write, offset, length).
pub type Req = (String, bool, u64, u32);

/// Write `reqs` as a CSV trace (`time_ns,volume,op,offset,size`, 1 ms apart) for
/// `ember replay --format csv`.
pub fn write_csv_trace(path: &Path, reqs: &[Req]) {
    let text: String = reqs
        .iter()
        .enumerate()
        .map(|(i, (v, w, off, len))| {
            let op = if *w { "w" } else { "r" };
            format!("{},{v},{op},{off},{len}\n", i as u64 * 1_000_000)
        })
        .collect();
    write_text(path, &text);
}

/// Reads of `blocks` distinct 4 KiB blocks (of a volume of `volume_blocks`), in random order.
pub fn random_block_reads(volume: &str, blocks: u64, volume_blocks: u64, seed: u64) -> Vec<Req> {
    let mut rng = Rng::new(seed);
    let mut all: Vec<u64> = (0..volume_blocks).collect();
    rng.shuffle(&mut all);
    all.truncate(blocks as usize);
    all.into_iter().map(|b| (volume.to_string(), false, b * 4096, 4096)).collect()
}

/// Windows FILETIME (100 ns ticks) of an arbitrary second in 2008: the first time stamp of
/// the MSR-Cambridge traces the tests write.
pub const MSR_T0: u64 = 128_166_372_000_000_000;

/// One request of an MSR-Cambridge CSV trace: (FILETIME, is_write, offset, size).
pub type MsrRow = (u64, bool, u64, u64);

/// Write `rows` as an MSR-Cambridge CSV trace of volume `hm_0` at `dir/hm_0.csv` (host `hm`,
/// disk 0, response time 100); its path.
pub fn write_msr_trace(dir: &Path, rows: &[MsrRow]) -> PathBuf {
    let text: String = rows
        .iter()
        .map(|(t, w, off, len)| {
            let op = if *w { "Write" } else { "Read" };
            format!("{t},hm,0,{op},{off},{len},100\n")
        })
        .collect();
    let path = dir.join("hm_0.csv");
    write_text(&path, &text);
    path
}

/// The blocks `n` clients read when each alternates between a shared stream and a private one
/// (Wong & Wilkes, section 5.1: a READ for block X by one client "followed by several READS
/// for other blocks before a second READ for X by another client"). At an even step `t`
/// client `k` reads `base[t + (n - 1 - k) * lag]`, the shared stream `lag` requests behind the
/// client before it (client 0 leads); at an odd step a private block of the same popularity,
/// decorrelated in time, in client `k`'s own region of `w` blocks above the shared one.
/// `len` steps of `n` requests, in order: (client, block). `base` holds at least
/// `len + n * lag` blocks below `w`.
pub fn lagged_blocks(base: &[u64], n: usize, w: u64, lag: usize, len: usize) -> Vec<(usize, u64)> {
    let mut out = Vec::with_capacity(len * n);
    for t in 0..len {
        for k in 0..n {
            let block = if t % 2 == 0 {
                base[t + (n - 1 - k) * lag]
            } else {
                base[(t * 7919 + k * 104_729) % len] + (k as u64 + 1) * w
            };
            out.push((k, block));
        }
    }
    out
}

/// FNV-1a over bytes.
pub fn fnv(bytes: &[u8]) -> u64 {
    bytes
        .iter()
        .fold(0xcbf2_9ce4_8422_2325u64, |h, &b| (h ^ b as u64).wrapping_mul(0x0100_0000_01b3))
}

fn write_text(path: &Path, text: &str) {
    let mut f =
        std::fs::File::create(path).unwrap_or_else(|e| panic!("creating {}: {e}", path.display()));
    f.write_all(text.as_bytes()).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
}
