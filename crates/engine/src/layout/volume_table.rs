//! Placing a volume in the superblock's table: the first free slot, else a new one at the
//! end (at most [`MAX_VOLUMES`]). A slot is free only once no block key of its former volume
//! is left anywhere on the device (`live/volumes.rs` frees it), so a new volume in it never
//! meets an older volume's blocks.

use super::superblock::{Superblock, VolumeRecord};
use super::volume_state::VolumeState;
use super::{LayoutError, MAX_NAME, MAX_VOLUMES};
use uuid::Uuid;

impl Superblock {
    /// The slot of the volume named `name` that is in use, if any.
    pub fn slot_of(&self, name: &str) -> Option<u32> {
        self.volumes.iter().position(|r| r.in_use() && r.name == name).map(|i| i as u32)
    }

    /// Record a new volume `name` of `size` bytes, cached and with no fingerprint, in the
    /// first free slot (or a new one); returns its slot. Refuses a name in use, a name
    /// that does not fit, an empty volume and a full table. Changes only this copy: the
    /// caller writes the superblock.
    pub fn place_volume(&mut self, name: &str, size: u64) -> Result<u32, LayoutError> {
        if name.is_empty() || name.len() > MAX_NAME {
            return Err(LayoutError::Invalid(format!(
                "volume name {name:?} must have 1 to {MAX_NAME} bytes"
            )));
        }
        if self.slot_of(name).is_some() {
            return Err(LayoutError::Invalid(format!("volume {name:?} is already recorded")));
        }
        if size == 0 {
            return Err(LayoutError::Invalid(format!("volume {name:?}: the backing is empty")));
        }
        let rec = VolumeRecord {
            name: name.to_string(),
            uuid: Uuid::new_v4(),
            size,
            fingerprint: 0,
            backing_medium: 0,
            backing_state: 0,
            state: VolumeState::Cached,
            recorded: Default::default(),
        };
        if let Some(i) = self.volumes.iter().position(|r| !r.in_use()) {
            self.volumes[i] = rec;
            return Ok(i as u32);
        }
        if self.volumes.len() >= MAX_VOLUMES {
            return Err(LayoutError::Invalid(format!(
                "the volume table is full ({MAX_VOLUMES} volumes): remove one first"
            )));
        }
        self.volumes.push(rec);
        Ok(self.volumes.len() as u32 - 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::superblock::FLAG_CLEAN;
    use crate::layout::{Geometry, WriteMode, VERSION};

    fn sb(names: &[&str]) -> Superblock {
        Superblock {
            version: VERSION,
            sequence: 2,
            cache_uuid: Uuid::nil(),
            device_size: 8 << 20,
            flags: FLAG_CLEAN,
            write_mode: WriteMode::WriteThrough,
            live_mode: None,
            draining: None,
            format_time: 0,
            last_shutdown: 0,
            open_count: 0,
            geometry: Geometry::compute(8 << 20, 4096, 1 << 20, 0).unwrap(),
            checkpoint_slot: 0,
            checkpoint_generation: 0,
            checkpoint_entries: 0,
            checkpoint_crc: 0,
            volumes: names
                .iter()
                .map(|n| VolumeRecord {
                    name: n.to_string(),
                    uuid: Uuid::nil(),
                    size: 1 << 20,
                    fingerprint: 0,
                    backing_medium: 0,
                    backing_state: 0,
                    state: VolumeState::Cached,
                    recorded: Default::default(),
                })
                .collect(),
            records: Default::default(),
        }
    }

    #[test]
    fn a_free_slot_is_taken_first_then_the_end_and_a_full_table_refuses() {
        let mut s = sb(&["a", "b", "c"]);
        s.volumes[1] = VolumeRecord::free();
        assert_eq!(s.place_volume("d", 4096).unwrap(), 1);
        assert_eq!(s.place_volume("e", 4096).unwrap(), 3);
        assert_eq!(s.slot_of("d"), Some(1));
        assert!(s.place_volume("a", 4096).unwrap_err().to_string().contains("already"));
        assert!(s.place_volume("z", 0).is_err());
        assert!(s.place_volume(&"x".repeat(65), 4096).is_err());
        for i in s.volumes.len()..MAX_VOLUMES {
            s.place_volume(&format!("v{i}"), 4096).unwrap();
        }
        assert!(s.place_volume("late", 4096).unwrap_err().to_string().contains("full"));
        Superblock::decode(&s.encode().unwrap()).unwrap();
    }
}
