//! The cache device: a file (created at the size asked for), a block device, either one with
//! O_DIRECT, or memory (`mem:SIZE`, formatted at every start). A device without an ember
//! superblock is formatted only when the config says so.

use std::sync::Arc;

use anyhow::{anyhow, bail, Context};
use ember_engine::device::{FileDevice, FileOptions, MemDevice};
use ember_engine::layout::LayoutError;
use ember_engine::{Device, Engine, EngineError, FormatSpec, VolumeSpec, WriteMode};

use crate::config::CacheSettings;
use crate::console::Console;
use crate::size::parse_size;

impl CacheSettings {
    /// The size of a `mem:SIZE` device, or `None` for a cache file or device.
    pub fn memory_size(&self) -> anyhow::Result<Option<u64>> {
        let Some(size) = self.device.to_str().and_then(|s| s.strip_prefix("mem:")) else {
            return Ok(None);
        };
        let size = parse_size(size).map_err(|e| anyhow!("--cache mem:SIZE: {e}"))?;
        if size < 16 << 20 {
            bail!(
                "--cache mem:{size}: a memory cache needs at least 16M (layout and journal \
                 included)"
            );
        }
        Ok(Some(size))
    }
}

/// Why `mode` cannot run on a memory cache, if it cannot: a memory cache is lost at every
/// stop, so only the policies whose acknowledged writes reach backing at a FLUSH are safe.
pub fn refuse_on_memory(mode: WriteMode) -> Option<&'static str> {
    match mode {
        // Ordered write-back promises only a consistent backing after a loss of the cache,
        // which a memory cache is at every crash.
        WriteMode::WriteThrough
        | WriteMode::WriteAround
        | WriteMode::WriteBackFlush
        | WriteMode::OrderedWriteBack => None,
        WriteMode::WriteBackPersist => Some(
            "write-back-persist keeps acknowledged writes only on the cache device across a \
             FLUSH, and a memory cache loses them at every stop or crash; use write-back-flush \
             (dirty blocks reach backing at each FLUSH) or a cache file",
        ),
        WriteMode::UnsafeWriteBack => Some(
            "unsafe-write-back ignores FLUSH, so a memory cache would lose acknowledged writes \
             at every stop; use write-back-flush",
        ),
    }
}

/// Open the cache device of `c`, formatted for `volumes` if it is memory or if it holds no
/// superblock and `c.format_if_needed`.
pub fn open_cache(
    c: &CacheSettings,
    volumes: &[VolumeSpec],
    console: &dyn Console,
) -> anyhow::Result<Arc<dyn Device>> {
    if let Some(size) = c.memory_size()? {
        return open_memory_cache(c, size, volumes, console);
    }
    let exists = c.device.exists();
    if !exists && c.size.is_none() {
        bail!(
            "cache device {} does not exist; give --cache-size to create a cache file",
            c.device.display()
        );
    }
    let cache = FileDevice::open(
        &c.device,
        FileOptions { direct: c.direct, create_size: c.size.filter(|_| !exists), exclusive: true },
    )
    .with_context(|| format!("opening cache device {}", c.device.display()))?;
    match Engine::inspect(&cache) {
        Ok(_) => {}
        Err(EngineError::Layout(LayoutError::NotFormatted { .. })) if c.format_if_needed => {
            let mut spec = FormatSpec::new(volumes.to_vec());
            spec.block_size = c.block_size;
            Engine::format(&cache, &spec)
                .with_context(|| format!("formatting cache device {}", c.device.display()))?;
            console.say(&format!("formatted {} ({} bytes)", c.device.display(), cache.size()));
        }
        Err(e) => {
            return Err(anyhow!(e)).context(if c.format_if_needed {
                "the cache device cannot be used".to_string()
            } else {
                "the cache device cannot be used (give --format-if-needed to format a new one)"
                    .to_string()
            })
        }
    }
    Ok(Arc::new(cache))
}

/// A memory cache of `size` bytes, formatted for `volumes`.
fn open_memory_cache(
    c: &CacheSettings,
    size: u64,
    volumes: &[VolumeSpec],
    console: &dyn Console,
) -> anyhow::Result<Arc<dyn Device>> {
    if c.size.is_some() || c.direct {
        bail!(
            "--cache mem:SIZE takes its size from SIZE and has no O_DIRECT: drop --cache-size \
             and --direct"
        );
    }
    // Volatile: the engine refuses, at a live switch too, the policies it would lose
    // acknowledged writes under.
    let cache = MemDevice::volatile(size);
    let mut spec = FormatSpec::new(volumes.to_vec());
    spec.block_size = c.block_size;
    Engine::format(&cache, &spec).context("formatting the memory cache")?;
    console.say(&format!("memory cache of {size} bytes (empty: a memory cache starts cold)"));
    Ok(Arc::new(cache))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_cache_spec_and_refusals() {
        let size = |s: &str| CacheSettings::new(s).memory_size().map_err(|e| e.to_string());
        assert_eq!(size("mem:64M"), Ok(Some(64 << 20)));
        assert_eq!(size("/tmp/mem:64M"), Ok(None), "only a leading mem: names memory");
        assert_eq!(size("cache.img"), Ok(None));
        assert!(size("mem:lots").unwrap_err().contains("size \"lots\": not a number"));
        assert!(size("mem:1M").unwrap_err().contains("at least 16M"));
        for mode in [
            WriteMode::WriteThrough,
            WriteMode::WriteAround,
            WriteMode::WriteBackFlush,
            WriteMode::OrderedWriteBack,
        ] {
            assert_eq!(refuse_on_memory(mode), None, "{mode:?} is safe on memory");
        }
        assert!(refuse_on_memory(WriteMode::WriteBackPersist).unwrap().contains("loses them"));
        assert!(refuse_on_memory(WriteMode::UnsafeWriteBack).unwrap().contains("ignores FLUSH"));
    }
}
