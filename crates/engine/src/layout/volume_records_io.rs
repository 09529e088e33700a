//! Reading and writing the volume records (`volume_records.rs`) through the superblock that
//! names their copy in force: a write goes to the other copy and is synced before the caller
//! writes the superblock that names it.

use super::superblock::Superblock;
use super::volume_records::{decode, encode, BackingRecord, RecordsPointer};
use super::LayoutError;
use crate::device::{io_context, Device};

impl Superblock {
    /// Bytes of one copy of the records area.
    fn records_copy_len(&self) -> u64 {
        self.geometry.records_len / 2
    }

    /// Read the records' copy this superblock names into its volumes' `recorded` (every
    /// record empty when none was written or the layout has no records area).
    pub fn read_records(&mut self, dev: &dyn Device) -> Result<(), LayoutError> {
        let p = self.records;
        if p.len == 0 || self.geometry.records_len == 0 {
            self.volumes.iter_mut().for_each(|v| v.recorded = BackingRecord::default());
            return Ok(());
        }
        let off = self.geometry.records_offset() + u64::from(p.copy) * self.records_copy_len();
        let mut b = vec![0u8; p.len as usize];
        dev.read_at(off, &mut b)
            .map_err(|e| io_context(dev, "volume records read", off, b.len() as u64, e))?;
        let corrupt = |detail: String| LayoutError::Corrupt {
            device: dev.describe(),
            what: "volume records",
            detail,
        };
        let crc = crc32c::crc32c(&b);
        if crc != p.crc {
            return Err(corrupt(format!(
                "copy {}: checksum mismatch (stored {:#010x}, computed {crc:#010x})",
                p.copy, p.crc
            )));
        }
        let mut records = decode(&b, p.generation).map_err(corrupt)?.into_iter();
        for v in &mut self.volumes {
            v.recorded = records.next().unwrap_or_default();
            if !v.in_use() {
                v.recorded = BackingRecord::default();
            }
        }
        Ok(())
    }

    /// Write the volumes' records to the copy this superblock does not name and sync, and
    /// name that copy (the caller then writes the superblock: until then the former copy is
    /// in force). Returns false, writing nothing, when the layout has no records area.
    pub fn write_records(&mut self, dev: &dyn Device) -> Result<bool, LayoutError> {
        if self.geometry.records_len == 0 {
            return Ok(false);
        }
        let records: Vec<&BackingRecord> = self.volumes.iter().map(|v| &v.recorded).collect();
        let generation = self.records.generation + 1;
        let b = encode(&records, generation);
        if b.len() as u64 > self.records_copy_len() {
            return Err(LayoutError::Invalid(format!(
                "the volume records take {} bytes; their area holds {} (shorter backings or \
                 fewer settings)",
                b.len(),
                self.records_copy_len()
            )));
        }
        let copy = if self.records.len == 0 { 0 } else { 1 - self.records.copy.min(1) };
        let off = self.geometry.records_offset() + u64::from(copy) * self.records_copy_len();
        dev.write_at(off, &b)
            .map_err(|e| io_context(dev, "volume records write", off, b.len() as u64, e))?;
        dev.sync().map_err(|e| io_context(dev, "sync after volume records", off, 0, e))?;
        self.records =
            RecordsPointer { copy, len: b.len() as u32, generation, crc: crc32c::crc32c(&b) };
        Ok(true)
    }
}
