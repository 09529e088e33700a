//! Upgrading a version-1 cache to version 2 in place, at its first open for service. No data
//! moves: version 2 adds the volume records, which take the tail of the journal region
//! (`volume_records::records_len_for`; none when the journal is too small to spare them),
//! and fields in bytes of the superblock version 1 left zero.
//!
//! The caller MUST upgrade only once the journal holds nothing live (after open's own
//! superblock write, which under write-back persist writes a fresh checkpoint and so restarts
//! the journal at its first block), and MUST NOT let the journal reach the records area
//! before: it runs with the upgraded geometry from the start. Then the upgrade is two steps,
//! each synced: the records' first copy, then one superblock (sequence + 1) of version 2. A
//! crash before that superblock is durable leaves a readable version 1 (its journal tail
//! holds bytes no journal block starts with, past the first invalid block replay stops at),
//! and the next open upgrades again; after it, version 2.

use super::{Geometry, LayoutError, Superblock, VERSION};
use crate::device::Device;

/// `g` (a version-1 geometry) with the volume records' area at its journal's tail.
pub fn upgraded_geometry(g: &Geometry) -> Geometry {
    let mut up = *g;
    up.records_len = super::volume_records::records_len_for(g.block_size, g.journal_len);
    up
}

impl Superblock {
    /// Make this version-1 superblock version 2: its geometry gains the records area and the
    /// volumes' records are written to their first copy (synced). The caller then writes the
    /// superblock with the next sequence number: that write is the upgrade's commit point.
    pub fn upgrade(&mut self, dev: &dyn Device) -> Result<(), LayoutError> {
        if self.version != 1 {
            return Err(LayoutError::Invalid(format!(
                "layout version {} is not upgraded (only version 1 is)",
                self.version
            )));
        }
        self.version = VERSION;
        self.geometry = upgraded_geometry(&self.geometry);
        self.records = Default::default();
        self.write_records(dev)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::MemDevice;
    use crate::layout::superblock::FLAG_CLEAN;
    use crate::layout::{BackingRecord, VolumeRecord, VolumeState, WriteMode};
    use uuid::Uuid;

    fn v1(dev: &MemDevice) -> Superblock {
        let geometry = Geometry::compute(dev.size(), 4096, 1 << 20, 0).unwrap().without_records();
        let vol = VolumeRecord {
            name: "vol".into(),
            uuid: Uuid::new_v4(),
            size: 1 << 20,
            fingerprint: 0,
            backing_medium: 0,
            backing_state: 0,
            state: VolumeState::Cached,
            recorded: BackingRecord::default(),
        };
        Superblock {
            version: 1,
            sequence: 4,
            cache_uuid: Uuid::new_v4(),
            device_size: dev.size(),
            flags: FLAG_CLEAN,
            write_mode: WriteMode::WriteThrough,
            live_mode: None,
            draining: None,
            format_time: 1,
            last_shutdown: 2,
            open_count: 1,
            geometry,
            checkpoint_slot: 0,
            checkpoint_generation: 1,
            checkpoint_entries: 0,
            checkpoint_crc: 0,
            volumes: vec![vol],
            records: Default::default(),
        }
    }

    /// Version 1 reads as version 1 (no records, the whole journal region is journal); the
    /// records written before the upgrade's superblock leave version 1 in force; the
    /// superblock makes it version 2, with the records read back and the journal shorter by
    /// exactly the records' area, every other region where it was.
    #[test]
    fn an_upgrade_keeps_every_region_and_commits_with_one_superblock() {
        let dev = MemDevice::new(8 << 20);
        let sb = v1(&dev);
        sb.write(&dev).unwrap();
        let read = Superblock::read(&dev).unwrap();
        assert_eq!((read.version, read.geometry.records_len), (1, 0));
        let mut up = read.clone();
        up.volumes[0].recorded =
            BackingRecord { backing: "/dev/sdb".into(), settings: "min-share = \"10%\"".into() };
        up.upgrade(&dev).unwrap();
        // Crash here: version 1 still in force, unchanged.
        assert_eq!(Superblock::read(&dev).unwrap(), read);
        up.sequence += 1;
        up.write(&dev).unwrap();
        let now = Superblock::read(&dev).unwrap();
        assert_eq!(now.version, 2);
        assert_eq!(now.volumes[0].recorded.backing, "/dev/sdb");
        let (g1, g2) = (read.geometry, now.geometry);
        assert_eq!(g2.records_len, 128 << 10);
        assert_eq!(g2.journal_bytes(), g1.journal_len - (128 << 10));
        assert_eq!(g2.without_records(), g1, "no region moved");
        assert!(now.clone().upgrade(&dev).is_err(), "version 2 is not upgraded again");
    }

    /// A change of the records goes to the other copy; until the superblock names it, the
    /// former copy is read.
    #[test]
    fn records_alternate_copies_and_the_superblock_decides() {
        let dev = MemDevice::new(8 << 20);
        let mut sb = v1(&dev);
        sb.upgrade(&dev).unwrap();
        sb.sequence += 1;
        sb.write(&dev).unwrap();
        let mut next = Superblock::read(&dev).unwrap();
        next.volumes[0].recorded.backing = "nbd://h/x".into();
        next.write_records(&dev).unwrap();
        assert_ne!(next.records.copy, sb.records.copy);
        assert_eq!(Superblock::read(&dev).unwrap().volumes[0].recorded.backing, "");
        next.sequence += 1;
        next.write(&dev).unwrap();
        assert_eq!(Superblock::read(&dev).unwrap().volumes[0].recorded.backing, "nbd://h/x");
        // A damaged copy in force is a clear error, never an empty record.
        let off = next.geometry.records_offset() + u64::from(next.records.copy) * (64 << 10);
        dev.write_at(off + 30, &[0xEE]).unwrap();
        let e = Superblock::read(&dev).unwrap_err().to_string();
        assert!(e.contains("volume records") && e.contains("checksum"), "{e}");
    }
}
