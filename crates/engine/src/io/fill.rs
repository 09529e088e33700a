//! Filling cache blocks just allocated for a run of one volume's blocks (a preload run, an
//! epoch sieve's move) in as few I/Os as possible: one read of the run's span from backing
//! (or the bytes given), one write per run of adjacent cache blocks. The caller holds the
//! run's stripe locks and the blocks' pins, and releases them after (`io/warmup_host.rs`,
//! `batch.rs`).

use crate::core::Inner;
use crate::device::AlignedBuf;
use crate::volume_info::VolumeInfo;

/// Read the span of the allocated blocks from backing in one read (or take it from `given`),
/// write each run of adjacent cache blocks in one write. Returns the blocks filled.
pub(crate) fn fill(
    inner: &Inner,
    vol: &VolumeInfo,
    first: u64,
    fills: &[Option<u32>],
    given: Option<&[u8]>,
) -> Result<u64, String> {
    let bs = inner.block_size() as usize;
    let (Some(lo), Some(hi)) =
        (fills.iter().position(Option::is_some), fills.iter().rposition(Option::is_some))
    else {
        return Ok(0);
    };
    let mut buf = AlignedBuf::new((hi + 1 - lo) * bs);
    let data = buf.as_mut_slice();
    let off = (first + lo as u64) * bs as u64;
    match given {
        Some(g) => data.copy_from_slice(&g[lo * bs..(hi + 1) * bs]),
        None => vol
            .backing
            .read_at(off, data)
            .map_err(|e| format!("reading backing {}: {e}", vol.backing.describe()))?,
    }
    let mut i = lo;
    let mut filled = 0u64;
    while i <= hi {
        let Some(cb) = fills[i] else {
            i += 1;
            continue;
        };
        let mut j = i + 1;
        while j <= hi && fills[j].is_some_and(|x| Some(x) == cb.checked_add((j - i) as u32)) {
            j += 1;
        }
        let src = &data[(i - lo) * bs..(j - lo) * bs];
        inner
            .cache
            .write_at(inner.geometry.block_offset(cb), src)
            .map_err(|e| format!("writing the cache device {}: {e}", inner.cache.describe()))?;
        filled += (j - i) as u64;
        i = j;
    }
    Ok(filled)
}
