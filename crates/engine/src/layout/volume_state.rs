//! What the cache does with each volume of the superblock's table: one byte a slot at
//! superblock offset 192 + slot. Version 1 wrote zeros there, and zero is what version 1
//! meant (a volume cached as configured), so a version-1 superblock reads unchanged.

use serde::Serialize;

/// Superblock offset of slot 0's state byte.
pub(crate) const STATE_TABLE: usize = 192;

/// The state of one slot of the volume table.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum VolumeState {
    /// Cached as configured (the only state version 1 knew).
    #[default]
    Cached,
    /// Exported, served pass-through from backing: no block of it is allocated
    /// (`ember ctl uncache`); a restart keeps it so.
    Uncached,
    /// Being removed (`ember ctl remove`): its export is stopped and its dirty blocks are
    /// being written back. A restart that names it serves it again; one that does not keeps
    /// it recorded, so its dirty blocks are never dropped.
    Removing,
    /// An unused slot: a removed volume whose blocks are all gone from the cache, the
    /// persisted dirty map and the journal. A later `attach` may take it.
    Free,
}

impl VolumeState {
    /// The state's code on the device.
    pub(crate) fn code(self) -> u8 {
        match self {
            VolumeState::Cached => 0,
            VolumeState::Uncached => 1,
            VolumeState::Removing => 2,
            VolumeState::Free => 3,
        }
    }

    /// The state of a code read from the device.
    pub(crate) fn from_code(c: u8) -> Option<Self> {
        Some(match c {
            0 => VolumeState::Cached,
            1 => VolumeState::Uncached,
            2 => VolumeState::Removing,
            3 => VolumeState::Free,
            _ => return None,
        })
    }

    /// The state's name, as `ember cache inspect` and `ember ctl status` print it.
    pub fn name(self) -> &'static str {
        match self {
            VolumeState::Cached => "cached",
            VolumeState::Uncached => "uncached",
            VolumeState::Removing => "removing",
            VolumeState::Free => "free",
        }
    }
}

impl std::fmt::Display for VolumeState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip_and_zero_is_version_one_meaning() {
        for s in
            [VolumeState::Cached, VolumeState::Uncached, VolumeState::Removing, VolumeState::Free]
        {
            assert_eq!(VolumeState::from_code(s.code()), Some(s));
        }
        assert_eq!(VolumeState::from_code(0), Some(VolumeState::Cached));
        assert_eq!(VolumeState::from_code(4), None);
    }
}
