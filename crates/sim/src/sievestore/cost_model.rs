//! The SSD cost model of SieveStore sections 4 and 5.2: *drive IOPS occupancy* per minute and
//! the number of drives needed to cover a fraction of the minutes.
//!
//! "We assume that each 4KB read I/O occupies the drive for 1/35000th of a second ... and each
//! 4KB write I/O occupies the drive for 1/3300th of a second ... The number of drives needed
//! each minute is computed as the ceiling of the drive occupancy of all requests for that
//! minute." A block larger than the device's unit costs one I/O per unit (rounded up); a
//! smaller one costs a whole unit, as the paper conservatively assessed sub-4KB I/Os.

use std::str::FromStr;

/// An SSD's random-I/O capability.
#[derive(Clone, Debug, PartialEq)]
pub struct DeviceModel {
    /// A label for tables and plots.
    pub name: String,
    /// Random-read I/Os per second of `unit_bytes` each.
    pub read_iops: f64,
    /// Random-write I/Os per second of `unit_bytes` each.
    pub write_iops: f64,
    /// The I/O unit the IOPS figures are quoted for, in bytes.
    pub unit_bytes: u64,
}

impl Default for DeviceModel {
    fn default() -> Self {
        Self::x25e()
    }
}

impl DeviceModel {
    /// Intel's X25-E Extreme SATA SSD, the paper's drive: 35,000 random-read and 3,300
    /// random-write IOPS in 4 KiB units.
    pub fn x25e() -> Self {
        Self { name: "x25e".into(), read_iops: 35_000.0, write_iops: 3_300.0, unit_bytes: 4096 }
    }

    /// Device I/Os one cache block costs.
    pub fn units_per_block(&self, block_size: u64) -> u64 {
        block_size.div_ceil(self.unit_bytes).max(1)
    }

    /// Drive IOPS occupancy of one minute with `read_blocks` SSD block reads and
    /// `write_blocks` SSD block writes (1.0 = one drive fully busy for the minute).
    pub fn occupancy(&self, read_blocks: u64, write_blocks: u64, block_size: u64) -> f64 {
        let u = self.units_per_block(block_size) as f64;
        (read_blocks as f64 * u / self.read_iops + write_blocks as f64 * u / self.write_iops) / 60.0
    }
}

impl FromStr for DeviceModel {
    type Err = String;

    /// `x25e`, or `NAME:READ_IOPS:WRITE_IOPS[:UNIT_BYTES]` (unit default 4096), e.g.
    /// `nvme:500000:100000`.
    fn from_str(s: &str) -> Result<Self, String> {
        if s.eq_ignore_ascii_case("x25e") {
            return Ok(Self::x25e());
        }
        let parts: Vec<&str> = s.split(':').collect();
        if !(3..=4).contains(&parts.len()) {
            return Err(format!(
                "device model `{s}`: expected `x25e` or NAME:READ_IOPS:WRITE_IOPS[:UNIT_BYTES]"
            ));
        }
        let num = |what: &str, v: &str| -> Result<f64, String> {
            match v.parse::<f64>() {
                Ok(x) if x > 0.0 && x.is_finite() => Ok(x),
                _ => Err(format!("device model `{s}`: {what} `{v}` is not a positive number")),
            }
        };
        let unit_bytes = match parts.get(3) {
            Some(u) => match u.parse::<u64>() {
                Ok(x) if x > 0 => x,
                _ => {
                    return Err(format!("device model `{s}`: unit `{u}` is not a positive integer"))
                }
            },
            None => 4096,
        };
        Ok(Self {
            name: parts[0].to_string(),
            read_iops: num("read IOPS", parts[1])?,
            write_iops: num("write IOPS", parts[2])?,
            unit_bytes,
        })
    }
}

/// SSD operations in one minute (SieveStore section 5.1's three kinds).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct MinuteOps {
    /// Read hits (SSD reads).
    pub read_hits: u64,
    /// Write hits (SSD writes).
    pub write_hits: u64,
    /// Allocation-writes (SSD writes).
    pub allocation_writes: u64,
}

/// Drive IOPS occupancy of each minute.
pub fn occupancy_per_minute(
    minutes: &[MinuteOps],
    model: &DeviceModel,
    block_size: u64,
) -> Vec<f64> {
    minutes
        .iter()
        .map(|m| model.occupancy(m.read_hits, m.write_hits + m.allocation_writes, block_size))
        .collect()
}

/// Drives needed so that `coverage` (0..=1) of the minutes are served: the `coverage`
/// quantile of the per-minute ceilings of occupancy, at least one drive (a cache has one).
pub fn drives_needed(occupancy: &[f64], coverage: f64) -> u32 {
    if occupancy.is_empty() {
        return 1;
    }
    let mut drives: Vec<u32> = occupancy.iter().map(|&o| o.ceil().max(0.0) as u32).collect();
    drives.sort_unstable();
    let n = drives.len();
    let idx = ((coverage.clamp(0.0, 1.0) * n as f64).ceil() as usize).clamp(1, n) - 1;
    drives[idx].max(1)
}

/// The coverages SieveStore section 5.2 reports: 100 %, 99.9 % and 90 % of the minutes.
pub const PAPER_COVERAGES: [f64; 3] = [1.0, 0.999, 0.9];

#[cfg(test)]
mod tests {
    use super::*;

    /// SieveStore section 4: one minute of 35,000 x 60 reads is exactly one X25-E.
    #[test]
    fn x25e_occupancy_matches_the_papers_rates() {
        let m = DeviceModel::x25e();
        assert!((m.occupancy(35_000 * 60, 0, 4096) - 1.0).abs() < 1e-12);
        assert!((m.occupancy(0, 3_300 * 60, 4096) - 1.0).abs() < 1e-12);
        assert!((m.occupancy(35_000 * 30, 3_300 * 30, 4096) - 1.0).abs() < 1e-12);
        // An 8 KiB block costs two 4 KiB units; a 512-byte block one.
        assert!((m.occupancy(0, 3_300 * 30, 8192) - 1.0).abs() < 1e-12);
        assert_eq!(m.units_per_block(512), 1);
    }

    #[test]
    fn drives_cover_the_requested_fraction_of_minutes() {
        // 1000 minutes: 990 at 0.5, 9 at 1.5, 1 at 3.2.
        let mut occ = vec![0.5; 990];
        occ.extend([1.5; 9]);
        occ.push(3.2);
        assert_eq!(drives_needed(&occ, 1.0), 4);
        assert_eq!(drives_needed(&occ, 0.999), 2);
        assert_eq!(drives_needed(&occ, 0.99), 1);
        assert_eq!(drives_needed(&[0.0, 0.0], 1.0), 1);
    }

    #[test]
    fn parses_device_models() {
        assert_eq!("x25e".parse::<DeviceModel>().unwrap(), DeviceModel::x25e());
        let m: DeviceModel = "nvme:500000:100000:4096".parse().unwrap();
        assert_eq!(m.read_iops, 500_000.0);
        assert!("nvme:0:1".parse::<DeviceModel>().is_err());
        assert!("nvme:1".parse::<DeviceModel>().is_err());
    }
}
