//! A dirty-block threshold as a user writes it: `BLOCKS` or `PCT%` of the cache's data blocks
//! (`--max-dirty`, `--min-dirty`, `--dirty-target`), checked here and resolved against the
//! cache by the engine ([`ember_engine::DirtyLimit`]).

use anyhow::{anyhow, bail};
use ember_engine::DirtyLimit;

use crate::size::parse_size;

/// `s` as a threshold of `flag`: `BLOCKS` or `PCT%` (0 to 100).
pub(crate) fn blocks_or_percent(flag: &str, s: &str) -> anyhow::Result<DirtyLimit> {
    if let Some(p) = s.trim().strip_suffix('%') {
        let p: f64 = p.trim().parse().map_err(|_| anyhow!("{flag} {s:?}: not a percentage"))?;
        if !(0.0..=100.0).contains(&p) {
            bail!("{flag} {s}: a percentage from 0 to 100");
        }
        return Ok(DirtyLimit::Percent(p));
    }
    Ok(DirtyLimit::Blocks(parse_size(s).map_err(|e| anyhow!("{flag}: {e}"))?))
}
