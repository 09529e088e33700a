//! From a warmup log to the blocks to preload, as Bonfire section 5.2 does it and with the
//! laboratory's own code (`ember warmup run`, `crates/sim/src/warmup_experiment.rs`): every
//! logged block access is shown to the selector as its region (a run of `region_bytes`), the
//! selector picks regions, the warmup budget is spent from the most valuable end (a whole
//! region, or what is left of the budget), then the blocks are deduplicated, sorted by
//! address and merged into runs of at most [`CHUNK_BLOCKS`] blocks, each one large
//! read from backing.

use crate::stripes::CHUNK_BLOCKS;
use ember_policy::warmup::SelectorKind;
use ember_trace::formats::warmup_log::LogContents;

/// A served volume, as the plan needs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Served {
    /// Export name.
    pub name: String,
    /// Superblock index (the engine's volume number).
    pub id: u32,
    /// Size in bytes.
    pub size: u64,
    /// The backing's medium digest now (0 unknown).
    pub medium: u64,
}

/// What to preload.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Plan {
    /// (engine volume, first block, blocks), sorted, at most `CHUNK_BLOCKS` blocks each.
    pub runs: Vec<(u32, u64, u64)>,
    /// Blocks in all runs.
    pub blocks: u64,
    /// Log volumes left out, and why.
    pub notes: Vec<String>,
}

/// Plan a preload of at most `budget` blocks of `block_size` bytes from `log` for the
/// `served` volumes. An error (the log is from another cache) means no preload.
pub fn plan(
    log: &LogContents,
    served: &[Served],
    block_size: u64,
    selector: SelectorKind,
    seed: u64,
    budget: u64,
    region_bytes: u64,
) -> Result<Plan, String> {
    if log.header.block_size as u64 != block_size {
        return Err(format!(
            "its block size is {} bytes, the cache's {block_size}",
            log.header.block_size
        ));
    }
    let mut notes = Vec::new();
    // Log volume index -> served volume.
    let map: Vec<Option<&Served>> = log
        .header
        .volumes
        .iter()
        .map(|lv| {
            let s = served.iter().find(|s| s.name == lv.name)?;
            if s.size != lv.size {
                notes.push(format!(
                    "volume {}: {} bytes in the log, {} now; its records are ignored",
                    lv.name, lv.size, s.size
                ));
                return None;
            }
            if lv.backing_medium != 0 && s.medium != 0 && lv.backing_medium != s.medium {
                notes.push(format!(
                    "volume {}: the backing is another file or device than the log's; its \
                     records are ignored",
                    lv.name
                ));
                return None;
            }
            Some(s)
        })
        .collect();
    if map.iter().all(Option::is_none) {
        let names: Vec<&str> = log.header.volumes.iter().map(|v| v.name.as_str()).collect();
        return Err(format!(
            "it is from another cache: none of its volumes ({}) is served here with the same \
             size and backing{}",
            names.join(", "),
            if notes.is_empty() { String::new() } else { format!(" ({})", notes.join("; ")) }
        ));
    }
    let bpr = (region_bytes / block_size).max(1);
    let mut s = selector.build(seed);
    for r in &log.records {
        if map.get(r.volume as usize).copied().flatten().is_none() {
            continue;
        }
        for b in r.block..r.block + r.blocks as u64 {
            s.observe(((r.volume as u64) << 48) | (b / bpr), r.time_ns);
        }
    }
    let regions = s.select(budget.div_ceil(bpr) as usize);
    let mut blocks: Vec<(u32, u64)> = Vec::new();
    let mut left = budget;
    for &reg in regions.iter().rev() {
        if left == 0 {
            break;
        }
        let Some(Some(sv)) = map.get((reg >> 48) as usize) else { continue };
        let first = (reg & ((1 << 48) - 1)) * bpr;
        // Whole blocks inside the volume only (the engine caches nothing else).
        let end = (first + bpr.min(left)).min(sv.size / block_size);
        for b in first..end {
            blocks.push((sv.id, b));
        }
        left -= end.saturating_sub(first);
    }
    blocks.sort_unstable();
    blocks.dedup();
    let mut runs: Vec<(u32, u64, u64)> = Vec::new();
    for (v, b) in blocks.iter().copied() {
        match runs.last_mut() {
            Some((rv, first, n)) if *rv == v && *first + *n == b && *n < CHUNK_BLOCKS => *n += 1,
            _ => runs.push((v, b, 1)),
        }
    }
    Ok(Plan { blocks: blocks.len() as u64, runs, notes })
}

#[cfg(test)]
mod tests {
    use super::*;
    use ember_trace::formats::warmup_log::{LogHeader, LogRecord, LogVolume};
    use ember_trace::Op;

    fn log(recs: &[(u8, u64, u16)]) -> LogContents {
        LogContents {
            header: LogHeader {
                slots: 100,
                log_id: 1,
                block_size: 4096,
                created_ns: 0,
                volumes: vec![
                    LogVolume { name: "a".into(), size: 1 << 20, backing_medium: 1 },
                    LogVolume { name: "b".into(), size: 1 << 20, backing_medium: 2 },
                ],
            },
            records: recs
                .iter()
                .enumerate()
                .map(|(i, &(volume, block, blocks))| LogRecord {
                    seq: i as u64 + 1,
                    time_ns: i as u64,
                    block,
                    blocks,
                    volume,
                    op: Op::Read,
                })
                .collect(),
            torn: 0,
        }
    }

    fn served(medium_b: u64) -> Vec<Served> {
        vec![
            Served { name: "a".into(), id: 3, size: 1 << 20, medium: 1 },
            Served { name: "b".into(), id: 0, size: 1 << 20, medium: medium_b },
        ]
    }

    #[test]
    fn last_k_blocks_sorted_merged_and_within_budget() {
        // 4 KiB regions: exactly the accessed blocks.
        let l = log(&[(0, 10, 2), (1, 5, 1), (0, 100, 1), (0, 11, 1), (0, 12, 1)]);
        let p = plan(&l, &served(2), 4096, SelectorKind::LastK, 1, 100, 4096).unwrap();
        assert_eq!(p.runs, vec![(0, 5, 1), (3, 10, 3), (3, 100, 1)]);
        assert_eq!(p.blocks, 5);
        // A budget of 3: the three most recent regions (blocks 100, 11, 12).
        let p = plan(&l, &served(2), 4096, SelectorKind::LastK, 1, 3, 4096).unwrap();
        assert_eq!(p.runs, vec![(3, 11, 2), (3, 100, 1)]);
        // Top-K with 64 KiB regions (16 blocks): region 0 of a (blocks 10..13: 4 accesses)
        // wins over region 6 (block 100): the whole region, split in runs ≤ CHUNK_BLOCKS.
        let p = plan(&l, &served(2), 4096, SelectorKind::TopK, 1, 16, 64 << 10).unwrap();
        assert_eq!(p.runs, vec![(3, 0, 16)]);
    }

    #[test]
    fn foreign_volumes_are_left_out_and_a_foreign_log_refused() {
        let l = log(&[(0, 1, 1), (1, 2, 1)]);
        let p = plan(&l, &served(9), 4096, SelectorKind::LastK, 1, 100, 4096).unwrap();
        assert_eq!(p.runs, vec![(3, 1, 1)], "b's backing changed: its records are dropped");
        assert!(p.notes[0].contains("another file or device"), "{:?}", p.notes);
        let other = vec![Served { name: "c".into(), id: 0, size: 1 << 20, medium: 1 }];
        let e = plan(&l, &other, 4096, SelectorKind::LastK, 1, 100, 4096).unwrap_err();
        assert!(e.contains("from another cache"), "{e}");
        let e = plan(&l, &served(2), 8192, SelectorKind::LastK, 1, 100, 8192).unwrap_err();
        assert!(e.contains("block size"), "{e}");
    }
}
