//! Files the tests make: sparse or filled images, single blocks overwritten behind a server's
//! back.

use std::io::{Seek, SeekFrom, Write};
use std::path::Path;

/// A sparse file of `size` bytes.
pub fn sparse_file(path: &Path, size: u64) {
    let f =
        std::fs::File::create(path).unwrap_or_else(|e| panic!("creating {}: {e}", path.display()));
    f.set_len(size).unwrap_or_else(|e| panic!("sizing {}: {e}", path.display()));
}

/// A file of `size` bytes, every one `byte`.
pub fn filled_file(path: &Path, size: u64, byte: u8) {
    std::fs::write(path, vec![byte; size as usize])
        .unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
}

/// Write `data` at `offset` of the existing file at `path` (no truncation).
pub fn write_at(path: &Path, offset: u64, data: &[u8]) {
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .unwrap_or_else(|e| panic!("opening {}: {e}", path.display()));
    f.seek(SeekFrom::Start(offset))
        .and_then(|_| f.write_all(data))
        .and_then(|_| f.sync_all())
        .unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
}

/// A named pipe (FIFO) at `path`, made with `mkfifo`.
pub fn mkfifo(path: &Path) {
    let made = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .unwrap_or_else(|e| panic!("mkfifo {}: {e}", path.display()));
    assert!(made.success(), "mkfifo {}: {made}", path.display());
}
