//! Files the tests make: sparse or filled images, single blocks overwritten behind a server's
//! back; and the stored fuzz corpora they replay.

use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

/// The stored corpus of the fuzz target `target` (`fuzz/corpus/TARGET`).
pub fn fuzz_corpus(target: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus").join(target)
}

/// Every file of the fuzz target `target`'s stored corpus, sorted, as (name, bytes); the
/// corpus must not be empty.
pub fn fuzz_inputs(target: &str) -> Vec<(String, Vec<u8>)> {
    let dir = fuzz_corpus(target);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .collect();
    files.sort();
    assert!(!files.is_empty(), "{}: empty corpus", dir.display());
    files
        .into_iter()
        .map(|p| {
            let name = p.file_name().expect("file name").to_string_lossy().into_owned();
            (name, std::fs::read(&p).expect("read corpus file"))
        })
        .collect()
}

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
