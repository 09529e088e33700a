//! A flusher batch reads its versions from the cache device in runs of consecutive cache
//! blocks, one read a run, whatever the order of their keys, and every byte reaches backing
//! at its own block.

use super::tests::{block, devices, open, BS, VOL};
use crate::device::hooked::{Hooked, Hooks};
use crate::layout::block_key;
use crate::{DirtyLimit, WriteMode, WritebackConfig};
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
use std::sync::Arc;

/// A cache device that counts its reads.
#[derive(Default)]
struct CountingReads {
    reads: AtomicU64,
}

impl Hooks for CountingReads {
    fn describe(&self) -> String {
        "counting reads".into()
    }
    fn before_read(&self, _: u64, _: u64) -> std::io::Result<()> {
        self.reads.fetch_add(1, SeqCst);
        Ok(())
    }
}

/// Blocks of a batch.
const BATCH: u64 = 16;

/// Write every block of the volume once, in the order `order`, flush on demand, and return
/// the cache blocks the keys had (in key order) and the cache-device reads of the flush.
fn flush_written_in(order: &[u64]) -> (Vec<u32>, u64) {
    let (cache, mem) = devices();
    let counting = Arc::new(Hooked::wrap(cache, CountingReads::default()));
    let wb = WritebackConfig {
        max_dirty: Some(DirtyLimit::Blocks(200)),
        min_dirty: Some(DirtyLimit::Blocks(100)),
        max_epochs: 4,
        batch_blocks: BATCH as usize,
        lru_flush_order: false,
    };
    let e = open(counting.clone(), mem.clone(), WriteMode::WriteBackFlush, wb).unwrap();
    let v = e.volume("v").unwrap();
    for &b in order {
        v.write(b * BS, &block(b as u8 + 1), false).unwrap();
    }
    let n = VOL / BS;
    let placed: Vec<u32> = {
        let st = e.inner.state.lock();
        (0..n).map(|b| st.get(block_key(0, b)).unwrap()).collect()
    };
    let reads0 = counting.reads.load(SeqCst);
    e.flush_all(&mut |_| {}).unwrap();
    let reads = counting.reads.load(SeqCst) - reads0;
    assert_eq!(e.dirty_stats().dirty_blocks, 0);
    let all = mem.snapshot();
    for b in 0..n {
        let got = &all[(b * BS) as usize..((b + 1) * BS) as usize];
        assert_eq!(got, &block(b as u8 + 1)[..], "block {b} on backing");
    }
    (placed, reads)
}

/// The runs of consecutive cache blocks in each batch of `placed` (cache blocks in key
/// order, batches of [`BATCH`] keys).
fn runs(placed: &[u32]) -> u64 {
    placed
        .chunks(BATCH as usize)
        .map(|batch| {
            let mut sorted = batch.to_vec();
            sorted.sort_unstable();
            1 + sorted.windows(2).filter(|w| w[1] != w[0] + 1).count() as u64
        })
        .sum()
}

#[test]
fn a_volume_written_backwards_is_read_one_run_a_batch() {
    let n = VOL / BS;
    // The free list hands out ascending cache blocks: written from the last block down, the
    // versions lie on the device in descending order of their keys.
    let order: Vec<u64> = (0..n).rev().collect();
    let (placed, reads) = flush_written_in(&order);
    assert!(placed.windows(2).all(|w| w[1] + 1 == w[0]), "descending on the device: {placed:?}");
    assert_eq!(reads, n / BATCH, "one cache read a batch");
}

#[test]
fn a_volume_written_in_any_order_is_read_one_read_a_run_and_lands_whole() {
    let n = VOL / BS;
    // Ascending (in place), and shuffled (runs of every length, copied to their places).
    let ascending: Vec<u64> = (0..n).collect();
    let (placed, reads) = flush_written_in(&ascending);
    assert_eq!(reads, runs(&placed));
    assert_eq!(reads, n / BATCH, "one cache read a batch");
    let mut x = 7u64;
    let mut shuffled = ascending.clone();
    for i in (1..shuffled.len()).rev() {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        shuffled.swap(i, (x >> 33) as usize % (i + 1));
    }
    let (placed, reads) = flush_written_in(&shuffled);
    assert_eq!(reads, runs(&placed), "one cache read a run of consecutive cache blocks");
    // Pairs written one after the other: runs of two, in either order.
    let pairs: Vec<u64> = (0..n / 2).flat_map(|p| [2 * p + 1, 2 * p]).collect();
    let (placed, reads) = flush_written_in(&pairs);
    assert_eq!(reads, runs(&placed));
    assert!(reads < n / 2, "{reads} reads for {n} blocks written in reversed pairs");
}
