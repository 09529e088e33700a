//! The sequential cutoff's settings while serving (`ember ctl set seq-cutoff ...`, or at
//! start from the configuration): in bytes here, in blocks in the policy
//! ([`ember_policy::seq_cutoff`]). A change takes effect at the next client access; the
//! streams seen so far are kept (the stream count is fixed per cache), and nothing cached
//! changes: the cutoff only decides what a later miss allocates.

use crate::core::Inner;
use ember_policy::seq_cutoff::{CutoffPolicy, SeqCutoffConfig, DEFAULT_STREAMS};
use serde::Serialize;

/// The sequential cutoff in force.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct SeqCutoffSettings {
    /// When it acts: `always`, `full` (only when the cache is full) or `never`.
    pub policy: CutoffPolicy,
    /// Read streams longer than this many bytes are not allocated (0: reads never cut).
    pub read_bytes: u64,
    /// Write streams longer than this many bytes are not allocated (0: writes never cut).
    pub write_bytes: u64,
    /// Streams tracked per volume.
    pub streams: usize,
}

impl Default for SeqCutoffSettings {
    /// Off.
    fn default() -> Self {
        Self {
            policy: CutoffPolicy::Never,
            read_bytes: 0,
            write_bytes: 0,
            streams: DEFAULT_STREAMS,
        }
    }
}

/// The settings in force.
pub(crate) fn get(inner: &Inner) -> SeqCutoffSettings {
    let bs = inner.block_size();
    // The copy beside the state: `status` reads it without the lock every request takes.
    let cfg = *inner.seq_cutoff.lock();
    SeqCutoffSettings {
        policy: cfg.policy,
        read_bytes: cfg.read_blocks * bs,
        write_bytes: cfg.write_blocks * bs,
        streams: cfg.streams,
    }
}

/// Put `s` in force (thresholds rounded up to whole blocks); returns what is in force now.
pub(crate) fn set(inner: &Inner, s: SeqCutoffSettings) -> SeqCutoffSettings {
    let mut cfg =
        SeqCutoffConfig::from_bytes(s.policy, s.read_bytes, s.write_bytes, inner.block_size());
    cfg.streams = s.streams.max(1);
    let mut copy = inner.seq_cutoff.lock();
    let mut st = inner.state.lock();
    st.seq_cutoff.set_config(cfg);
    *copy = st.seq_cutoff.config();
    drop(st);
    drop(copy);
    get(inner)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::MemDevice;
    use crate::live::tests::lazy;
    use crate::wb::tests::{block, format, open, BS, VOL};
    use crate::{Engine, WriteMode};
    use std::sync::Arc;

    fn engine(mode: WriteMode) -> (Engine, Arc<MemDevice>) {
        let cache = Arc::new(MemDevice::new(1 << 20));
        format(cache.as_ref());
        let backing = Arc::new(MemDevice::new(VOL));
        (open(cache, backing.clone(), mode, lazy()).unwrap(), backing)
    }

    fn always(blocks: u64) -> SeqCutoffSettings {
        SeqCutoffSettings {
            policy: CutoffPolicy::Always,
            read_bytes: blocks * BS,
            write_bytes: blocks * BS,
            streams: 4,
        }
    }

    #[test]
    fn write_back_writes_a_cut_stream_through_and_reads_return_the_latest_bytes() {
        for mode in
            [WriteMode::WriteBackFlush, WriteMode::WriteBackPersist, WriteMode::OrderedWriteBack]
        {
            let (e, backing) = engine(mode);
            assert_eq!(e.set_seq_cutoff(always(4)), always(4));
            let v = e.volume("v").unwrap();
            let mut model = vec![0u8; VOL as usize];
            let mut put = |b: u64, byte: u8| {
                let data = block(byte);
                v.write(b * BS, &data, false).unwrap();
                model[(b * BS) as usize..((b + 1) * BS) as usize].copy_from_slice(&data);
            };
            // A sequential stream of 32 one-block writes: 4 allocated dirty, 28 cut.
            for b in 0..32 {
                put(b, b as u8 + 1);
            }
            // A rewrite of an allocated block (a hit, still dirty) and of a cut one (a
            // miss starting a new stream: allocated dirty), then a second pass of the
            // stream's tail, which continues past the threshold again.
            put(2, 200);
            put(20, 201);
            for b in 24..32 {
                put(b, 100 + b as u8);
            }
            let dirty = e.dirty_stats().dirty_blocks;
            let s = e.stats().total;
            assert_eq!(s.seq_cutoff_bypasses, 28 + 4, "{mode:?}: {s:?}");
            assert_eq!(dirty, 4 + 1 + 4, "{mode:?}: only allocated blocks are dirty");
            // Every cut block's latest bytes are on backing already: nothing of it is dirty.
            let on_backing = backing.snapshot();
            for b in (4..20).chain(21..24).chain(28..32) {
                let at = (b * BS) as usize..((b + 1) * BS) as usize;
                assert_eq!(on_backing[at.clone()], model[at], "{mode:?}: block {b} on backing");
            }
            let mut got = vec![0u8; VOL as usize];
            v.read(0, &mut got).unwrap();
            assert!(got == model, "{mode:?}: reads return the latest bytes");
        }
    }

    #[test]
    fn a_read_scan_past_the_threshold_leaves_the_hot_blocks_cached() {
        let (e, _) = engine(WriteMode::WriteThrough);
        e.set_seq_cutoff(always(4));
        let v = e.volume("v").unwrap();
        let mut buf = vec![0u8; BS as usize];
        // Hot blocks 60..64, read twice (a reverse order: no stream).
        for _ in 0..2 {
            for b in (60..64).rev() {
                v.read(b * BS, &mut buf).unwrap();
            }
        }
        for b in 0..40 {
            v.read(b * BS, &mut buf).unwrap();
        }
        let s = e.stats();
        assert_eq!(s.total.seq_cutoff_bypasses, 36);
        assert_eq!(s.resident_blocks, 4 + 4, "the hot blocks and the stream's first 4");
        let status = e.status();
        assert_eq!(status.seq_cutoff, always(4));
        assert_eq!(status.volumes[0].seq_cutoff_bypasses, 36);
        // Off again: a scan allocates every block.
        e.set_seq_cutoff(SeqCutoffSettings::default());
        for b in 0..40 {
            v.read(b * BS, &mut buf).unwrap();
        }
        assert_eq!(e.stats().total.seq_cutoff_bypasses, 36);
        assert_eq!(e.stats().resident_blocks, 44);
    }
}
