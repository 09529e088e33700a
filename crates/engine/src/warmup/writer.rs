//! The log writer: a background thread that drains the staging buffer every
//! `--warmup-log-interval` (10 ms) into the warmup log (one or two sequential writes a
//! batch), and on stop drains once more and syncs the log. A failed write stops logging (the
//! reason shows in the stats); it never fails a client request.
//!
//! With the performance snapshot, the same thread then copies the blocks of the batch that
//! are cached (through the engine's stripe locks, from the cache device: nothing on the
//! request path; [`Host::read_clean`]) into the snapshot's staging buffer, tagged with the
//! batch's newest record, and writes a segment whenever the buffer is full (after syncing the
//! backings, so every copy in a segment is durable on backing too). The log lives in a [`LogSink`] shared
//! with the FLUSH path: a FLUSH or FUA write drains the staging buffer into the log and syncs
//! it before it is acknowledged ([`LogSink::sync`]).

use super::host::Host;
use super::log_file::LogFile;
use super::monitor::{Entry, Monitor};
use super::snapshot_file::{SnapshotFile, Staging};
use super::stats::Counters;
use crate::device::AlignedBuf;
use parking_lot::Mutex;
use std::collections::HashSet;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

/// The warmup log being appended to, shared by the writer thread and the FLUSH path.
pub(crate) struct LogSink {
    log: LogFile,
    /// `map[engine volume id]` is the log's volume index.
    map: Vec<Option<u8>>,
    batch: Vec<Entry>,
    failed: bool,
    /// The snapshot's header side (none: no snapshot).
    snapshot: Option<SnapshotFile>,
    dropped_writes_seen: u64,
    /// Blocks logged by a FLUSH's drain, for the writer to copy (at most [`PENDING_MAX`]).
    pending: Vec<(u32, u8, u64)>,
}

/// Blocks a FLUSH's drains leave for the writer to copy, at most.
const PENDING_MAX: usize = 1 << 16;

impl LogSink {
    /// A sink for `log`.
    pub fn new(log: LogFile, map: Vec<Option<u8>>, snapshot: Option<SnapshotFile>) -> Self {
        LogSink {
            log,
            map,
            batch: Vec::new(),
            failed: false,
            snapshot,
            dropped_writes_seen: 0,
            pending: Vec::new(),
        }
    }

    /// Whether a FLUSH must sync the log (only the snapshot's rule needs it).
    pub fn has_snapshot(&self) -> bool {
        self.snapshot.is_some()
    }

    /// Drain what is staged into the log; with `touched`, add the (engine volume, log
    /// volume, block) of every logged access. Returns the newest record's sequence number.
    fn drain(
        &mut self,
        monitor: &Monitor,
        c: &Counters,
        touched: Option<&mut Vec<(u32, u8, u64)>>,
    ) -> u64 {
        // Read before draining: a write whose record was dropped was in place before the
        // count rose, so copies tagged below the log's next record may lack it.
        let dropped_writes = monitor.dropped_writes();
        self.batch.clear();
        monitor.drain(&mut self.batch);
        if !self.batch.is_empty() && !self.failed {
            let map = &self.map;
            match self.log.append(&self.batch, |v| map.get(v as usize).copied().flatten()) {
                Ok(n) => {
                    c.log_bytes.fetch_add(n, Relaxed);
                }
                Err(e) => self.fail(c, format!("writing the warmup log failed: {e}")),
            }
        }
        if dropped_writes != self.dropped_writes_seen && !self.failed {
            self.dropped_writes_seen = dropped_writes;
            let next = self.log.next_seq();
            if let Some(s) = self.snapshot.as_mut() {
                if let Err(e) = s.invalidate_before(next) {
                    self.fail(c, format!("writing the performance snapshot failed: {e}"));
                }
            }
        }
        // The blocks to copy: the writer's own drains take them with what FLUSHes left.
        let copy_to = match touched {
            Some(t) => {
                t.append(&mut self.pending);
                Some(t)
            }
            None if self.snapshot.is_some() => Some(&mut self.pending),
            None => None,
        };
        if let Some(t) = copy_to {
            'batch: for e in &self.batch {
                let Some(v) = self.map.get(e.volume as usize).copied().flatten() else { continue };
                for b in e.block..e.block + e.blocks {
                    if t.len() >= PENDING_MAX {
                        break 'batch;
                    }
                    t.push((e.volume, v, b));
                }
            }
        }
        self.log.next_seq() - 1
    }

    fn fail(&mut self, c: &Counters, why: String) {
        self.failed = true;
        c.set_reason(format!("{why}; logging stopped"));
    }

    /// The FLUSH rule: drain the staging buffer into the log and make the log durable.
    pub fn sync(&mut self, monitor: &Monitor, c: &Counters) -> io::Result<()> {
        self.drain(monitor, c, None);
        if self.failed {
            // Logging stopped: the snapshot must not be trusted past this point.
            return Ok(());
        }
        self.log.sync()
    }
}

/// The thread body.
pub(crate) fn run<H: Host>(
    host: Arc<H>,
    monitor: Arc<Monitor>,
    sink: Arc<Mutex<LogSink>>,
    mut staging: Option<Staging>,
    interval: Duration,
    stop: Arc<AtomicBool>,
) {
    let c = &host.hooks().counters;
    let mut touched = Vec::new();
    let mut buf = AlignedBuf::new(host.block_size() as usize);
    loop {
        let stopping = stop.load(Relaxed);
        touched.clear();
        let tag = sink.lock().drain(&monitor, c, staging.as_ref().map(|_| &mut touched));
        if let Some(s) = staging.as_mut() {
            copy_batch(&*host, s, &touched, tag, buf.as_mut_slice());
        }
        if stopping {
            let mut g = sink.lock();
            if !g.failed {
                if let Some(s) = staging.as_mut() {
                    write_segment(&*host, s);
                }
                let _ = g.log.sync();
                let states = backing_states(&*host, &g.map);
                if let Some(sf) = g.snapshot.as_mut() {
                    let _ = sf.sync();
                    let _ = sf.mark_clean(states);
                }
            }
            return;
        }
        std::thread::park_timeout(interval);
    }
}

/// Per log volume, its backing's state digest now (0: unknown).
fn backing_states<H: Host>(host: &H, map: &[Option<u8>]) -> Vec<u64> {
    let n = map.iter().flatten().map(|&v| v as usize + 1).max().unwrap_or(0);
    let mut states = vec![0u64; n];
    for (id, v) in map.iter().enumerate() {
        let (Some(v), Some(vol)) = (v, host.volume_by_id(id as u32)) else { continue };
        states[*v as usize] = vol.backing.identity().map(|i| i.state_digest()).unwrap_or(0);
    }
    states
}

/// Copy the cached blocks of `touched` into the staging buffer.
fn copy_batch<H: Host>(
    host: &H,
    s: &mut Staging,
    touched: &[(u32, u8, u64)],
    tag: u64,
    buf: &mut [u8],
) {
    let c = &host.hooks().counters;
    let mut seen = HashSet::new();
    for &(id, v, b) in touched {
        if !seen.insert((id, b)) {
            continue;
        }
        match host.read_clean(id, b, buf) {
            Ok(true) => {
                c.snapshot_copied_blocks.fetch_add(1, Relaxed);
                if s.stage(v, b, tag, buf) {
                    write_segment(host, s);
                }
            }
            Ok(false) => {
                c.snapshot_uncached_blocks.fetch_add(1, Relaxed);
            }
            Err(()) => return,
        }
    }
}

/// Write the staged copies as a segment, after syncing every backing: each copy is of data
/// already written to backing (write-through, or a clean block), so once the backings are
/// synced no crash can leave the snapshot holding data newer than backing.
fn write_segment<H: Host>(host: &H, s: &mut Staging) {
    let c = &host.hooks().counters;
    if s.is_empty() {
        return;
    }
    for v in host.volumes().iter() {
        if let Err(e) = v.backing.sync() {
            s.discard();
            c.set_reason(format!(
                "syncing backing {} before a snapshot segment failed, segment dropped: {e}",
                v.backing.describe()
            ));
            return;
        }
    }
    match s.write_segment() {
        Ok(n) => {
            c.snapshot_bytes.fetch_add(n, Relaxed);
        }
        Err(e) => c.set_reason(format!("writing the performance snapshot failed: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::warmup::snapshot_file::{path_for, read_snapshot, SnapshotHeader};
    use ember_trace::formats::warmup_log::{LogHeader, LogVolume};

    #[test]
    fn a_dropped_write_record_invalidates_every_copy_before_it_and_flush_logs_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("w.log");
        let header = LogHeader {
            slots: 64,
            log_id: 5,
            block_size: 4096,
            created_ns: 1,
            volumes: vec![LogVolume { name: "d".into(), size: 1 << 20, backing_medium: 7 }],
        };
        let (log, _) = LogFile::open(&p, None, header, None).unwrap();
        let snap = SnapshotFile::create(
            &path_for(&p),
            SnapshotHeader {
                block_size: 4096,
                log_id: 5,
                slots: 2,
                slot_blocks: 4,
                clean: false,
                invalid_before: 0,
                states: vec![0],
            },
        )
        .unwrap();
        let mut sink = LogSink::new(log, vec![Some(0)], Some(snap));
        let c = Counters::default();
        let m = Monitor::new(64); // two records
        m.record(0, false, 0, 4096, 4096);
        m.record(0, true, 4096, 4096, 4096);
        sink.sync(&m, &c).unwrap();
        // Both logged and durable; no drop: nothing invalidated; the blocks wait for the
        // writer's copies.
        let read = crate::warmup::log_file::read_existing(&p, None).unwrap().unwrap();
        assert_eq!(read.records.len(), 2);
        assert_eq!(read_snapshot(&path_for(&p)).unwrap().unwrap().header.invalid_before, 0);
        assert_eq!(sink.pending, vec![(0, 0, 0), (0, 0, 1)]);
        // Three writes into a two-record buffer: the third is dropped. The next sync
        // invalidates every copy tagged below the log's next record (5).
        for b in 2..5 {
            m.record(0, true, b * 4096, 4096, 4096);
        }
        assert_eq!(m.dropped_writes(), 1);
        sink.sync(&m, &c).unwrap();
        assert_eq!(read_snapshot(&path_for(&p)).unwrap().unwrap().header.invalid_before, 5);
        // A dropped read invalidates nothing more.
        for b in 0..3 {
            m.record(0, false, b * 4096, 4096, 4096);
        }
        sink.sync(&m, &c).unwrap();
        assert_eq!(read_snapshot(&path_for(&p)).unwrap().unwrap().header.invalid_before, 5);
    }
}
