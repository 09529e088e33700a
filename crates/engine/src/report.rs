//! `ember cache inspect`: what a cache device holds, read without opening it for service.

use crate::layout::{Geometry, WriteMode};
use serde::Serialize;
use std::fmt;
use uuid::Uuid;

/// How full the cache is, known from the checkpoint of a clean shutdown.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Occupancy {
    /// Cache blocks in the data region.
    pub capacity_blocks: u64,
    /// Cache blocks holding data.
    pub resident_blocks: u64,
    /// Of those, blocks newer than backing (always 0 under write-through and write-around).
    pub dirty_blocks: u64,
}

/// One volume's use of the cache.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct VolumeUsage {
    /// Export name.
    pub name: String,
    /// Identity assigned at format time.
    pub uuid: Uuid,
    /// Size in bytes.
    pub size: u64,
    /// Cached blocks of this volume (None when the last shutdown was not clean).
    pub cached_blocks: Option<u64>,
    /// What the cache does with it (cached, uncached, removing).
    pub state: crate::layout::VolumeState,
    /// Its backing as recorded (layout version 2's volume records; empty: none).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub backing: String,
    /// Its own settings as recorded (empty: none).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub settings: String,
}

/// The inspection report.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// The device inspected.
    pub device: String,
    /// Layout version.
    pub version: u32,
    /// Identity of the cache device.
    pub cache_uuid: Uuid,
    /// Device size at format time.
    pub device_size: u64,
    /// Regions.
    pub geometry: Geometry,
    /// The write policy the cache last ran under.
    pub write_mode: WriteMode,
    /// True if the last shutdown was clean (the next start is warm).
    pub clean_shutdown: bool,
    /// Time of the last clean shutdown, Unix seconds.
    pub last_shutdown: Option<u64>,
    /// Format time, Unix seconds.
    pub format_time: u64,
    /// Times opened for service.
    pub open_count: u64,
    /// Superblock sequence number.
    pub sequence: u64,
    /// Generation of the current checkpoint.
    pub checkpoint_generation: u64,
    /// Generation of the last committed barrier (the last journal commit replayed over the
    /// checkpoint; = `checkpoint_generation` without one).
    pub last_generation: u64,
    /// Journal commits past the checkpoint (write-back persist after a crash or while
    /// running).
    pub journal_commits: u64,
    /// Dirty blocks per epoch in the persisted dirty map, oldest epoch first:
    /// (epoch, blocks). These reach backing when the cache is next opened.
    pub dirty_epochs: Vec<(u64, u64)>,
    /// Occupancy, when known.
    pub occupancy: Option<Occupancy>,
    /// Why occupancy is unknown, or how the checkpoint was found.
    pub note: String,
    /// The volumes.
    pub volumes: Vec<VolumeUsage>,
}

/// Unix seconds as `YYYY-MM-DD HH:MM:SS UTC` (Howard Hinnant's civil-from-days).
pub fn format_unix(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02} UTC", rem / 3600, rem % 3600 / 60, rem % 60)
}

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1u64 << 20) as f64)
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let g = &self.geometry;
        let bs = g.block_size as u64;
        writeln!(f, "cache device   {}", self.device)?;
        writeln!(f, "uuid           {}", self.cache_uuid)?;
        writeln!(
            f,
            "layout         version {}, superblock sequence {}",
            self.version, self.sequence
        )?;
        writeln!(f, "size           {} ({} bytes)", mib(self.device_size), self.device_size)?;
        writeln!(f, "block size     {} bytes", g.block_size)?;
        writeln!(
            f,
            "regions        checkpoints 2 x {}, journal {} (volume records {}), warmup log {}, \
             data {} blocks ({}) at {}",
            mib(g.checkpoint_len),
            mib(g.journal_len),
            mib(g.records_len),
            mib(g.warmup_len),
            g.data_blocks,
            mib(g.data_blocks * bs),
            g.data_offset
        )?;
        writeln!(f, "write policy   {}", self.write_mode.name())?;
        writeln!(f, "formatted      {}", format_unix(self.format_time))?;
        writeln!(f, "opened         {} times", self.open_count)?;
        let last = match (self.clean_shutdown, self.last_shutdown) {
            (true, Some(t)) => format!("clean at {}", format_unix(t)),
            (true, None) => "never opened since format".to_string(),
            (false, _) => "NOT clean (running now, or crashed): the next start is cold".to_string(),
        };
        writeln!(f, "last shutdown  {last}")?;
        match &self.occupancy {
            Some(o) => writeln!(
                f,
                "occupancy      {} of {} blocks ({:.1} %), {} dirty",
                o.resident_blocks,
                o.capacity_blocks,
                100.0 * o.resident_blocks as f64 / o.capacity_blocks.max(1) as f64,
                o.dirty_blocks
            )?,
            None => writeln!(f, "occupancy      unknown ({})", self.note)?,
        }
        writeln!(
            f,
            "generations    checkpoint {}, last commit {} ({} journal commits past the checkpoint)",
            self.checkpoint_generation, self.last_generation, self.journal_commits
        )?;
        if self.dirty_epochs.is_empty() {
            writeln!(f, "dirty blocks   none persisted")?;
        } else {
            let total: u64 = self.dirty_epochs.iter().map(|e| e.1).sum();
            let per: Vec<String> =
                self.dirty_epochs.iter().map(|(e, n)| format!("epoch {e}: {n}")).collect();
            writeln!(f, "dirty blocks   {total} ({})", per.join(", "))?;
        }
        writeln!(f, "volumes        {}", self.volumes.len())?;
        writeln!(f, "  {:<24} {:>14} {:>14}  uuid", "name", "size", "cached blocks")?;
        for v in &self.volumes {
            let cached = v.cached_blocks.map_or("-".to_string(), |n| n.to_string());
            writeln!(f, "  {:<24} {:>14} {:>14}  {}", v.name, mib(v.size), cached, v.uuid)?;
            if v.state != crate::layout::VolumeState::Cached {
                writeln!(f, "    state      {}", v.state)?;
            }
            if !v.backing.is_empty() {
                writeln!(f, "    backing    {}", v.backing)?;
            }
            for line in v.settings.lines() {
                writeln!(f, "    setting    {line}")?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unix_times_format_as_utc_dates() {
        assert_eq!(format_unix(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(format_unix(951_782_400), "2000-02-29 00:00:00 UTC");
        assert_eq!(format_unix(1_700_000_000), "2023-11-14 22:13:20 UTC");
    }
}
