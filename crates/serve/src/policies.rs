//! The policies named in the config: the write policy and the replacement policy (the
//! admission sieve is built in `admission.rs`, from the registry).

use anyhow::{anyhow, bail};
use ember_engine::WriteMode;
use ember_policy::replacement::Spec;

/// Parse a write policy: its name (`write-through`, `write-back-flush`, ...), or `wt` / `wa`.
pub fn parse_write_mode(s: &str) -> anyhow::Result<WriteMode> {
    match s {
        "wt" => Ok(WriteMode::WriteThrough),
        "wa" => Ok(WriteMode::WriteAround),
        _ => s.parse::<WriteMode>().map_err(|e| anyhow!("--write-policy: {e}")),
    }
}

/// Parse a replacement policy with its parameters (`lruk:k=3`, the spelling of `ember
/// sim`); an oracle (which needs the future) is refused.
pub fn parse_policy(s: &str) -> anyhow::Result<Spec> {
    let spec: Spec = s.parse().map_err(|e| anyhow!("--policy: {e}"))?;
    if spec.needs_oracle() {
        bail!("--policy {s}: an oracle policy needs the future and only runs in `ember sim`");
    }
    if spec.evicts_on_hits() {
        bail!("--policy {s}: this variant evicts blocks during hits and only runs in `ember sim`");
    }
    Ok(spec)
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
        use ember_policy::Kind;
        assert_eq!(parse_policy("s3fifo").ok(), Some(Spec::from(Kind::S3Fifo)));
        assert_eq!(
            parse_policy("slru:4:lcs").map(|s| s.to_string()).ok().as_deref(),
            Some("slru:segments=4:insert=lcs")
        );
        assert!(parse_policy("opt").is_err());
        assert!(parse_policy("lirs").is_ok() && parse_policy("lirs:lcs").is_err());
        let e = parse_policy("slru:segments=0").unwrap_err().to_string();
        assert!(e.contains("--policy") && e.contains("segments"), "{e}");
    }
}
