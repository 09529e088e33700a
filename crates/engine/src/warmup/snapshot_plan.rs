//! Which of a preload's blocks come from the performance snapshot ("the
//! snapshot's copy of a block is used only if no later write to that block was logged").
//!
//! A copy carries a tag: the warmup log's sequence number it is at least as new as (the
//! writer stages a block's copy after the records up to the tag were appended, and the engine
//! stages a write's record only after the write's data is in place, so every write whose data
//! the copy lacks has a record numbered above the tag). The newest copy of a block is used
//! only if
//!
//! 1. the snapshot goes with this log (same log id and block size);
//! 2. its tag is at least the header's `invalid_before` (raised when the staging buffer
//!    dropped a write's record);
//! 3. the log still holds every record after the tag (the circular log has not overwritten
//!    them);
//! 4. no write record of the block is numbered above the tag;
//! 5. its volume's backing can be identified and, when the last run stopped cleanly, its state
//!    is the one recorded at that stop (not modified while ember was down).
//!
//! Anything else comes from backing. A FLUSH (and a FUA write) makes the log durable before it
//! is acknowledged (`writer::LogSink::sync`), so a write that is durable on backing is also
//! durably logged; an unflushed write may be lost anyway under the NBD crash contract, so the
//! older copy may be returned for it.

use super::plan::Served;
use super::snapshot_file::SnapshotContents;
use ember_trace::formats::warmup_log::LogContents;
use ember_trace::Op;
use std::collections::HashMap;

/// A block to preload from the snapshot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SnapCopy {
    /// Engine volume.
    pub volume: u32,
    /// Block.
    pub block: u64,
    /// Byte offset of its data in the snapshot file.
    pub offset: u64,
    /// CRC-32C of its data.
    pub crc: u32,
}

/// The usable copies of the snapshot, by (engine volume, block), and notes for the start line.
#[derive(Debug, Default)]
pub struct Usable {
    /// The copies the rules allow.
    pub copies: HashMap<(u32, u64), SnapCopy>,
    /// Newest copies refused because a later write was logged, or the log no longer covers
    /// them, or they are below `invalid_before`.
    pub refused: u64,
    /// Why volumes (or the whole snapshot) are not used.
    pub notes: Vec<String>,
}

/// A served volume's backing state digest now (0: cannot be identified).
pub type StateNow = HashMap<u32, u64>;

/// Apply the rules of the module doc.
pub fn usable(
    snap: &SnapshotContents,
    log: &LogContents,
    served: &[Served],
    state_now: &StateNow,
) -> Usable {
    let mut u = Usable::default();
    let h = &snap.header;
    if h.log_id != log.header.log_id || h.block_size != log.header.block_size {
        u.notes.push("it was written with another warmup log".into());
        return u;
    }
    // Log volume index -> engine volume id, for volumes whose copies may be used.
    let mut vol: Vec<Option<u32>> = Vec::new();
    for (i, lv) in log.header.volumes.iter().enumerate() {
        let s = served.iter().find(|s| s.name == lv.name && s.size == lv.size);
        let id = match s {
            None => None,
            // Another file or device: the plan drops its records (and says so).
            Some(s) if s.medium != 0 && lv.backing_medium != 0 && s.medium != lv.backing_medium => {
                None
            }
            Some(s) if s.medium == 0 || lv.backing_medium == 0 => {
                u.notes.push(format!(
                    "volume {}: its backing cannot be identified, so a change while ember was \
                     down could not be seen; its copies are not used (an NBD backing: \
                     --trust-nbd-backing)",
                    lv.name
                ));
                None
            }
            Some(s) => {
                let then = h.states.get(i).copied().unwrap_or(0);
                let now = state_now.get(&s.id).copied().unwrap_or(0);
                if h.clean && then != 0 && then != now {
                    u.notes.push(format!(
                        "volume {}: its backing was modified while ember was down; its \
                         copies are not used",
                        lv.name
                    ));
                    None
                } else {
                    Some(s.id)
                }
            }
        };
        vol.push(id);
    }
    // Newest write record per block.
    let mut last_write: HashMap<(u8, u64), u64> = HashMap::new();
    for r in log.records.iter().filter(|r| r.op == Op::Write) {
        for b in r.block..r.block + r.blocks as u64 {
            last_write.insert((r.volume, b), r.seq);
        }
    }
    let oldest = log.records.first().map_or(u64::MAX, |r| r.seq);
    let newest = log.records.last().map_or(0, |r| r.seq);
    // Newest copy per block: later segments, and later entries, win.
    let mut newest_copy: HashMap<(u8, u64), (u64, u64, u32)> = HashMap::new();
    for s in &snap.segments {
        let slot = (s.seq - 1) % h.slots;
        for (i, e) in s.entries.iter().enumerate() {
            newest_copy.insert((e.volume, e.block), (e.tag, h.data_offset(slot, i as u64), e.crc));
        }
    }
    for ((v, b), (tag, offset, crc)) in newest_copy {
        let Some(Some(id)) = vol.get(v as usize) else { continue };
        // Rule 3: every record after the tag is still in the log (the log may also have
        // lost records after the tag that were never made durable: not flushed writes).
        let covered = tag + 1 >= oldest || tag >= newest;
        let later_write = last_write.get(&(v, b)).is_some_and(|&w| w > tag);
        if tag < h.invalid_before || !covered || later_write {
            u.refused += 1;
            continue;
        }
        u.copies.insert((*id, b), SnapCopy { volume: *id, block: b, offset, crc });
    }
    u
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::warmup::snapshot_file::{Segment, SnapEntry, SnapshotHeader};
    use ember_trace::formats::warmup_log::{LogHeader, LogRecord, LogVolume};

    fn log(first_seq: u64, recs: &[(u64, bool)]) -> LogContents {
        LogContents {
            header: LogHeader {
                slots: 100,
                log_id: 7,
                block_size: 4096,
                created_ns: 0,
                volumes: vec![LogVolume { name: "a".into(), size: 1 << 20, backing_medium: 1 }],
            },
            records: recs
                .iter()
                .enumerate()
                .map(|(i, &(block, write))| LogRecord {
                    seq: first_seq + i as u64,
                    time_ns: 0,
                    block,
                    blocks: 1,
                    volume: 0,
                    op: if write { Op::Write } else { Op::Read },
                })
                .collect(),
            torn: 0,
        }
    }

    fn snap(
        clean: bool,
        state: u64,
        invalid_before: u64,
        copies: &[(u64, u64)],
    ) -> SnapshotContents {
        SnapshotContents {
            header: SnapshotHeader {
                block_size: 4096,
                log_id: 7,
                slots: 4,
                slot_blocks: 8,
                clean,
                invalid_before,
                states: vec![state],
            },
            segments: vec![Segment {
                seq: 1,
                entries: copies
                    .iter()
                    .map(|&(block, tag)| SnapEntry { volume: 0, crc: 0, block, tag })
                    .collect(),
            }],
            unreadable: 0,
        }
    }

    fn served(medium: u64) -> Vec<Served> {
        vec![Served { name: "a".into(), id: 2, size: 1 << 20, medium }]
    }

    fn blocks(u: &Usable) -> Vec<u64> {
        let mut v: Vec<u64> = u.copies.keys().map(|k| k.1).collect();
        v.sort();
        v
    }

    #[test]
    fn a_copy_older_than_a_logged_write_is_refused() {
        // Records 1..=4: write 10, read 11, write 11, write 12. Copies: 10 at tag 1 (the
        // write is in it), 11 at tag 2 (record 3 writes it later), 12 at tag 4.
        let l = log(1, &[(10, true), (11, false), (11, true), (12, true)]);
        let s = snap(false, 0, 0, &[(10, 1), (11, 2), (12, 4)]);
        let now = StateNow::from([(2, 55)]);
        let u = usable(&s, &l, &served(1), &now);
        assert_eq!(blocks(&u), vec![10, 12]);
        assert_eq!(u.refused, 1);
        assert_eq!(u.copies[&(2, 12)].offset, s.header.data_offset(0, 2));
        // invalid_before 2: the copy tagged 1 goes too.
        let u = usable(&snap(false, 0, 2, &[(10, 1), (12, 4)]), &l, &served(1), &now);
        assert_eq!(blocks(&u), vec![12]);
    }

    #[test]
    fn a_log_that_lost_the_records_after_a_tag_refuses_it() {
        // The log starts at record 5: what came after tag 2 (records 3, 4) is gone.
        let l = log(5, &[(20, false)]);
        let u = usable(&snap(false, 0, 0, &[(10, 2), (11, 4)]), &l, &served(1), &StateNow::new());
        assert_eq!(blocks(&u), vec![11]);
    }

    #[test]
    fn changed_or_unidentifiable_backings_and_other_logs_disable_it() {
        let l = log(1, &[(10, false)]);
        let now = StateNow::from([(2, 55)]);
        // Clean stop recorded state 54, it is 55 now: modified while down.
        let u = usable(&snap(true, 54, 0, &[(10, 1)]), &l, &served(1), &now);
        assert!(u.copies.is_empty());
        assert!(u.notes[0].contains("modified while ember was down"), "{:?}", u.notes);
        // Same state: used.
        let u = usable(&snap(true, 55, 0, &[(10, 1)]), &l, &served(1), &now);
        assert_eq!(blocks(&u), vec![10]);
        // Not identifiable.
        let u = usable(&snap(false, 0, 0, &[(10, 1)]), &l, &served(0), &now);
        assert!(u.copies.is_empty() && u.notes[0].contains("cannot be identified"));
        // Another file: its records and copies are not the served volume's.
        let u = usable(&snap(false, 0, 0, &[(10, 1)]), &l, &served(3), &now);
        assert!(u.copies.is_empty());
        let mut s = snap(false, 0, 0, &[(10, 1)]);
        s.header.log_id = 8;
        let u = usable(&s, &l, &served(1), &now);
        assert!(u.copies.is_empty() && u.notes[0].contains("another warmup log"));
    }
}
