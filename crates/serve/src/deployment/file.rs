//! The topology file (`deployment.toml`, docs/guide/deployment.md) as written: its tiers
//! (each a name, an `ember serve` config file, the tier its volumes read from and its
//! latency for Wong & Wilkes' model) and its routes (which client tier serves each trace
//! volume). A syntax error, an unknown key or a bad value is a [`ConfigError`] naming the
//! file and the line, as the servers' config files' errors are; the names keep their spans so
//! that the checks after parsing point at a line too.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use toml::Spanned;

use crate::config::ConfigError;

/// The topology file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct TopologyFile {
    /// Where `ember deploy` keeps each tier's log, pid and sockets (relative to the file;
    /// default: `STEM.state` beside it).
    #[serde(default)]
    pub state_dir: Option<PathBuf>,
    /// The tiers, one `[[tier]]` table each.
    #[serde(rename = "tier", default)]
    pub tiers: Vec<TierEntry>,
    /// The trace's client → tier mapping, one `[[route]]` table each.
    #[serde(rename = "route", default)]
    pub routes: Vec<RouteEntry>,
}

/// One `[[tier]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct TierEntry {
    /// The tier's name (unique).
    pub name: Spanned<String>,
    /// Its `ember serve` config file (relative to the topology file).
    pub config: Spanned<PathBuf>,
    /// The tier its volumes' NBD backings are exports of (a client tier names the array);
    /// none for the bottom tier.
    #[serde(default)]
    pub backing: Option<Spanned<String>>,
    /// A hit in this tier, ms: T_c of a client tier, T_a of the array.
    #[serde(default)]
    pub latency_ms: f64,
    /// The bottom tier: a read of its own backing, ms (T_d).
    #[serde(default)]
    pub backing_latency_ms: Option<f64>,
    /// The bottom tier: an aborted DEMOTE, ms (Wong & Wilkes section 4: 0.16).
    #[serde(default)]
    pub aborted_demote_ms: Option<f64>,
    /// The bottom tier, in the laboratory only: it crashes (`kill -9`) after this many
    /// requests of the trace and restarts, warm from its warmup log if its config file keeps
    /// one. `ember deploy` ignores it.
    #[serde(default)]
    pub crash_after_requests: Option<Spanned<u64>>,
}

/// One `[[route]]`: a trace volume's requests go to a client tier's volume.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct RouteEntry {
    /// The volume name in the trace (`client0` in a `multi-client` trace).
    pub trace_volume: Spanned<String>,
    /// The client tier.
    pub tier: Spanned<String>,
    /// The tier's volume (its `[[volume]]` name); default: its first.
    #[serde(default)]
    pub volume: Option<Spanned<String>>,
}

/// The 1-based line of byte `offset` of `text`.
pub fn line_at(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].matches('\n').count() + 1
}

/// An error of the topology file `path` (text `text`) at byte `offset`, if known.
pub fn error_at(path: &Path, text: &str, offset: Option<usize>, message: String) -> ConfigError {
    ConfigError {
        file: path.to_path_buf(),
        line: offset.map(|o| line_at(text, o)),
        key: None,
        message,
    }
}

/// Parse `text`, the topology file `path`.
pub fn parse(path: &Path, text: &str) -> Result<TopologyFile, ConfigError> {
    toml::from_str(text).map_err(|e| {
        error_at(path, text, e.span().map(|s| s.start), e.message().trim().to_string())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_name_the_file_and_the_line() {
        let p = Path::new("deployment.toml");
        let ok = "[[tier]]\nname = \"array\"\nconfig = \"array.toml\"\nlatency-ms = 0.2\n\n\
                  [[tier]]\nname = \"c0\"\nconfig = \"c0.toml\"\nbacking = \"array\"\n\n\
                  [[route]]\ntrace-volume = \"client0\"\ntier = \"c0\"\n";
        let t = parse(p, ok).unwrap();
        assert_eq!(t.tiers.len(), 2);
        assert_eq!(t.tiers[1].backing.as_ref().map(|b| b.get_ref().as_str()), Some("array"));
        assert_eq!(line_at(ok, t.routes[0].tier.span().start), 13);
        let bad = "[[tier]]\nname = \"array\"\nconfig = \"a.toml\"\ncolour = 1\n";
        let e = parse(p, bad).unwrap_err();
        assert_eq!((e.line, e.file.as_path()), (Some(4), p), "{e}");
        assert!(e.to_string().starts_with("deployment.toml:4: "), "{e}");
        let e = parse(p, "[[tier]]\nname = \"a\"\nconfig = \"a.toml\"\nlatency-ms = \"x\"\n");
        assert_eq!(e.unwrap_err().line, Some(4));
    }
}
