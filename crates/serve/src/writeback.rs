//! The write-back tuning as configured, checked and handed to the engine
//! ([`ember_engine::WritebackConfig`]), which resolves its thresholds against the cache; and
//! the engine's refusal of a threshold in the words of `ember serve`'s flags.

use anyhow::bail;
use ember_engine::{DirtyLimitError, DirtyThreshold, WritebackConfig};

use crate::config::{blocks_or_percent, WritebackSettings};

impl WritebackSettings {
    /// The engine's write-back tuning; the engine resolves the thresholds against the cache.
    pub fn config(&self) -> anyhow::Result<WritebackConfig> {
        if self.max_epochs == 0 {
            bail!("--max-epochs must be at least 1");
        }
        match self.flush_order.as_str() {
            "ascending" | "lru" => {}
            o => bail!("--flush-order {o}: ascending or lru"),
        }
        let max_dirty = match &self.max_dirty {
            Some(s) => Some(blocks_or_percent("--max-dirty", s)?),
            None => None,
        };
        let min_dirty = match &self.min_dirty {
            Some(s) => Some(blocks_or_percent("--min-dirty", s)?),
            None => None,
        };
        Ok(WritebackConfig {
            max_dirty,
            min_dirty,
            max_epochs: self.max_epochs,
            lru_flush_order: self.flush_order == "lru",
            ..WritebackConfig::default()
        })
    }
}

/// The message of a dirty threshold that does not fit the cache, in the flags' words.
pub fn dirty_limit_message(e: &DirtyLimitError) -> String {
    let flag = |t: DirtyThreshold| match t {
        DirtyThreshold::Max => "--max-dirty",
        DirtyThreshold::Min => "--min-dirty",
        DirtyThreshold::Target => "--dirty-target",
    };
    match e {
        DirtyLimitError::Percent { threshold, percent } => {
            format!("{} {percent}%: a percentage from 0 to 100", flag(*threshold))
        }
        DirtyLimitError::AboveCache { threshold, blocks, data_blocks } => {
            format!(
                "{} {blocks}: more than the cache's {data_blocks} data blocks",
                flag(*threshold)
            )
        }
        DirtyLimitError::MinAboveMax { min, max } => {
            format!("--min-dirty ({min} blocks) is above --max-dirty ({max} blocks)")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ember_engine::DirtyLimit;

    #[test]
    fn writeback_limits_in_blocks_or_percent() {
        let a = WritebackSettings {
            max_dirty: Some("25%".into()),
            min_dirty: Some("10".into()),
            max_epochs: 2,
            flush_order: "lru".into(),
        };
        let c = a.config().unwrap();
        assert_eq!(
            (c.max_dirty, c.min_dirty),
            (Some(DirtyLimit::Percent(25.0)), Some(DirtyLimit::Blocks(10)))
        );
        assert!(c.lru_flush_order && c.max_epochs == 2);
        let e = DirtyLimitError::MinAboveMax { min: 300, max: 250 };
        assert!(dirty_limit_message(&e).contains("above --max-dirty"));
        let bad = WritebackSettings { flush_order: "random".into(), ..a.clone() };
        assert!(bad.config().is_err());
        let bad = WritebackSettings { max_epochs: 0, ..a.clone() };
        assert!(bad.config().unwrap_err().to_string().contains("at least 1"));
        let bad = WritebackSettings { max_dirty: Some("200%".into()), ..a.clone() };
        assert!(bad.config().unwrap_err().to_string().contains("a percentage from 0 to 100"));
        let e = DirtyLimitError::AboveCache {
            threshold: DirtyThreshold::Max,
            blocks: 2000,
            data_blocks: 1000,
        };
        assert_eq!(
            dirty_limit_message(&e),
            "--max-dirty 2000: more than the cache's 1000 data blocks"
        );
    }
}
