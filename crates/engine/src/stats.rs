//! Counters: hits, misses, bytes, allocation-writes, evictions, per volume and in total.
//! Block counts are per cache block (a 64 KiB read of 4 KiB blocks counts 16 accesses).

use serde::Serialize;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};

/// Shards of [`HotCounters`]: threads beyond this many share shards.
const SHARDS: usize = 16;

/// The counters every read moves (requests, bytes, hits, misses, cache-device bytes), split
/// into per-thread shards of one cache line each and folded into the volume's counters on a
/// snapshot (a scrape): hits served on different threads do not bounce one line between
/// cores. Each thread takes a shard round-robin on its first read.
pub(crate) struct HotCounters {
    shards: Box<[HotShard]>,
}

/// One thread's share of [`HotCounters`].
#[derive(Default)]
#[repr(align(128))]
pub(crate) struct HotShard {
    pub read_requests: AtomicU64,
    pub read_bytes: AtomicU64,
    pub read_hits: AtomicU64,
    pub read_misses: AtomicU64,
    pub cache_read_bytes: AtomicU64,
}

impl Default for HotCounters {
    fn default() -> Self {
        HotCounters { shards: (0..SHARDS).map(|_| HotShard::default()).collect() }
    }
}

impl HotCounters {
    /// This thread's shard.
    pub fn mine(&self) -> &HotShard {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        thread_local! {
            static SHARD: usize = NEXT.fetch_add(1, Relaxed) % SHARDS;
        }
        &self.shards[SHARD.with(|s| *s)]
    }

    /// Add every shard into `s`.
    fn fold(&self, s: &mut VolumeStats) {
        for h in self.shards.iter() {
            s.read_requests += h.read_requests.load(Relaxed);
            s.read_bytes += h.read_bytes.load(Relaxed);
            s.read_hits += h.read_hits.load(Relaxed);
            s.read_misses += h.read_misses.load(Relaxed);
            s.cache_read_bytes += h.cache_read_bytes.load(Relaxed);
        }
    }
}

macro_rules! counters {
    ($($(#[$doc:meta])* $name:ident),* $(,)?) => {
        /// Live counters of one volume (atomics, updated by request threads; those every
        /// read moves are in per-thread shards, `hot`).
        #[derive(Default)]
        pub(crate) struct Counters { $(pub $name: AtomicU64,)* pub hot: HotCounters }

        /// A snapshot of one volume's counters (or their sum).
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
        pub struct VolumeStats { $($(#[$doc])* pub $name: u64,)* }

        impl Counters {
            pub fn snapshot(&self) -> VolumeStats {
                let mut s = VolumeStats { $($name: self.$name.load(Relaxed),)* };
                self.hot.fold(&mut s);
                s
            }
        }

        impl VolumeStats {
            /// Field-wise sum.
            pub fn add(&mut self, o: &VolumeStats) {
                $(self.$name += o.$name;)*
            }

            /// (name, value) pairs, in declaration order, for exporters (Prometheus text).
            pub fn fields(&self) -> Vec<(&'static str, u64)> {
                vec![$((stringify!($name), self.$name),)*]
            }
        }
    };
}

counters! {
    /// READ requests.
    read_requests,
    /// WRITE requests.
    write_requests,
    /// Bytes read by clients.
    read_bytes,
    /// Bytes written by clients.
    write_bytes,
    /// Block reads served from the cache device.
    read_hits,
    /// Block reads served from backing.
    read_misses,
    /// Block writes to a cached block.
    write_hits,
    /// Block writes to an uncached block.
    write_misses,
    /// Missed blocks written into the cache (SieveStore's allocation-writes).
    allocation_writes,
    /// Allocations refused because every reclaimable block was busy.
    allocations_skipped,
    /// Write misses the admission sieve refused under a write-back policy (written around
    /// the cache, to backing).
    admission_refusals,
    /// Missed blocks not allocated because they continued a sequential stream past the
    /// sequential cutoff (read from backing, or written around the cache).
    seq_cutoff_bypasses,
    /// Blocks NBD_CMD_CACHE loaded into the cache (prefetches; not hits, not misses).
    cache_loads,
    /// Blocks evicted by the replacement policy (or, under a discrete sieve, not chosen
    /// again at an epoch's end).
    evictions,
    /// Discrete sieves: chosen blocks already resident at an epoch's end, whose move was
    /// cancelled (SieveStore's cancelled moves).
    cancelled_moves,
    /// Cached blocks dropped by TRIM, WRITE_ZEROES, partial writes or failed I/O.
    invalidations,
    /// Bytes read from the cache device.
    cache_read_bytes,
    /// Bytes written to the cache device.
    cache_write_bytes,
    /// Bytes read from backing.
    backing_read_bytes,
    /// Bytes written to backing.
    backing_write_bytes,
    /// FLUSH requests.
    flushes,
    /// TRIM requests.
    trims,
    /// WRITE_ZEROES requests.
    write_zeroes,
    /// Requests that failed with an I/O error.
    io_errors,
    /// Blocks written to the cache device as dirty (write-back policies).
    dirty_writes,
    /// Blocks a write-back policy wrote through to backing (max_dirty reached, no free
    /// block, FUA under write-back flush, the volume's partial last block).
    write_through_fallbacks,
    /// Dirty blocks the flusher wrote to backing.
    flushed_blocks,
    /// Flusher batches that failed (backing or cache error); the blocks stay dirty and are
    /// retried.
    flush_errors,
    /// Cache-device read errors on clean blocks, served from backing instead.
    cache_read_errors,
    /// Cache-device write errors after backing had the data (a write-through update, an
    /// allocation-write): the copy was dropped and the request succeeded from backing.
    cache_write_errors,
    /// Requests served in degraded mode, from backing only.
    degraded_requests,
    /// Reads refused with EIO because they touched a block on the lost list.
    lost_reads,
    /// Write-back persist barriers committed to the journal.
    journal_commits,
    /// Write-back persist barriers that wrote a checkpoint instead.
    persist_checkpoints,
    /// Client tier (`--demote`): evicted clean blocks handed to backing as DEMOTEs.
    demotes_sent,
    /// Client tier: evicted clean blocks not demoted because backing's DEMOTE queue was full
    /// (or the copy could not be read from the cache device).
    demotes_dropped,
    /// Array tier (`--array-scheme`): blocks of DEMOTEs received.
    demotes_received,
    /// Array tier: demoted blocks stored in the cache (a full transfer).
    demotes_stored,
    /// Array tier: DEMOTEs aborted because the block was already cached (the scheme may
    /// still move it to the demoted position).
    demotes_aborted_cached,
    /// Array tier: DEMOTEs aborted for want of room (capacity 0, every block busy, a TRIM in
    /// progress on the block).
    demotes_aborted_no_room,
    /// Array tier: DEMOTEs refused as stale: the array acknowledged a write to the block
    /// after the demoting client got its copy (docs/design/architecture.md, "The stale rule").
    demotes_refused_stale,
    /// Array tier: DEMOTEs of absent blocks the admission sieve refused
    /// (`--demote-admission sieve`, docs/guide/demote.md).
    demotes_refused_sieve,
    /// Array tier: READ hits on blocks a DEMOTE stored.
    read_hits_demoted,
    /// Array tier: READ hits on blocks a READ (or a write) placed.
    read_hits_read_placed,
}

/// Everything the engine counts, as of one moment.
#[derive(Clone, Debug, Serialize)]
pub struct Stats {
    /// Cache block size in bytes.
    pub block_size: u32,
    /// Cache blocks in the data region.
    pub capacity_blocks: u64,
    /// Cache blocks holding data now.
    pub resident_blocks: u64,
    /// Per volume, by name, in superblock order.
    pub volumes: Vec<(String, VolumeStats)>,
    /// Sum over volumes.
    pub total: VolumeStats,
}

impl Stats {
    /// Read hit ratio over blocks (0 when nothing was read).
    pub fn read_hit_ratio(&self) -> f64 {
        let n = self.total.read_hits + self.total.read_misses;
        if n == 0 {
            0.0
        } else {
            self.total.read_hits as f64 / n as f64
        }
    }
}

impl Stats {
    /// The counters as Prometheus text exposition: one `ember_<counter>_total{volume="…"}`
    /// series per volume and counter, plus capacity and resident-block gauges.
    pub fn prometheus(&self) -> String {
        use std::fmt::Write;
        let mut out = String::new();
        let _ = writeln!(out, "# TYPE ember_cache_capacity_blocks gauge");
        let _ = writeln!(out, "ember_cache_capacity_blocks {}", self.capacity_blocks);
        let _ = writeln!(out, "# TYPE ember_cache_resident_blocks gauge");
        let _ = writeln!(out, "ember_cache_resident_blocks {}", self.resident_blocks);
        let names: Vec<&'static str> =
            VolumeStats::default().fields().iter().map(|f| f.0).collect();
        for (i, name) in names.iter().enumerate() {
            let _ = writeln!(out, "# TYPE ember_{name}_total counter");
            for (volume, s) in &self.volumes {
                let label = volume.replace('\\', "\\\\").replace('"', "\\\"");
                let _ =
                    writeln!(out, "ember_{name}_total{{volume=\"{label}\"}} {}", s.fields()[i].1);
            }
        }
        out
    }
}

/// The dirty map now (write-back policies): [`crate::Engine::dirty_stats`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct DirtyStats {
    /// Dirty block versions, all epochs.
    pub dirty_blocks: u64,
    /// Dirty block versions per epoch, oldest epoch first: (epoch, blocks).
    pub dirty_epochs: Vec<(u64, u64)>,
}

impl DirtyStats {
    /// Prometheus text: the gauges `ember_cache_dirty_blocks` and `ember_cache_dirty_epochs`.
    pub fn prometheus(&self) -> String {
        format!(
            "# TYPE ember_cache_dirty_blocks gauge\nember_cache_dirty_blocks {}\n\
             # TYPE ember_cache_dirty_epochs gauge\nember_cache_dirty_epochs {}\n",
            self.dirty_blocks,
            self.dirty_epochs.len()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reads counted on many threads (more than there are shards) all reach the snapshot,
    /// added to what the plain counters hold.
    #[test]
    fn sharded_read_counters_fold_into_the_snapshot() {
        let c = std::sync::Arc::new(Counters::default());
        c.cache_read_bytes.fetch_add(5, Relaxed);
        let threads: Vec<_> = (0..SHARDS as u64 + 3)
            .map(|t| {
                let c = c.clone();
                std::thread::spawn(move || {
                    for _ in 0..1000 {
                        let h = c.hot.mine();
                        h.read_requests.fetch_add(1, Relaxed);
                        h.read_bytes.fetch_add(4096, Relaxed);
                        h.read_hits.fetch_add(t, Relaxed);
                        h.read_misses.fetch_add(1, Relaxed);
                        h.cache_read_bytes.fetch_add(2, Relaxed);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let n = SHARDS as u64 + 3;
        let s = c.snapshot();
        assert_eq!(s.read_requests, 1000 * n);
        assert_eq!(s.read_bytes, 4096 * 1000 * n);
        assert_eq!(s.read_hits, 1000 * (0..n).sum::<u64>());
        assert_eq!(s.read_misses, 1000 * n);
        assert_eq!(s.cache_read_bytes, 2000 * n + 5);
    }

    #[test]
    fn prometheus_text_has_one_series_per_volume_and_counter() {
        let a = VolumeStats { read_hits: 7, ..Default::default() };
        let b = VolumeStats { evictions: 3, ..Default::default() };
        let s = Stats {
            block_size: 4096,
            capacity_blocks: 100,
            resident_blocks: 42,
            volumes: vec![("web".into(), a), ("db\"1".into(), b)],
            total: VolumeStats::default(),
        };
        let t = s.prometheus();
        let d = DirtyStats { dirty_blocks: 5, dirty_epochs: vec![(3, 2), (4, 3)] }.prometheus();
        assert!(d.contains("ember_cache_dirty_blocks 5\n") && d.contains("epochs 2\n"), "{d}");
        assert!(t.contains("ember_cache_resident_blocks 42\n"), "{t}");

        assert!(t.contains("ember_read_hits_total{volume=\"web\"} 7\n"), "{t}");
        assert!(t.contains("ember_evictions_total{volume=\"db\\\"1\"} 3\n"), "{t}");
        let series = t.lines().filter(|l| l.starts_with("ember_") && l.contains("_total{")).count();
        assert_eq!(series, 2 * a.fields().len());
    }
}
