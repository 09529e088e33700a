//! A device in memory: the backing store of tests, and an emulated disk.

use super::identity::{digest, Identity};
use super::{check_range, Device};
use parking_lot::RwLock;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Instance numbers of memory devices (their "inode").
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// A device held in memory. Every write is durable at once (sync does nothing); trim and
/// write-zeroes read back as zeros. Its identity is its instance and how many times it was
/// modified.
pub struct MemDevice {
    data: RwLock<Vec<u8>>,
    id: u64,
    changes: AtomicU64,
    volatile: bool,
}

impl MemDevice {
    /// A zero-filled device of `size` bytes.
    pub fn new(size: u64) -> Self {
        Self::from_bytes(vec![0u8; size as usize])
    }

    /// A device holding a copy of `bytes`.
    pub fn from_bytes(bytes: Vec<u8>) -> Self {
        Self {
            data: RwLock::new(bytes),
            id: NEXT_ID.fetch_add(1, Relaxed),
            changes: AtomicU64::new(0),
            volatile: false,
        }
    }

    /// A zero-filled memory cache of `size` bytes that ember loses at every stop
    /// (`--cache mem:SIZE`): [`Device::volatile`] says so, and the engine refuses the write
    /// policies it would lose acknowledged writes under. (A plain [`MemDevice::new`] stands
    /// for a durable device in tests, which outlives an engine dropped as a crash.)
    pub fn volatile(size: u64) -> Self {
        Self { volatile: true, ..Self::new(size) }
    }

    /// A copy of the whole content.
    pub fn snapshot(&self) -> Vec<u8> {
        self.data.read().clone()
    }
}

impl Device for MemDevice {
    fn size(&self) -> u64 {
        self.data.read().len() as u64
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let data = self.data.read();
        check_range(data.len() as u64, offset, buf.len() as u64, "read")?;
        let o = offset as usize;
        buf.copy_from_slice(&data[o..o + buf.len()]);
        Ok(())
    }

    /// Memory is always at hand.
    fn read_if_cached(&self, offset: u64, buf: &mut [u8]) -> Option<io::Result<()>> {
        Some(self.read_at(offset, buf))
    }

    fn write_at(&self, offset: u64, src: &[u8]) -> io::Result<()> {
        let mut data = self.data.write();
        check_range(data.len() as u64, offset, src.len() as u64, "write")?;
        let o = offset as usize;
        data[o..o + src.len()].copy_from_slice(src);
        self.changes.fetch_add(1, Relaxed);
        Ok(())
    }

    fn sync(&self) -> io::Result<()> {
        Ok(())
    }

    fn trim(&self, offset: u64, len: u64) -> io::Result<()> {
        self.write_zeroes(offset, len)
    }

    fn write_zeroes(&self, offset: u64, len: u64) -> io::Result<()> {
        let mut data = self.data.write();
        check_range(data.len() as u64, offset, len, "write-zeroes")?;
        data[offset as usize..(offset + len) as usize].fill(0);
        self.changes.fetch_add(1, Relaxed);
        Ok(())
    }

    fn describe(&self) -> String {
        format!("memory ({} bytes)", self.size())
    }

    fn volatile(&self) -> bool {
        self.volatile
    }

    fn identity(&self) -> io::Result<Identity> {
        let medium = digest(&[3, self.id]);
        Ok(Identity::Known {
            medium,
            state: digest(&[medium, self.size(), self.changes.load(Relaxed)]),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_read_trim_round_trip() {
        let d = MemDevice::new(8192);
        d.write_at(100, b"hello").unwrap();
        let mut b = [0u8; 5];
        d.read_at(100, &mut b).unwrap();
        assert_eq!(&b, b"hello");
        d.trim(101, 2).unwrap();
        d.read_at(100, &mut b).unwrap();
        assert_eq!(&b, b"h\0\0lo");
    }

    #[test]
    fn out_of_range_is_an_error() {
        let d = MemDevice::new(4096);
        let mut b = [0u8; 8];
        let e = d.read_at(4090, &mut b).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        assert!(d.write_at(4096, b"x").is_err());
    }
}
