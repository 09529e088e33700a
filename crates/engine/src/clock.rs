//! The wall clock the engine stamps accesses and warmup records with. Imports nothing.

/// Nanoseconds since the Unix epoch, now (0 if the clock is before it).
pub(crate) fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}
