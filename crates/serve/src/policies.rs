//! The policies named in the config: the write policy and the replacement policy (the
//! admission sieve is built in `admission.rs`, from the registry).

use anyhow::{anyhow, bail};
use ember_engine::WriteMode;
use ember_policy::replacement::Kind;

/// Parse a write policy: its name (`write-through`, `write-back-flush`, ...), or `wt` / `wa`.
pub fn parse_write_mode(s: &str) -> anyhow::Result<WriteMode> {
    match s {
        "wt" => Ok(WriteMode::WriteThrough),
        "wa" => Ok(WriteMode::WriteAround),
        _ => s.parse::<WriteMode>().map_err(|e| anyhow!("--write-policy: {e}")),
    }
}

/// Parse a replacement policy; an oracle (which needs the future) is refused.
pub fn parse_policy(s: &str) -> anyhow::Result<Kind> {
    let kind: Kind = s.parse().map_err(|e| anyhow!("--policy: {e}"))?;
    if kind.needs_oracle() {
        bail!("--policy {s}: an oracle policy needs the future and only runs in `ember sim`");
    }
    Ok(kind)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policies() {
        assert!(matches!(parse_write_mode("write-around"), Ok(WriteMode::WriteAround)));
        assert!(matches!(parse_write_mode("write-back-flush"), Ok(WriteMode::WriteBackFlush)));
        assert!(matches!(parse_write_mode("write-back-persist"), Ok(WriteMode::WriteBackPersist)));
        assert!(matches!(parse_write_mode("unsafe-write-back"), Ok(WriteMode::UnsafeWriteBack)));
        assert!(matches!(parse_write_mode("ordered-write-back"), Ok(WriteMode::OrderedWriteBack)));
        assert!(matches!(parse_write_mode("wt"), Ok(WriteMode::WriteThrough)));
        assert!(parse_write_mode("write-back").is_err());
        assert!(matches!(parse_policy("s3fifo"), Ok(Kind::S3Fifo)));
        assert!(parse_policy("opt").is_err());
    }
}
