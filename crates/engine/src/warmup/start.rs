//! Starting and stopping warmup on an open engine: read the existing log, decide whether to
//! preload (only when the cache started without a valid map), plan it, then open the log for
//! appending and start the monitor, the log writer and the preloader, each thread holding
//! the engine as its [`Host`].

use super::host::Host;
use super::log_file::{read_existing, LogFile, Region};
use super::monitor::Monitor;
use super::options::WarmupOptions;
use super::plan::{plan, Plan, Served};
use super::preload::Source;
use super::snapshot_file::{path_for, read_snapshot, SnapshotFile, SnapshotHeader, HEADER_SIZE};
use super::snapshot_plan::{usable, StateNow};
use super::stats::WarmupState;
use super::writer::LogSink;
use crate::clock::now_ns;
use crate::error::EngineError;
use ember_trace::formats::warmup_log::{
    LogContents, LogHeader, LogVolume, HEADER_SIZE as LOG_HEADER_SIZE, MAX_SLOTS, RECORD_SIZE,
};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::thread::JoinHandle;

/// How warmup started.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WarmupStart {
    /// Blocks the preload plans (0: no preload).
    pub planned_blocks: u64,
    /// One line for the console: what is preloaded, or why nothing is.
    pub line: String,
}

/// The threads of a started warmup.
pub(crate) struct Running {
    stop: Arc<AtomicBool>,
    writer: Option<JoinHandle<()>>,
    preloader: Option<JoinHandle<()>>,
}

impl Running {
    /// The preloader is running.
    pub fn preloading(&self) -> bool {
        self.preloader.as_ref().is_some_and(|h| !h.is_finished())
    }

    /// Run `preloader` in place of the one that ended, under the same stop flag.
    pub fn set_preloader(&mut self, preloader: JoinHandle<()>) {
        if let Some(h) = self.preloader.replace(preloader) {
            let _ = h.join();
        }
    }

    /// The flag that stops the threads.
    pub fn stop_flag(&self) -> Arc<AtomicBool> {
        self.stop.clone()
    }

    /// Stop the preloader and the writer (which drains and syncs the log first).
    pub fn stop(mut self) {
        self.stop.store(true, Relaxed);
        for h in [self.preloader.take(), self.writer.take()].into_iter().flatten() {
            h.thread().unpark();
            let _ = h.join();
        }
    }
}

/// Start warmup on `host`; `warm` says the cache loaded a map (no preload then).
pub(crate) fn start<H: Host>(
    host: &Arc<H>,
    warm: bool,
    opts: &WarmupOptions,
) -> Result<WarmupStart, EngineError> {
    let hooks = host.hooks();
    if hooks.monitor.get().is_some() {
        return Err(EngineError::Config("warmup is already started".into()));
    }
    if !(4096..=1 << 20).contains(&opts.region_bytes) {
        return Err(EngineError::Config(format!(
            "warmup region of {} bytes: it must be 4 KiB to 1 MiB",
            opts.region_bytes
        )));
    }
    let region = if opts.in_cache {
        let g = host.geometry();
        if g.warmup_len < (LOG_HEADER_SIZE + RECORD_SIZE) as u64 {
            return Err(EngineError::Config(
                "--warmup-log cache: the cache device has no warmup-log region (format it with \
                 `ember cache format --warmup-log SIZE`; a memory cache has none)"
                    .into(),
            ));
        }
        if opts.snapshot.is_some() {
            return Err(EngineError::Config(
                "--warmup-snapshot needs the warmup log in its own file (the snapshot is a file \
                 beside it), not in the cache device"
                    .into(),
            ));
        }
        Some(Region { base: g.warmup_offset, len: g.warmup_len })
    } else {
        None
    };
    let log_bytes = region.map_or(opts.log_bytes, |r| r.len - LOG_HEADER_SIZE as u64);
    let mut slots = log_bytes / RECORD_SIZE as u64;
    if region.is_some() {
        slots = slots.min(MAX_SLOTS);
    }
    if slots == 0 || slots > MAX_SLOTS {
        return Err(EngineError::Config(format!(
            "a warmup log of {} bytes: it holds 1 to {MAX_SLOTS} records of {RECORD_SIZE} bytes",
            opts.log_bytes
        )));
    }
    let bs = host.block_size();
    let served = served_volumes(host.as_ref());
    let path = if opts.in_cache {
        format!("{} (its layout's region)", opts.log.display())
    } else {
        opts.log.display().to_string()
    };
    let existing = read_existing(&opts.log, region);
    let mut the_plan = Plan::default();
    let mut source = Source { snapshot: None, copies: Vec::new() };
    let line = match (&existing, opts.selector) {
        _ if warm => "no preload: the cache started warm (its map was loaded)".to_string(),
        (_, None) => "no preload: no warmup selector (monitoring only)".to_string(),
        (Err(why), _) => {
            format!("no preload, starting cold: the warmup log {path} is unusable: {why}")
        }
        (Ok(None), _) => format!("no preload, starting cold: no warmup log at {path} yet"),
        (Ok(Some(log)), Some(kind)) => {
            let budget = opts.size.blocks(host.geometry().data_blocks, bs);
            match plan(log, &served, bs, kind, opts.seed, budget, opts.region_bytes) {
                Err(why) => {
                    format!("no preload, starting cold: the warmup log {path} is unusable: {why}")
                }
                Ok(p) if p.blocks == 0 => format!(
                    "no preload: the warmup log {path} holds no access to the served volumes"
                ),
                Ok(p) => {
                    let mut l = format!(
                        "preloading {} blocks ({} runs) in the background, {} of {} logged \
                         requests, {} KiB regions",
                        p.blocks,
                        p.runs.len(),
                        kind,
                        log.records.len(),
                        opts.region_bytes >> 10
                    );
                    if log.torn > 0 {
                        l += &format!("; {} torn records of the last write dropped", log.torn);
                    }
                    for n in &p.notes {
                        l += &format!("; {n}");
                    }
                    if opts.snapshot.is_some() {
                        let (snap_line, src) =
                            snapshot_source(&**host, &opts.log, log, &served, &p);
                        l += &format!("; {snap_line}");
                        source = src;
                    }
                    the_plan = p;
                    l
                }
            }
        }
    };
    // The plan is in memory: the log may now be appended to (or created anew).
    let wanted = LogHeader {
        slots,
        log_id: rand::random::<u64>() | 1,
        block_size: bs as u32,
        created_ns: now_ns(),
        volumes: served
            .iter()
            .map(|s| LogVolume { name: s.name.clone(), size: s.size, backing_medium: s.medium })
            .collect(),
    };
    let prior = existing.as_ref().ok().and_then(|o| o.as_ref());
    let (log, _resumed) =
        LogFile::open(&opts.log, region, wanted, prior).map_err(EngineError::Io)?;
    let max_id = served.iter().map(|s| s.id).max().unwrap_or(0) as usize;
    let mut map = vec![None; max_id + 1];
    for (i, s) in log.header().volumes.iter().enumerate() {
        if let Some(sv) = served.iter().find(|sv| sv.name == s.name) {
            map[sv.id as usize] = Some(i as u8);
        }
    }
    let (snapshot, staging) = match opts.snapshot {
        None => (None, None),
        Some(so) => {
            let slot_blocks = (so.staging_bytes / bs).max(1);
            let mut header = SnapshotHeader {
                block_size: bs as u32,
                log_id: log.header().log_id,
                slots: 1,
                slot_blocks,
                clean: false,
                invalid_before: 0,
                states: vec![0; log.header().volumes.len()],
            };
            header.slots = so.size_bytes.saturating_sub(HEADER_SIZE) / header.slot_bytes();
            if header.slots == 0 {
                return Err(EngineError::Config(format!(
                    "a performance snapshot of {} bytes cannot hold one staging buffer of {}                      bytes ({} bytes with its index and header)",
                    so.size_bytes,
                    so.staging_bytes,
                    HEADER_SIZE + header.slot_bytes()
                )));
            }
            let f = SnapshotFile::create(&path_for(&opts.log), header).map_err(EngineError::Io)?;
            let staging = f.staging();
            hooks.counters.snapshot_staging_bytes.store(slot_blocks * bs, Relaxed);
            (Some(f), Some(staging))
        }
    };
    let monitor = Arc::new(Monitor::new(opts.staging_bytes));
    let sink = Arc::new(parking_lot::Mutex::new(LogSink::new(log, map, snapshot)));
    let _ = hooks.sink.set(sink.clone());
    let c = &hooks.counters;
    c.planned_blocks.store(the_plan.blocks, Relaxed);
    c.set_reason(line.clone());
    c.set_state(if the_plan.blocks > 0 {
        WarmupState::Preloading
    } else {
        WarmupState::Monitoring
    });
    let _ = hooks.monitor.set(monitor.clone());
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (host, stop, interval) = (host.clone(), stop.clone(), opts.log_interval);
        std::thread::Builder::new()
            .name("ember-warmup-log".into())
            .spawn(move || super::writer::run(host, monitor, sink, staging, interval, stop))
            .map_err(EngineError::Io)?
    };
    let preloader = if the_plan.blocks > 0 {
        Some(spawn_preloader(host, the_plan.runs, source, stop.clone())?)
    } else {
        None
    };
    *hooks.running.lock() = Some(Running { stop, writer: Some(writer), preloader });
    *hooks.options.lock() = Some(opts.clone());
    Ok(WarmupStart { planned_blocks: the_plan.blocks, line })
}

/// The volumes `host` serves, as the preload plan names them.
pub(super) fn served_volumes<H: Host>(host: &H) -> Vec<Served> {
    host.volumes()
        .iter()
        .map(|v| Served {
            name: v.name.clone(),
            id: v.id,
            size: v.size,
            medium: v.backing.identity().map(|i| i.medium_digest()).unwrap_or(0),
        })
        .collect()
}

/// Start the preloader thread over `runs` (from `source`'s snapshot copies where it has
/// them); its last line goes to the counters' reason.
pub(super) fn spawn_preloader<H: Host>(
    host: &Arc<H>,
    runs: Vec<(u32, u64, u64)>,
    source: Source,
    stop: Arc<AtomicBool>,
) -> Result<JoinHandle<()>, EngineError> {
    let host = host.clone();
    std::thread::Builder::new()
        .name("ember-preload".into())
        .spawn(move || {
            let why = super::preload::run(&*host, &runs, source, &stop);
            let c = &host.hooks().counters;
            let mut line = format!(
                "preload {why}: {} blocks preloaded in {:.2} s, {} already cached",
                c.preloaded_blocks.load(Relaxed),
                c.preload_ns() as f64 / 1e9,
                c.skipped_blocks.load(Relaxed)
            );
            let snap = c.preloaded_snapshot_blocks.load(Relaxed);
            let bad = c.snapshot_bad_blocks.load(Relaxed);
            if snap > 0 || bad > 0 {
                line += &format!(", {snap} from the performance snapshot");
            }
            if bad > 0 {
                line += &format!(
                    " ({bad} of its copies unreadable or failing their checksum: read from \
                     backing)"
                );
            }
            c.set_reason(line);
        })
        .map_err(EngineError::Io)
}

/// The previous run's performance snapshot as a preload source for `p`: the line saying what
/// it gives (or why nothing), and the source. The snapshot file is renamed to
/// `PATH.snapshot.prev` for the preload to read while this run writes a new one.
fn snapshot_source<H: Host>(
    host: &H,
    log_path: &std::path::Path,
    log: &LogContents,
    served: &[Served],
    p: &Plan,
) -> (String, Source) {
    let none = Source { snapshot: None, copies: Vec::new() };
    let path = path_for(log_path);
    let snap = match read_snapshot(&path) {
        Ok(None) => return ("no performance snapshot yet: all from backing".into(), none),
        Err(why) => {
            return (
                format!(
                    "the performance snapshot {} is unusable ({why}): metadata-only preload, \
                     all from backing",
                    path.display()
                ),
                none,
            )
        }
        Ok(Some(s)) => s,
    };
    let state_now: StateNow = host
        .volumes()
        .iter()
        .map(|v| (v.id, v.backing.identity().map(|i| i.state_digest()).unwrap_or(0)))
        .collect();
    let u = usable(&snap, log, served, &state_now);
    let mut copies: Vec<_> = p
        .runs
        .iter()
        .flat_map(|&(v, first, n)| (first..first + n).map(move |b| (v, b)))
        .filter_map(|k| u.copies.get(&k).copied())
        .collect();
    copies.sort_by_key(|c| c.offset);
    let mut line = format!(
        "{} of them from the performance snapshot ({} segments",
        copies.len(),
        snap.segments.len()
    );
    if snap.unreadable > 0 {
        line += &format!(", {} unreadable or torn", snap.unreadable);
    }
    if u.refused > 0 {
        line += &format!(", {} copies older than a logged write or the log", u.refused);
    }
    line += ")";
    for n in &u.notes {
        line += &format!("; snapshot: {n}");
    }
    if copies.is_empty() {
        return (line, none);
    }
    let mut prev = path.clone().into_os_string();
    prev.push(".prev");
    let opened = std::fs::rename(&path, &prev).and_then(|()| std::fs::File::open(&prev));
    match opened {
        Ok(f) => (line, Source { snapshot: Some(f), copies }),
        Err(e) => (
            format!(
                "the performance snapshot {} cannot be opened ({e}): all from backing",
                path.display()
            ),
            none,
        ),
    }
}
