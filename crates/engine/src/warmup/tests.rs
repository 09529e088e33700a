//! Warmup in the engine: the monitor's log read back, preloaded blocks hit, and the
//! never-stale rule under every write policy a memory cache allows, with client writes
//! before and during the preload over a slow backing.

use crate::config::{EngineConfig, FormatSpec, VolumeConfig, VolumeSpec};
use crate::device::hooked::{Hooked, Hooks};
use crate::device::MemDevice;
use crate::warmup::{WarmupOptions, WarmupState};
use crate::{Engine, StartKind, Volume, WriteMode};
use ember_policy::admission::Aod;
use ember_policy::replacement::Lru;
use std::io;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

const BS: u64 = 4096;
const VOL_BLOCKS: u64 = 512;

/// A backing whose reads take `delay` (a slow disk), so client writes overlap the preload.
struct Slow {
    delay: Duration,
}

impl Hooks for Slow {
    fn describe(&self) -> String {
        "slow memory".into()
    }
    fn before_read(&self, _: u64, _: u64) -> io::Result<()> {
        std::thread::sleep(self.delay);
        Ok(())
    }
}

fn block(tag: u64, b: u64) -> Vec<u8> {
    (0..BS)
        .map(|i| (i.wrapping_mul(7) ^ b.wrapping_mul(13) ^ tag.wrapping_mul(101)) as u8)
        .collect()
}

fn backing(delay: Duration) -> Arc<Hooked<Slow>> {
    let mut bytes = Vec::with_capacity((VOL_BLOCKS * BS) as usize);
    for b in 0..VOL_BLOCKS {
        bytes.extend(block(0, b));
    }
    Arc::new(Hooked::wrap(Arc::new(MemDevice::from_bytes(bytes)), Slow { delay }))
}

/// A fresh memory cache of `cache_blocks` data blocks (about) over `backing`.
fn open(backing: &Arc<Hooked<Slow>>, mode: WriteMode) -> Engine {
    let cache = Arc::new(MemDevice::new(8 << 20));
    let mut spec = FormatSpec::new(vec![VolumeSpec { name: "a".into(), size: VOL_BLOCKS * BS }]);
    spec.journal_bytes = 0;
    Engine::format(cache.as_ref(), &spec).unwrap();
    let e = Engine::open(EngineConfig {
        cache,
        volumes: vec![VolumeConfig { name: "a".into(), backing: backing.clone() }],
        write_mode: mode,
        replacement: Box::new(|cap| Box::new(Lru::new(cap))),
        admission: Box::new(Aod),
    })
    .unwrap();
    assert_eq!(e.open_report().start, StartKind::Fresh);
    e
}

fn opts(log: &Path) -> WarmupOptions {
    let mut o = WarmupOptions::new(log.to_path_buf());
    o.region_bytes = BS;
    o.log_bytes = 1 << 20;
    o
}

fn wait_done(e: &Engine) {
    let t = Instant::now();
    while e.warmup_stats().state != WarmupState::Done {
        assert!(t.elapsed() < Duration::from_secs(60), "preload did not finish");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn read(v: &Volume, b: u64) -> Vec<u8> {
    let mut buf = vec![0u8; BS as usize];
    v.read(b * BS, &mut buf).unwrap();
    buf
}

#[test]
fn logged_reads_are_preloaded_and_hit_after_a_cold_start() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("w.log");
    let back = backing(Duration::ZERO);
    let e = open(&back, WriteMode::WriteThrough);
    let start = e.start_warmup(&opts(&log)).unwrap();
    assert_eq!(start.planned_blocks, 0);
    assert!(start.line.contains("no warmup log"), "{}", start.line);
    let v = e.volume("a").unwrap();
    for b in [3, 5, 7, 200, 201] {
        assert_eq!(read(&v, b), block(0, b));
    }
    e.shutdown().unwrap();
    assert_eq!(e.warmup_stats().log_bytes_written, 5 * 32);
    // The log reads as a trace of the five requests, in order.
    let (trace, _) = ember_trace::read_trace(&log, &Default::default()).unwrap();
    let got: Vec<u64> = trace.requests.iter().map(|r| r.offset / BS).collect();
    assert_eq!(got, vec![3, 5, 7, 200, 201]);
    drop(e);

    // A new (memory) cache: preload those five blocks; each then hits.
    let e = open(&back, WriteMode::WriteThrough);
    let start = e.start_warmup(&opts(&log)).unwrap();
    assert_eq!(start.planned_blocks, 5, "{}", start.line);
    wait_done(&e);
    let s = e.warmup_stats();
    assert_eq!((s.preloaded_blocks, s.preloaded_bytes), (5, 5 * BS));
    let v = e.volume("a").unwrap();
    for b in [3, 5, 7, 200, 201] {
        assert_eq!(read(&v, b), block(0, b));
    }
    let st = e.stats();
    assert_eq!((st.total.read_hits, st.total.read_misses), (5, 0));
    assert_eq!(read(&v, 9), block(0, 9));
    assert_eq!(e.stats().total.read_misses, 1);
}

/// Writes before the preload starts and while it runs must win over the preload's
/// (older) backing data, under every policy a memory cache runs.
#[test]
fn client_writes_before_and_during_preload_win() {
    for mode in [WriteMode::WriteBackFlush, WriteMode::WriteThrough, WriteMode::WriteAround] {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("w.log");
        let back = backing(Duration::from_millis(2));
        // History: every block read once.
        let e = open(&back, mode);
        e.start_warmup(&opts(&log)).unwrap();
        let v = e.volume("a").unwrap();
        for b in 0..VOL_BLOCKS {
            read(&v, b);
        }
        e.shutdown().unwrap();
        drop(e);

        let e = open(&back, mode);
        let v = e.volume("a").unwrap();
        let mut expect: Vec<Vec<u8>> = (0..VOL_BLOCKS).map(|b| block(0, b)).collect();
        // Before the preload: blocks 0..32 written.
        for b in 0..32 {
            let d = block(1, b);
            v.write(b * BS, &d, false).unwrap();
            expect[b as usize] = d;
        }
        let start = e.start_warmup(&opts(&log)).unwrap();
        assert_eq!(start.planned_blocks, VOL_BLOCKS, "{}", start.line);
        // During the preload: a client writes every third block, from the end (so many
        // writes land before the preload reaches the block, some after).
        let mut during = 0;
        for b in (32..VOL_BLOCKS).rev().step_by(3) {
            let d = block(2, b);
            v.write(b * BS, &d, false).unwrap();
            expect[b as usize] = d;
            if e.warmup_stats().state == WarmupState::Preloading {
                during += 1;
            }
        }
        assert!(during > 10, "{mode:?}: only {during} writes overlapped the preload");
        wait_done(&e);
        for b in 0..VOL_BLOCKS {
            assert!(read(&v, b) == expect[b as usize], "{mode:?}: block {b} is stale");
        }
        v.flush().unwrap();
        for b in 0..VOL_BLOCKS {
            let mut got = vec![0u8; BS as usize];
            back.inner().read_at(b * BS, &mut got).unwrap();
            assert!(got == expect[b as usize], "{mode:?}: backing block {b} after FLUSH");
        }
        let s = e.warmup_stats();
        // Write-around leaves written blocks uncached (on backing): nothing to skip there.
        let skipped = if mode == WriteMode::WriteAround { 0 } else { 32 };
        assert!(s.preloaded_blocks > 0 && s.preload_skipped_blocks >= skipped, "{mode:?}: {s:?}");
    }
}

#[test]
fn damaged_or_foreign_log_means_no_preload_and_a_reason() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("w.log");
    let back = backing(Duration::ZERO);
    let e = open(&back, WriteMode::WriteThrough);
    e.start_warmup(&opts(&log)).unwrap();
    let v = e.volume("a").unwrap();
    for b in 0..8 {
        read(&v, b);
    }
    e.shutdown().unwrap();
    drop(e);
    let good = std::fs::read(&log).unwrap();
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (
            {
                let mut b = good.clone();
                b[40] ^= 1;
                b
            },
            "checksum",
        ),
        (good[..good.len() / 2].to_vec(), "truncated"),
        (
            {
                let mut b = good.clone();
                b[4096 + 32 * 2 + 9] ^= 1;
                b
            },
            "damaged",
        ),
        (b"Timestamp,Hostname,DiskNumber\n".to_vec(), "magic"),
    ];
    for (bytes, why) in cases {
        std::fs::write(&log, &bytes).unwrap();
        let e = open(&back, WriteMode::WriteThrough);
        let start = e.start_warmup(&opts(&log)).unwrap();
        assert_eq!(start.planned_blocks, 0, "{why}");
        assert!(
            start.line.contains("starting cold") && start.line.contains(why),
            "{why}: {}",
            start.line
        );
        // Serving goes on, and the log is started anew.
        assert_eq!(read(&e.volume("a").unwrap(), 1), block(0, 1));
        e.shutdown().unwrap();
        let c = crate::warmup::log_file::read_existing(&log, None).unwrap().unwrap();
        assert_eq!(c.records.len(), 1);
    }
}
