//! A run of consecutive block accesses of a trace, as [`crate::BlockReader`] fills it: block
//! keys, per-access flags and, when asked, request times, in parallel vectors.

/// Flag bit of an access that is a write.
pub const FLAG_WRITE: u8 = 1;
/// Flag bit of the first block access of its request.
pub const FLAG_FIRST: u8 = 2;

/// A run of consecutive block accesses of a trace.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BlockChunk {
    /// Block keys ([`crate::block_key`]), one per access.
    pub keys: Vec<u64>,
    /// Per access: [`FLAG_WRITE`] and [`FLAG_FIRST`].
    pub flags: Vec<u8>,
    /// Request time in nanoseconds, one per access; empty when the reader keeps no times.
    pub times: Vec<u64>,
}

impl BlockChunk {
    /// An empty chunk with room for `accesses` accesses (and their times if `times`).
    pub fn with_capacity(accesses: usize, times: bool) -> Self {
        Self {
            keys: Vec::with_capacity(accesses),
            flags: Vec::with_capacity(accesses),
            times: if times { Vec::with_capacity(accesses) } else { Vec::new() },
        }
    }

    /// Number of block accesses.
    #[inline]
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// True if the chunk holds no access.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Number of requests that start in this chunk.
    pub fn requests(&self) -> u64 {
        self.flags.iter().map(|&f| u64::from(f & FLAG_FIRST != 0)).sum()
    }

    /// Forget every access, keeping the memory.
    pub fn clear(&mut self) {
        self.keys.clear();
        self.flags.clear();
        self.times.clear();
    }
}
