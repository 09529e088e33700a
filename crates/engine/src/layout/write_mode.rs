//! The write policies as the cache device records them: the code of the policy a cache last
//! ran under (superblock offset 52) and of a live switch (offsets 184 and 188), with their
//! names on the command line.

use serde::Serialize;

/// The write policy a cache ran under (recorded so recovery knows whether dirty data may
/// exist: only the write-back policies of the next layout user leave any).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum WriteMode {
    /// Write-through: writes go to backing and to the cache (allocating if admitted).
    #[default]
    WriteThrough,
    /// Write-around: writes go to backing; cached copies are updated, nothing is allocated.
    WriteAround,
    /// Write-back flush (thesis 3.1): a FLUSH writes the closed epochs' dirty blocks to
    /// backing and syncs it before it is acknowledged; survives losing the cache device.
    WriteBackFlush,
    /// Write-back persist (thesis 3.2): a FLUSH atomically persists the dirty map on the
    /// cache device; survives a crash with the cache device intact.
    WriteBackPersist,
    /// Ordered write-back (Koller et al., FAST 2013; thesis 2.2 and table 3.1's third row):
    /// dirty blocks reach backing in epoch order (a FLUSH only closes the epoch and returns
    /// at once), so after any failure backing holds a consistent older state; acknowledged
    /// FLUSHes and FUA writes are not durable.
    OrderedWriteBack,
    /// Plain write-back that ignores FLUSH and FUA (thesis table 3.1's last row): for
    /// comparison only, a crash loses acknowledged writes.
    UnsafeWriteBack,
}

impl WriteMode {
    /// The policy's code on the device (superblock offset 52).
    pub(crate) fn code(self) -> u32 {
        match self {
            WriteMode::WriteThrough => 0,
            WriteMode::WriteAround => 1,
            WriteMode::WriteBackFlush => 2,
            WriteMode::WriteBackPersist => 3,
            WriteMode::UnsafeWriteBack => 4,
            WriteMode::OrderedWriteBack => 5,
        }
    }

    /// The policy of a code read from the device.
    pub(crate) fn from_code(c: u32) -> Option<Self> {
        Some(match c {
            0 => WriteMode::WriteThrough,
            1 => WriteMode::WriteAround,
            2 => WriteMode::WriteBackFlush,
            3 => WriteMode::WriteBackPersist,
            4 => WriteMode::UnsafeWriteBack,
            5 => WriteMode::OrderedWriteBack,
            _ => return None,
        })
    }

    /// Name as on the command line.
    pub fn name(self) -> &'static str {
        match self {
            WriteMode::WriteThrough => "write-through",
            WriteMode::WriteAround => "write-around",
            WriteMode::WriteBackFlush => "write-back-flush",
            WriteMode::WriteBackPersist => "write-back-persist",
            WriteMode::UnsafeWriteBack => "unsafe-write-back",
            WriteMode::OrderedWriteBack => "ordered-write-back",
        }
    }

    /// Every policy, in the order of thesis table 3.1 (slowest first).
    pub const ALL: [WriteMode; 6] = [
        WriteMode::WriteThrough,
        WriteMode::WriteAround,
        WriteMode::WriteBackFlush,
        WriteMode::OrderedWriteBack,
        WriteMode::WriteBackPersist,
        WriteMode::UnsafeWriteBack,
    ];

    /// True for the policies that keep dirty blocks on the cache device.
    pub fn is_write_back(self) -> bool {
        matches!(
            self,
            WriteMode::WriteBackFlush
                | WriteMode::WriteBackPersist
                | WriteMode::UnsafeWriteBack
                | WriteMode::OrderedWriteBack
        )
    }

    /// True for the policies whose dirty blocks reach backing epoch by epoch, so a rewrite
    /// of a block whose epoch is closed keeps the old version until the flusher wrote it
    /// (write-back flush, thesis 4.4.2; ordered write-back).
    pub fn keeps_closed_epochs(self) -> bool {
        matches!(self, WriteMode::WriteBackFlush | WriteMode::OrderedWriteBack)
    }
}

impl std::str::FromStr for WriteMode {
    type Err = String;

    /// Parse a `--write-policy` value: `write-through`, `write-around`, `write-back-flush`,
    /// `ordered-write-back`, `write-back-persist` or `unsafe-write-back`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        WriteMode::ALL.into_iter().find(|m| m.name() == s).ok_or_else(|| {
            let names: Vec<&str> = WriteMode::ALL.iter().map(|m| m.name()).collect();
            format!("unknown write policy {s:?} (one of: {})", names.join(", "))
        })
    }
}

impl std::fmt::Display for WriteMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
