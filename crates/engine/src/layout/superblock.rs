//! The superblock: identity, geometry, volumes, the clean-shutdown flag and the pointer to
//! the current checkpoint. Two 4 KiB slots are written alternately with an increasing
//! sequence number; the valid slot (magic, version, CRC-32C) with the highest sequence is
//! current, so a torn superblock write leaves the previous one in force.

use super::volume_records::{BackingRecord, RecordsPointer};
use super::volume_state::{VolumeState, STATE_TABLE};
use super::{
    put_u32, put_u64, Geometry, LayoutError, Le, MAX_NAME, MAX_VOLUMES, SUPERBLOCK_SIZE, VERSION,
};
use crate::device::Device;
use serde::Serialize;
use uuid::Uuid;

pub use super::write_mode::WriteMode;

/// Magic at offset 0 of a superblock slot.
pub const MAGIC: &[u8; 8] = b"EMBERCSB";
/// `checkpoint_slot` value meaning "no checkpoint".
pub const NO_CHECKPOINT: u32 = u32::MAX;
/// Flag bit: the cache was shut down cleanly and the checkpoint holds the whole map.
pub const FLAG_CLEAN: u32 = 1;

const VOLUME_TABLE: usize = 256;
const VOLUME_RECORD: usize = 96;
/// Per-volume backing identity (medium, state: 8 bytes each), after the volume table.
const IDENTITY_TABLE: usize = VOLUME_TABLE + MAX_VOLUMES * VOLUME_RECORD;
const IDENTITY_RECORD: usize = 16;
const _: () = assert!(IDENTITY_TABLE + MAX_VOLUMES * IDENTITY_RECORD <= CRC_AT);
const _: () = assert!(STATE_TABLE + MAX_VOLUMES <= VOLUME_TABLE);
const CRC_AT: usize = SUPERBLOCK_SIZE as usize - 4;
/// Version 2's fields, in bytes version 1 left zero: the records area's length (8), then
/// the records' copy in force (4), its length (4), generation (8) and CRC (4).
const RECORDS_AT: usize = 3840;
const _: () = assert!(IDENTITY_TABLE + MAX_VOLUMES * IDENTITY_RECORD <= RECORDS_AT);
const _: () = assert!(RECORDS_AT + 28 <= CRC_AT);

/// One backing volume known to the cache device. Its index in the table is the volume number
/// in block keys (`layout::block_key`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct VolumeRecord {
    /// Name (the NBD export name).
    pub name: String,
    /// Identity assigned at format time.
    pub uuid: Uuid,
    /// Size in bytes the volume had when formatted; a backing device of another size is
    /// refused.
    pub size: u64,
    /// CRC-32C of the volume's first block at the last clean shutdown (0: none). A warm start
    /// drops the volume's cached blocks if its first block changed while ember was stopped
    /// (for instance a new file system made on the backing device directly).
    pub fingerprint: u32,
    /// Digest of which medium backs the volume (a file's device and inode, a block device's
    /// number, see `device::Identity`), recorded at every open and clean shutdown (0: none
    /// recorded or not identifiable). After a crash, dirty blocks are never written over a
    /// backing that is another medium.
    pub backing_medium: u64,
    /// Digest of the backing's state at the last clean shutdown (also covers size,
    /// modification and change times); 0 while the cache runs and when not identifiable. A
    /// warm start keeps a volume's cached blocks only if it is unchanged.
    pub backing_state: u64,
    /// What the cache does with the volume (cached, uncached, being removed, or a free
    /// slot, whose name is empty).
    pub state: VolumeState,
    /// Its backing as given and its own settings (layout version 2's volume records, read
    /// apart from the superblock, `layout/volume_records.rs`; empty: none recorded).
    pub recorded: BackingRecord,
}

impl VolumeRecord {
    /// An unused slot of the table.
    pub fn free() -> VolumeRecord {
        VolumeRecord {
            name: String::new(),
            uuid: Uuid::nil(),
            size: 0,
            fingerprint: 0,
            backing_medium: 0,
            backing_state: 0,
            state: VolumeState::Free,
            recorded: BackingRecord::default(),
        }
    }

    /// True unless the slot is free.
    pub fn in_use(&self) -> bool {
        self.state != VolumeState::Free
    }
}

/// The decoded superblock.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Superblock {
    /// Layout version.
    pub version: u32,
    /// Sequence number; the valid slot with the highest one is current.
    pub sequence: u64,
    /// Identity of the cache device.
    pub cache_uuid: Uuid,
    /// Device size at format time.
    pub device_size: u64,
    /// [`FLAG_CLEAN`] and future flags.
    pub flags: u32,
    /// The write policy the cache last ran under: the one whose crash rules apply. While a
    /// switch out of write-back persist drains its dirty blocks it stays write-back persist
    /// (recovery replays the persisted dirty map), whatever new writes go through.
    pub write_mode: WriteMode,
    /// A live switch in progress: the policy new writes go through, when it is not
    /// `write_mode` (a switch out of write-back persist while its dirty blocks drain).
    pub live_mode: Option<WriteMode>,
    /// A live switch in progress: the former write-back policy whose dirty blocks are still
    /// being written back.
    pub draining: Option<WriteMode>,
    /// Format time, Unix seconds.
    pub format_time: u64,
    /// Time of the last clean shutdown, Unix seconds (0: never).
    pub last_shutdown: u64,
    /// Times the cache has been opened for service.
    pub open_count: u64,
    /// Region layout.
    pub geometry: Geometry,
    /// Checkpoint slot in use (0, 1, or [`NO_CHECKPOINT`]).
    pub checkpoint_slot: u32,
    /// Generation of that checkpoint (thesis 5.3: journal entries with a higher generation
    /// are newer).
    pub checkpoint_generation: u64,
    /// Entries in that checkpoint.
    pub checkpoint_entries: u64,
    /// CRC-32C of that checkpoint's entry bytes.
    pub checkpoint_crc: u32,
    /// The backing volumes.
    pub volumes: Vec<VolumeRecord>,
    /// The volume records' copy in force (version 2; zero: none written).
    pub records: RecordsPointer,
}

impl Superblock {
    /// True if the last shutdown was clean.
    pub fn is_clean(&self) -> bool {
        self.flags & FLAG_CLEAN != 0
    }

    /// Encode into one 4 KiB slot image.
    pub fn encode(&self) -> Result<Vec<u8>, LayoutError> {
        if self.volumes.len() > MAX_VOLUMES {
            return Err(LayoutError::Invalid(format!(
                "{} volumes; at most {MAX_VOLUMES} fit",
                self.volumes.len()
            )));
        }
        let mut b = vec![0u8; SUPERBLOCK_SIZE as usize];
        b[0..8].copy_from_slice(MAGIC);
        put_u32(&mut b, 8, self.version);
        put_u32(&mut b, 12, self.geometry.block_size);
        put_u64(&mut b, 16, self.sequence);
        b[24..40].copy_from_slice(self.cache_uuid.as_bytes());
        put_u64(&mut b, 40, self.device_size);
        put_u32(&mut b, 48, self.flags);
        put_u32(&mut b, 52, self.write_mode.code());
        put_u64(&mut b, 56, self.format_time);
        put_u64(&mut b, 64, self.last_shutdown);
        put_u64(&mut b, 72, self.open_count);
        let g = &self.geometry;
        put_u64(&mut b, 80, g.checkpoint_len);
        put_u64(&mut b, 88, g.checkpoint_a);
        put_u64(&mut b, 96, g.checkpoint_b);
        put_u64(&mut b, 104, g.journal_offset);
        put_u64(&mut b, 112, g.journal_len);
        // The trace commands look for a warmup log in the cache device here (a test below
        // holds ember_trace's reader to these offsets; the layout owns them).
        put_u64(&mut b, 120, g.warmup_offset);
        put_u64(&mut b, 128, g.warmup_len);
        put_u64(&mut b, 136, g.data_offset);
        put_u64(&mut b, 144, g.data_blocks);
        put_u32(&mut b, 152, self.checkpoint_slot);
        put_u64(&mut b, 160, self.checkpoint_generation);
        put_u64(&mut b, 168, self.checkpoint_entries);
        put_u32(&mut b, 176, self.checkpoint_crc);
        put_u32(&mut b, 180, self.volumes.len() as u32);
        put_u32(&mut b, 184, self.live_mode.map_or(0, |m| m.code() + 1));
        put_u32(&mut b, 188, self.draining.map_or(0, |m| m.code() + 1));
        for (i, v) in self.volumes.iter().enumerate() {
            b[STATE_TABLE + i] = v.state.code();
            if !v.in_use() {
                continue;
            }
            let at = VOLUME_TABLE + i * VOLUME_RECORD;
            let name = v.name.as_bytes();
            if name.is_empty() || name.len() > MAX_NAME {
                return Err(LayoutError::Invalid(format!(
                    "volume name {:?} must have 1 to {MAX_NAME} bytes",
                    v.name
                )));
            }
            b[at..at + 16].copy_from_slice(v.uuid.as_bytes());
            put_u64(&mut b, at + 16, v.size);
            put_u32(&mut b, at + 24, name.len() as u32);
            put_u32(&mut b, at + 28, v.fingerprint);
            b[at + 32..at + 32 + name.len()].copy_from_slice(name);
            let id = IDENTITY_TABLE + i * IDENTITY_RECORD;
            put_u64(&mut b, id, v.backing_medium);
            put_u64(&mut b, id + 8, v.backing_state);
        }
        if self.version >= 2 {
            put_u64(&mut b, RECORDS_AT, g.records_len);
            put_u32(&mut b, RECORDS_AT + 8, self.records.copy);
            put_u32(&mut b, RECORDS_AT + 12, self.records.len);
            put_u64(&mut b, RECORDS_AT + 16, self.records.generation);
            put_u32(&mut b, RECORDS_AT + 24, self.records.crc);
        } else if g.records_len != 0 {
            return Err(LayoutError::Invalid("layout version 1 has no volume records".into()));
        }
        let crc = crc32c::crc32c(&b[..CRC_AT]);
        put_u32(&mut b, CRC_AT, crc);
        Ok(b)
    }

    /// Decode one slot image; Err says why it is not a valid superblock.
    pub fn decode(b: &[u8]) -> Result<Self, SlotError> {
        if b.len() != SUPERBLOCK_SIZE as usize {
            return Err(SlotError::Invalid(format!("slot of {} bytes", b.len())));
        }
        if &b[0..8] != MAGIC {
            return Err(SlotError::NoMagic);
        }
        let le = Le(b);
        let stored = le.u32(CRC_AT);
        let actual = crc32c::crc32c(&b[..CRC_AT]);
        if stored != actual {
            return Err(SlotError::Invalid(format!(
                "checksum mismatch (stored {stored:#010x}, computed {actual:#010x})"
            )));
        }
        let version = le.u32(8);
        if version != 1 && version != VERSION {
            return Err(SlotError::Version(version));
        }
        let uuid_at = |at: usize| {
            let mut u = [0u8; 16];
            u.copy_from_slice(&b[at..at + 16]);
            Uuid::from_bytes(u)
        };
        let write_mode = WriteMode::from_code(le.u32(52))
            .ok_or_else(|| SlotError::Invalid(format!("unknown write mode {}", le.u32(52))))?;
        // 0: none (every superblock written before live switches existed has zeros here).
        let optional_mode = |at: usize, what: &str| match le.u32(at) {
            0 => Ok(None),
            c => WriteMode::from_code(c - 1)
                .map(Some)
                .ok_or_else(|| SlotError::Invalid(format!("unknown {what} {}", c - 1))),
        };
        let live_mode = optional_mode(184, "live write mode")?;
        let draining = optional_mode(188, "draining write mode")?;
        let geometry = Geometry {
            block_size: le.u32(12),
            checkpoint_len: le.u64(80),
            checkpoint_a: le.u64(88),
            checkpoint_b: le.u64(96),
            journal_offset: le.u64(104),
            journal_len: le.u64(112),
            records_len: if version >= 2 { le.u64(RECORDS_AT) } else { 0 },
            warmup_offset: le.u64(120),
            warmup_len: le.u64(128),
            data_offset: le.u64(136),
            data_blocks: le.u64(144),
        };
        let device_size = le.u64(40);
        geometry.validate(device_size).map_err(|e| SlotError::Invalid(format!("geometry: {e}")))?;
        let records = if version >= 2 {
            RecordsPointer {
                copy: le.u32(RECORDS_AT + 8),
                len: le.u32(RECORDS_AT + 12),
                generation: le.u64(RECORDS_AT + 16),
                crc: le.u32(RECORDS_AT + 24),
            }
        } else {
            RecordsPointer::default()
        };
        if records.copy > 1 || u64::from(records.len) > geometry.records_len / 2 {
            return Err(SlotError::Invalid(format!(
                "volume records: copy {} of {} bytes in an area of {}",
                records.copy, records.len, geometry.records_len
            )));
        }
        let count = le.u32(180) as usize;
        if count > MAX_VOLUMES {
            return Err(SlotError::Invalid(format!("{count} volumes (at most {MAX_VOLUMES})")));
        }
        let mut volumes = Vec::with_capacity(count);
        for i in 0..count {
            let state = VolumeState::from_code(b[STATE_TABLE + i]).ok_or_else(|| {
                SlotError::Invalid(format!("volume {i}: unknown state {}", b[STATE_TABLE + i]))
            })?;
            if state == VolumeState::Free {
                volumes.push(VolumeRecord::free());
                continue;
            }
            let at = VOLUME_TABLE + i * VOLUME_RECORD;
            let len = le.u32(at + 24) as usize;
            if len == 0 || len > MAX_NAME {
                return Err(SlotError::Invalid(format!("volume {i}: name length {len}")));
            }
            let name = std::str::from_utf8(&b[at + 32..at + 32 + len])
                .map_err(|e| SlotError::Invalid(format!("volume {i}: name: {e}")))?
                .to_string();
            volumes.push(VolumeRecord {
                name,
                uuid: uuid_at(at),
                size: le.u64(at + 16),
                fingerprint: le.u32(at + 28),
                backing_medium: le.u64(IDENTITY_TABLE + i * IDENTITY_RECORD),
                backing_state: le.u64(IDENTITY_TABLE + i * IDENTITY_RECORD + 8),
                state,
                recorded: BackingRecord::default(),
            });
        }
        let checkpoint_slot = le.u32(152);
        if checkpoint_slot != NO_CHECKPOINT && checkpoint_slot > 1 {
            return Err(SlotError::Invalid(format!("checkpoint slot {checkpoint_slot}")));
        }
        Ok(Self {
            version,
            sequence: le.u64(16),
            cache_uuid: uuid_at(24),
            device_size,
            flags: le.u32(48),
            write_mode,
            live_mode,
            draining,
            format_time: le.u64(56),
            last_shutdown: le.u64(64),
            open_count: le.u64(72),
            geometry,
            checkpoint_slot,
            checkpoint_generation: le.u64(160),
            checkpoint_entries: le.u64(168),
            checkpoint_crc: le.u32(176),
            volumes,
            records,
        })
    }

    /// Read both slots of `dev` and return the current superblock, with the volume records
    /// it names.
    pub fn read(dev: &dyn Device) -> Result<Self, LayoutError> {
        let mut best: Option<Superblock> = None;
        let mut why = Vec::new();
        for slot in 0..2u64 {
            let mut b = vec![0u8; SUPERBLOCK_SIZE as usize];
            if dev.size() < (slot + 1) * SUPERBLOCK_SIZE {
                why.push(format!("slot {slot}: device too small"));
                continue;
            }
            dev.read_at(slot * SUPERBLOCK_SIZE, &mut b).map_err(|e| {
                crate::device::io_context(
                    dev,
                    "superblock read",
                    slot * SUPERBLOCK_SIZE,
                    SUPERBLOCK_SIZE,
                    e,
                )
            })?;
            match Superblock::decode(&b) {
                Ok(sb) => {
                    if best.as_ref().is_none_or(|cur| sb.sequence > cur.sequence) {
                        best = Some(sb);
                    }
                }
                Err(SlotError::Version(found)) => {
                    return Err(LayoutError::Version { device: dev.describe(), found })
                }
                Err(e) => why.push(format!("slot {slot}: {e}")),
            }
        }
        let mut sb = best.ok_or_else(|| LayoutError::NotFormatted {
            device: dev.describe(),
            detail: why.join("; "),
        })?;
        if sb.device_size > dev.size() {
            return Err(LayoutError::Corrupt {
                device: dev.describe(),
                what: "superblock",
                detail: format!(
                    "formatted for {} bytes but the device has {}",
                    sb.device_size,
                    dev.size()
                ),
            });
        }
        sb.read_records(dev)?;
        Ok(sb)
    }

    /// Write this superblock into the slot its sequence number selects (even: 0, odd: 1) and
    /// sync, so the previous superblock in the other slot survives a torn write.
    pub fn write(&self, dev: &dyn Device) -> Result<(), LayoutError> {
        let img = self.encode()?;
        let off = (self.sequence % 2) * SUPERBLOCK_SIZE;
        dev.write_at(off, &img).map_err(|e| {
            crate::device::io_context(dev, "superblock write", off, SUPERBLOCK_SIZE, e)
        })?;
        dev.sync()
            .map_err(|e| crate::device::io_context(dev, "sync after superblock", off, 0, e))?;
        Ok(())
    }
}

/// Why one superblock slot is not valid.
#[derive(Debug, thiserror::Error)]
pub enum SlotError {
    /// No ember magic (never formatted, or another format).
    #[error("no ember magic")]
    NoMagic,
    /// Magic present but a layout version this code does not read.
    #[error("layout version {0}")]
    Version(u32),
    /// Magic present but the content is invalid (torn write, corruption).
    #[error("{0}")]
    Invalid(String),
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::MemDevice;

    fn sample() -> Superblock {
        let geometry = Geometry::compute(8 << 20, 4096, 1 << 20, 0).unwrap();
        Superblock {
            version: VERSION,
            sequence: 7,
            cache_uuid: Uuid::new_v4(),
            device_size: 8 << 20,
            flags: FLAG_CLEAN,
            write_mode: WriteMode::WriteAround,
            live_mode: None,
            draining: None,
            format_time: 1_700_000_000,
            last_shutdown: 1_700_000_100,
            open_count: 3,
            geometry,
            checkpoint_slot: 1,
            checkpoint_generation: 5,
            checkpoint_entries: 42,
            checkpoint_crc: 0xdead_beef,
            volumes: vec![
                VolumeRecord {
                    name: "vol0".into(),
                    uuid: Uuid::new_v4(),
                    size: 1 << 30,
                    fingerprint: 0x1234_5678,
                    backing_medium: 0x0123_4567_89ab_cdef,
                    backing_state: u64::MAX,
                    state: VolumeState::Cached,
                    recorded: Default::default(),
                },
                VolumeRecord {
                    name: "web-1".into(),
                    uuid: Uuid::new_v4(),
                    size: 12345,
                    fingerprint: 0,
                    backing_medium: 0,
                    backing_state: 7,
                    state: VolumeState::Uncached,
                    recorded: Default::default(),
                },
            ],
            records: Default::default(),
        }
    }

    #[test]
    fn encode_decode_round_trip() {
        let sb = sample();
        let img = sb.encode().unwrap();
        assert_eq!(img.len(), 4096);
        assert_eq!(Superblock::decode(&img).unwrap(), sb);
    }

    /// A switch in progress round-trips; a superblock written before switches existed (zeros
    /// at 184..192) reads as none in progress; an unknown code is refused like an unknown
    /// write mode.
    #[test]
    fn a_switch_in_progress_is_recorded_and_older_superblocks_read_as_none() {
        let mut sb = sample();
        sb.write_mode = WriteMode::WriteBackPersist;
        sb.live_mode = Some(WriteMode::WriteThrough);
        sb.draining = Some(WriteMode::WriteBackPersist);
        let img = sb.encode().unwrap();
        assert_eq!(Superblock::decode(&img).unwrap(), sb);
        assert_eq!(Le(&img).u32(184), 1, "write-through's code + 1");
        let mut img = sample().encode().unwrap();
        assert_eq!((Le(&img).u32(184), Le(&img).u32(188)), (0, 0));
        let old = Superblock::decode(&img).unwrap();
        assert_eq!((old.live_mode, old.draining), (None, None));
        put_u32(&mut img, 188, 42);
        let crc = crc32c::crc32c(&img[..CRC_AT]);
        put_u32(&mut img, CRC_AT, crc);
        let e = Superblock::decode(&img).unwrap_err();
        assert!(e.to_string().contains("unknown draining write mode 41"), "{e}");
    }

    #[test]
    fn the_trace_reader_finds_the_warmup_log_region_where_the_layout_puts_it() {
        // The layout owns the disk format; ember_trace's reader of `--warmup-log cache:` must
        // follow it (a change on either side fails here, not silently on a user's device).
        let mut sb = sample();
        sb.geometry = Geometry::compute(8 << 20, 4096, 1 << 20, 256 << 10).unwrap();
        let img = sb.encode().unwrap();
        let g = &sb.geometry;
        assert!(g.warmup_len >= 256 << 10 && g.warmup_offset > 0);
        assert_eq!(
            ember_trace::formats::warmup_log::cache_region(&img),
            Some((g.warmup_offset, g.warmup_len))
        );
        assert_eq!(&ember_trace::formats::warmup_log::CACHE_DEVICE_MAGIC, MAGIC);
        assert_eq!(
            ember_trace::formats::warmup_log::cache_region(&sample().encode().unwrap()),
            None
        );
    }

    /// Version 1 is read and written as version 1 wrote it: no records area (zeros where
    /// version 2 keeps its fields); version 2's records pointer round-trips.
    #[test]
    fn version_one_reads_as_it_was_and_version_two_keeps_its_records_pointer() {
        let mut v1 = sample();
        v1.version = 1;
        v1.geometry = v1.geometry.without_records();
        let img = v1.encode().unwrap();
        assert!(img[RECORDS_AT..RECORDS_AT + 28].iter().all(|&b| b == 0));
        assert_eq!(Superblock::decode(&img).unwrap(), v1);
        let mut bad = v1.clone();
        bad.geometry = sample().geometry;
        assert!(bad.encode().is_err(), "version 1 has no records area");
        let mut v2 = sample();
        v2.records = RecordsPointer { copy: 1, len: 300, generation: 9, crc: 0xabcd };
        assert_eq!(Superblock::decode(&v2.encode().unwrap()).unwrap(), v2);
        v2.records.len = 1 << 20;
        let e = Superblock::decode(&v2.encode().unwrap()).unwrap_err();
        assert!(e.to_string().contains("volume records"), "{e}");
    }

    #[test]
    fn a_flipped_bit_is_detected() {
        let mut img = sample().encode().unwrap();
        img[300] ^= 0x10;
        let e = Superblock::decode(&img).unwrap_err();
        assert!(e.to_string().contains("checksum mismatch"), "{e}");
    }

    #[test]
    fn newest_valid_slot_wins_and_a_torn_one_is_skipped() {
        let dev = MemDevice::new(8 << 20);
        let mut sb = sample();
        sb.sequence = 4;
        sb.write(&dev).unwrap();
        sb.sequence = 5;
        sb.flags = 0;
        sb.write(&dev).unwrap();
        assert_eq!(Superblock::read(&dev).unwrap().sequence, 5);
        // Tear slot 1 (sequence 5): slot 0 (sequence 4, clean) is current again.
        dev.write_at(4096 + 100, &[0xff; 8]).unwrap();
        let cur = Superblock::read(&dev).unwrap();
        assert_eq!(cur.sequence, 4);
        assert!(cur.is_clean());
        // Tear both: a clear error naming the device.
        dev.write_at(100, &[0xff; 8]).unwrap();
        let e = Superblock::read(&dev).unwrap_err();
        let msg = e.to_string();
        assert!(matches!(e, LayoutError::NotFormatted { .. }), "{msg}");
        assert!(msg.contains("memory") && msg.contains("checksum mismatch"), "{msg}");
    }

    #[test]
    fn unknown_version_is_refused_by_name() {
        let mut img = sample().encode().unwrap();
        put_u32(&mut img, 8, 9);
        let crc = crc32c::crc32c(&img[..CRC_AT]);
        put_u32(&mut img, CRC_AT, crc);
        let dev = MemDevice::new(8 << 20);
        dev.write_at(0, &img).unwrap();
        let e = Superblock::read(&dev).unwrap_err();
        assert!(e.to_string().contains("version 9 is not supported"), "{e}");
    }

    #[test]
    fn long_names_and_too_many_volumes_are_refused() {
        let mut sb = sample();
        sb.volumes[0].name = "x".repeat(65);
        assert!(sb.encode().is_err());
        let mut sb = sample();
        sb.volumes = (0..33)
            .map(|i| VolumeRecord {
                backing_medium: 0,
                backing_state: 0,
                name: format!("v{i}"),
                uuid: Uuid::nil(),
                size: 1,
                fingerprint: 0,
                state: VolumeState::Cached,
                recorded: Default::default(),
            })
            .collect();
        assert!(sb.encode().is_err());
    }

    /// Each slot's state round-trips; a free slot keeps its number with an empty name; a
    /// version-1 superblock (zeros at 192..224) reads every volume as cached; an unknown
    /// state is refused like an unknown write mode.
    #[test]
    fn volume_states_round_trip_and_version_one_reads_as_cached() {
        let mut sb = sample();
        sb.volumes.push(VolumeRecord::free());
        sb.volumes.push(VolumeRecord { state: VolumeState::Removing, ..sb.volumes[0].clone() });
        sb.volumes[3].name = "old".into();
        let img = sb.encode().unwrap();
        let back = Superblock::decode(&img).unwrap();
        assert_eq!(back, sb);
        assert!(!back.volumes[2].in_use() && back.volumes[2].name.is_empty());
        let mut cached = sample();
        cached.volumes.iter_mut().for_each(|v| v.state = VolumeState::Cached);
        let v1 = cached.encode().unwrap();
        assert!(v1[192..224].iter().all(|&b| b == 0), "all cached: version 1's zeros");
        let mut img = v1.clone();
        img[193] = 9;
        let crc = crc32c::crc32c(&img[..CRC_AT]);
        put_u32(&mut img, CRC_AT, crc);
        let e = Superblock::decode(&img).unwrap_err();
        assert!(e.to_string().contains("volume 1: unknown state 9"), "{e}");
    }
}
