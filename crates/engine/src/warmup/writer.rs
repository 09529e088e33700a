//! The log writer: a background thread that drains the staging buffer every 10 ms into the
//! warmup log (one or two sequential writes a batch), and on stop drains once more and syncs
//! the log. A failed write stops logging (the reason shows in the stats); it never fails a
//! client request.

use super::log_file::LogFile;
use super::monitor::Monitor;
use crate::core::Inner;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

/// How often the staging buffer is drained.
pub(crate) const INTERVAL: Duration = Duration::from_millis(10);

/// The thread body. `map[engine volume id]` is the log's volume index.
pub(crate) fn run(
    inner: Arc<Inner>,
    monitor: Arc<Monitor>,
    mut log: LogFile,
    map: Vec<Option<u8>>,
    stop: Arc<AtomicBool>,
) {
    let mut batch = Vec::with_capacity(monitor.capacity_bytes() as usize / 32);
    let mut failed = false;
    loop {
        let stopping = stop.load(Relaxed);
        batch.clear();
        monitor.drain(&mut batch);
        if !batch.is_empty() && !failed {
            match log.append(&batch, |v| map.get(v as usize).copied().flatten()) {
                Ok(n) => {
                    inner.warmup.counters.log_bytes.fetch_add(n, Relaxed);
                }
                Err(e) => {
                    failed = true;
                    inner
                        .warmup
                        .counters
                        .set_reason(format!("writing the warmup log failed, logging stopped: {e}"));
                }
            }
        }
        if stopping {
            if !failed {
                let _ = log.sync();
            }
            return;
        }
        std::thread::park_timeout(INTERVAL);
    }
}
