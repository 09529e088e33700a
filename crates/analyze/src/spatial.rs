//! Spatial clustering of reaccesses (Bonfire section 3.3, Figure 4).
//!
//! For each reaccess class, look at every region (1 MiB by default) holding at least one
//! block with a reaccess of that class, take the fraction of the region's blocks (4 KiB by
//! default) that have such a reaccess, and average it over those regions.

use crate::temporal::{BlockClasses, Class};
use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};

/// Figure 4 for one trace or volume.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Spatial {
    /// Region size in bytes.
    pub region_bytes: u64,
    /// Blocks per region.
    pub blocks_per_region: u64,
    /// Regions holding a reaccess of each class (hourly, daily, other).
    pub regions: [u64; 3],
    /// Mean percentage of a region's blocks reaccessed in each class, over those regions.
    pub mean_percent: [f64; 3],
}

impl Spatial {
    /// Figure 4 from the class masks of [`crate::Temporal::compute`], with `block_size`-byte
    /// blocks in `region_bytes`-byte regions (at least one block per region).
    pub fn of(classes: &BlockClasses, block_size: u64, region_bytes: u64) -> Self {
        let bpr = (region_bytes / block_size.max(1)).max(1);
        let mut per_region: FxHashMap<u64, [u32; 3]> = FxHashMap::default();
        for (&key, &mask) in classes {
            // Regions never straddle volumes: the volume sits in the key's high bits and the
            // block number is divided within it.
            let region = (key >> 48, (key & ((1 << 48) - 1)) / bpr);
            let e = per_region.entry(region.0 << 48 | region.1).or_insert([0; 3]);
            for c in Class::ALL {
                e[c as usize] += (mask & c.bit() != 0) as u32;
            }
        }
        let mut s = Spatial { region_bytes, blocks_per_region: bpr, ..Default::default() };
        let mut sums = [0f64; 3];
        for counts in per_region.values() {
            for c in 0..3 {
                if counts[c] > 0 {
                    s.regions[c] += 1;
                    sums[c] += counts[c] as f64 / bpr as f64;
                }
            }
        }
        for ((m, &sum), &n) in s.mean_percent.iter_mut().zip(&sums).zip(&s.regions) {
            if n > 0 {
                *m = 100.0 * sum / n as f64;
            }
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bonfire_figure4_mean_fraction_per_region() {
        let mut c = BlockClasses::default();
        // Region 0 (blocks 0..256): 128 daily blocks. Region 1: 64 daily blocks, 1 hourly.
        for b in 0..128 {
            c.insert(b, Class::Daily.bit());
        }
        for b in 256..320 {
            c.insert(b, Class::Daily.bit());
        }
        c.insert(400, Class::Hourly.bit() | Class::Other.bit());
        let s = Spatial::of(&c, 4096, 1 << 20);
        assert_eq!(s.blocks_per_region, 256);
        assert_eq!(s.regions, [1, 2, 1]);
        // Daily: (50 % + 25 %) / 2; hourly and other: 1 / 256.
        assert!((s.mean_percent[1] - 37.5).abs() < 1e-9);
        assert!((s.mean_percent[0] - 100.0 / 256.0).abs() < 1e-9);
        assert_eq!(s.mean_percent[0], s.mean_percent[2]);
    }
}
