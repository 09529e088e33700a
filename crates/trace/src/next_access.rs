//! Next-access times of a trace too long to hold, computed through temporary files.
//!
//! Belady's OPT and libCacheSim's oracleGeneral format need, for every block access, the
//! position of the next access to the same block: the future. [`Spool`] takes the trace's
//! block accesses chunk by chunk and writes them to unnamed temporary files (8 bytes of key,
//! 1 of flags and, if asked, 8 of time per access); [`Spool::finish`] then reads the keys
//! back from the last chunk to the first, keeping one map from each block to the position of
//! its latest-seen access, and writes each access's next-access position to a fourth file at
//! the access's own place. A [`NextAccessReader`] then streams chunks and their next-access
//! positions together, first to last.
//!
//! Memory: two buffers of [`PASS_ACCESSES`] accesses and the backward pass's map, whose
//! entries are the distinct blocks of the trace (a `u64` key and a `u64` position, 16 bytes in
//! a hash table at most 7/8 full that doubles as it grows: 18 to 37 bytes per distinct
//! block); never the trace. Disk: 17 bytes per access (25 with times), in
//! [`std::env::temp_dir`] (`TMPDIR`); the files are unlinked when created, so they vanish
//! with the process however it ends.

use std::collections::HashMap;
use std::fs::File;
use std::hash::{BuildHasherDefault, Hasher};
use std::io::{BufWriter, Write};
use std::os::unix::fs::FileExt;

use crate::BlockChunk;

/// Next-access position of an access whose block is never accessed again.
pub const NO_NEXT: u64 = u64::MAX;

/// Accesses read or written at a time by the backward pass and by [`NextAccessReader`].
pub const PASS_ACCESSES: usize = 1 << 18;

/// Multiplicative hashing of block keys (keys are already well spread or dense; this is
/// the FxHash step, without a dependency).
#[derive(Default, Clone, Copy)]
struct KeyHasher(u64);

impl Hasher for KeyHasher {
    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(5) ^ u64::from(b)).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
        }
    }
    #[inline]
    fn write_u64(&mut self, k: u64) {
        self.0 = (self.0.rotate_left(5) ^ k).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

type KeyMap = HashMap<u64, u64, BuildHasherDefault<KeyHasher>>;

/// The forward pass: block accesses written to temporary files as they are read.
pub struct Spool {
    keys: BufWriter<File>,
    flags: BufWriter<File>,
    times: Option<BufWriter<File>>,
    len: u64,
    requests: u64,
}

fn buffered(f: File) -> BufWriter<File> {
    BufWriter::with_capacity(1 << 20, f)
}

impl Spool {
    /// An empty spool in [`std::env::temp_dir`]; with `times`, it keeps each access's time.
    pub fn new(times: bool) -> std::io::Result<Self> {
        Ok(Self {
            keys: buffered(tempfile::tempfile()?),
            flags: buffered(tempfile::tempfile()?),
            times: if times { Some(buffered(tempfile::tempfile()?)) } else { None },
            len: 0,
            requests: 0,
        })
    }

    /// Append the accesses of `c` (with its times if the spool keeps them; a chunk without
    /// times then records time 0).
    pub fn push(&mut self, c: &BlockChunk) -> std::io::Result<()> {
        for &k in &c.keys {
            self.keys.write_all(&k.to_le_bytes())?;
        }
        self.flags.write_all(&c.flags)?;
        if let Some(t) = self.times.as_mut() {
            for i in 0..c.len() {
                t.write_all(&c.times.get(i).copied().unwrap_or(0).to_le_bytes())?;
            }
        }
        self.len += c.len() as u64;
        self.requests += c.requests();
        Ok(())
    }

    /// Block accesses spooled so far.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// True if nothing was spooled.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The backward pass: every access's next-access position, written to a fourth file.
    pub fn finish(self) -> std::io::Result<NextAccess> {
        let keys = self.keys.into_inner().map_err(|e| e.into_error())?;
        let flags = self.flags.into_inner().map_err(|e| e.into_error())?;
        let times = match self.times {
            Some(t) => Some(t.into_inner().map_err(|e| e.into_error())?),
            None => None,
        };
        let next = tempfile::tempfile()?;
        let mut last = KeyMap::default();
        let mut kbuf = vec![0u8; PASS_ACCESSES * 8];
        let mut nbuf = vec![0u8; PASS_ACCESSES * 8];
        let mut end = self.len;
        while end > 0 {
            let start = end.saturating_sub(PASS_ACCESSES as u64);
            let n = (end - start) as usize;
            keys.read_exact_at(&mut kbuf[..n * 8], start * 8)?;
            for i in (0..n).rev() {
                let k = u64::from_le_bytes(word(&kbuf, i));
                let pos = start + i as u64;
                let nx = last.insert(k, pos).unwrap_or(NO_NEXT);
                nbuf[i * 8..i * 8 + 8].copy_from_slice(&nx.to_le_bytes());
            }
            next.write_all_at(&nbuf[..n * 8], start * 8)?;
            end = start;
        }
        Ok(NextAccess {
            keys,
            flags,
            times,
            next,
            len: self.len,
            requests: self.requests,
            distinct: last.len() as u64,
        })
    }
}

#[inline]
fn word(buf: &[u8], i: usize) -> [u8; 8] {
    let mut w = [0u8; 8];
    w.copy_from_slice(&buf[i * 8..i * 8 + 8]);
    w
}

/// A spooled trace with every access's next-access position (the backward pass done).
pub struct NextAccess {
    keys: File,
    flags: File,
    times: Option<File>,
    next: File,
    len: u64,
    requests: u64,
    distinct: u64,
}

impl NextAccess {
    /// Block accesses.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// True if the trace has no block access.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Requests that touch at least one block.
    pub fn requests(&self) -> u64 {
        self.requests
    }

    /// Distinct blocks (the working-set size), counted by the backward pass.
    pub fn distinct(&self) -> u64 {
        self.distinct
    }

    /// A reader from the first access.
    pub fn reader(&self) -> NextAccessReader<'_> {
        NextAccessReader { spool: self, pos: 0, buf: Vec::new() }
    }
}

/// Reads a [`NextAccess`] spool forward, a chunk and its next-access positions at a time.
pub struct NextAccessReader<'a> {
    spool: &'a NextAccess,
    pos: u64,
    buf: Vec<u8>,
}

impl NextAccessReader<'_> {
    /// Clear `c` and `next` and fill them with up to `max` accesses (times too if the spool
    /// keeps them) and their next-access positions ([`NO_NEXT`] for a last access); false
    /// at the end.
    pub fn next_chunk(
        &mut self,
        c: &mut BlockChunk,
        next: &mut Vec<u64>,
        max: usize,
    ) -> std::io::Result<bool> {
        c.clear();
        next.clear();
        let n = (self.spool.len - self.pos).min(max.max(1) as u64) as usize;
        if n == 0 {
            return Ok(false);
        }
        let s = self.spool;
        self.buf.resize(n * 8, 0);
        s.keys.read_exact_at(&mut self.buf, self.pos * 8)?;
        c.keys.extend((0..n).map(|i| u64::from_le_bytes(word(&self.buf, i))));
        s.next.read_exact_at(&mut self.buf, self.pos * 8)?;
        next.extend((0..n).map(|i| u64::from_le_bytes(word(&self.buf, i))));
        if let Some(t) = &s.times {
            t.read_exact_at(&mut self.buf, self.pos * 8)?;
            c.times.extend((0..n).map(|i| u64::from_le_bytes(word(&self.buf, i))));
        }
        c.flags.resize(n, 0);
        s.flags.read_exact_at(&mut c.flags, self.pos)?;
        self.pos += n as u64;
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::FLAG_FIRST;

    /// The in-memory definition: one backward pass over the whole key list.
    fn whole(keys: &[u64]) -> (Vec<u64>, u64) {
        let mut next = vec![NO_NEXT; keys.len()];
        let mut last = std::collections::HashMap::new();
        for (i, &k) in keys.iter().enumerate().rev() {
            if let Some(j) = last.insert(k, i as u64) {
                next[i] = j;
            }
        }
        (next, last.len() as u64)
    }

    fn keys(n: usize, span: u64, seed: u64) -> Vec<u64> {
        let mut x = seed | 1;
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                // Half the accesses on a small hot set, so positions repeat across chunks.
                if x.is_multiple_of(2) {
                    x % 7
                } else {
                    x % span
                }
            })
            .collect()
    }

    #[test]
    fn hand_sequence() {
        let mut s = Spool::new(false).unwrap();
        let c =
            BlockChunk { keys: vec![1, 2, 1, 3, 2, 1], flags: vec![FLAG_FIRST; 6], times: vec![] };
        s.push(&c).unwrap();
        let f = s.finish().unwrap();
        assert_eq!((f.len(), f.requests(), f.distinct()), (6, 6, 3));
        let (mut got, mut next) = (BlockChunk::default(), Vec::new());
        let mut r = f.reader();
        assert!(r.next_chunk(&mut got, &mut next, 100).unwrap());
        assert_eq!(next, vec![2, 4, 5, NO_NEXT, NO_NEXT, NO_NEXT]);
        assert_eq!(got, c);
        assert!(!r.next_chunk(&mut got, &mut next, 100).unwrap());
    }

    /// Several lengths around the backward pass's block ([`PASS_ACCESSES`]), pushed and read
    /// in odd chunk sizes: positions, keys, flags and times equal the whole-list pass.
    #[test]
    fn equals_the_in_memory_pass_across_blocks_and_chunks() {
        for (n, push, read) in [
            (0usize, 10usize, 10usize),
            (1, 1, 1),
            (1000, 7, 333),
            (PASS_ACCESSES, 4096, PASS_ACCESSES),
            (PASS_ACCESSES * 2 + 12_345, 100_003, 77_777),
        ] {
            let k = keys(n, 50_000, n as u64 + 3);
            let (want, distinct) = whole(&k);
            let mut s = Spool::new(true).unwrap();
            for (j, part) in k.chunks(push).enumerate() {
                let c = BlockChunk {
                    keys: part.to_vec(),
                    flags: part.iter().map(|&x| (x % 4) as u8).collect(),
                    times: part.iter().map(|&x| x * 3 + j as u64).collect(),
                };
                s.push(&c).unwrap();
            }
            let f = s.finish().unwrap();
            assert_eq!((f.len(), f.distinct()), (n as u64, distinct), "n {n}");
            let (mut c, mut next) = (BlockChunk::default(), Vec::new());
            let (mut all_next, mut all_keys, mut all_flags, mut all_times) =
                (Vec::new(), Vec::new(), Vec::new(), Vec::new());
            let mut r = f.reader();
            while r.next_chunk(&mut c, &mut next, read).unwrap() {
                assert!(c.len() <= read && c.len() == next.len());
                all_next.extend_from_slice(&next);
                all_keys.extend_from_slice(&c.keys);
                all_flags.extend_from_slice(&c.flags);
                all_times.extend_from_slice(&c.times);
            }
            assert_eq!(all_next, want, "n {n}");
            assert_eq!(all_keys, k);
            assert_eq!(all_flags, k.iter().map(|&x| (x % 4) as u8).collect::<Vec<_>>());
            let times: Vec<u64> = k
                .chunks(push)
                .enumerate()
                .flat_map(|(j, p)| p.iter().map(move |&x| x * 3 + j as u64))
                .collect();
            assert_eq!(all_times, times);
        }
    }
}
