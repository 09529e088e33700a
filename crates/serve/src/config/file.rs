//! Reading the config file (TOML, the serde form of [`ServeConfig`]) with the command line's
//! settings over it ([`parse_with`]), and the tables it is read through (`get`, `set`). An
//! unknown key, a bad value or a missing file is a [`ConfigError`] naming the file, the line
//! and the key; `crate::config_source` checks the result and reads the file again at each
//! reload.

use std::fmt;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::ServeConfig;

/// A config file problem: which file, which line (when the file has it) and which key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    /// The file (or `command line` for a flag).
    pub file: PathBuf,
    /// The 1-based line, when the problem is at one.
    pub line: Option<usize>,
    /// The key's dotted path, when the problem is one key's.
    pub key: Option<String>,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
        }
        if let Some(key) = &self.key {
            write!(f, ": key {key}")?;
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for ConfigError {}

/// Parse `text` (the file `path`) with `overrides` over it, without the semantic checks.
pub fn parse_with(
    path: &Path,
    text: &str,
    overrides: &toml::Table,
) -> Result<ServeConfig, ConfigError> {
    // The file alone first, so that toml's spans locate an unknown key or a bad value.
    let located = |e: toml::de::Error| {
        let offset = e.span().map(|s| s.start);
        ConfigError {
            file: path.to_path_buf(),
            line: offset.map(|o| text[..o.min(text.len())].matches('\n').count() + 1),
            key: offset.and_then(|o| key_at(text, o)),
            message: e.message().trim().to_string(),
        }
    };
    let mut table: toml::Table = toml::from_str(text).map_err(located)?;
    // Every table may be missing from the file (the command line may give it).
    let _: ServeConfig = toml::from_str(text).map_err(located)?;
    merge(&mut table, overrides);
    let missing = |what: &str| ConfigError {
        file: path.to_path_buf(),
        line: None,
        key: None,
        message: what.to_string(),
    };
    if get(&table, &["cache", "device"]).is_none() {
        return Err(missing("no cache device: give `[cache] device` or --cache"));
    }
    // No `[[volume]]` table is checked at start: the cache device may record the volumes
    // (`recorded.rs`).
    ServeConfig::deserialize(toml::Value::Table(table)).map_err(|e| missing(e.message().trim()))
}

/// An error of the command line's settings.
pub(crate) fn command_line(message: String) -> ConfigError {
    ConfigError { file: PathBuf::from("command line"), line: None, key: None, message }
}

/// The value at `path` in `table`.
pub(crate) fn get<'a>(table: &'a toml::Table, path: &[&str]) -> Option<&'a toml::Value> {
    let (last, tables) = path.split_last()?;
    let mut t = table;
    for p in tables {
        t = t.get(*p)?.as_table()?;
    }
    t.get(*last)
}

/// Put `value` at `path` in `table`, creating the tables on the way.
pub(crate) fn set(table: &mut toml::Table, path: &[&str], value: toml::Value) {
    let Some((last, tables)) = path.split_last() else {
        return;
    };
    let mut t = table;
    for p in tables {
        let entry =
            t.entry(p.to_string()).or_insert_with(|| toml::Value::Table(toml::Table::new()));
        if !entry.is_table() {
            *entry = toml::Value::Table(toml::Table::new());
        }
        let toml::Value::Table(inner) = entry else {
            return;
        };
        t = inner;
    }
    t.insert(last.to_string(), value);
}

/// Put every leaf of `over` into `table` (tables merge; arrays and values replace).
fn merge(table: &mut toml::Table, over: &toml::Table) {
    for (k, v) in over {
        match (table.get_mut(k), v) {
            (Some(toml::Value::Table(t)), toml::Value::Table(o)) => merge(t, o),
            _ => {
                table.insert(k.clone(), v.clone());
            }
        }
    }
}

/// The dotted key whose line holds byte `offset` of `text`, from the table header above
/// it and the key before the `=`.
fn key_at(text: &str, offset: usize) -> Option<String> {
    let mut header: Option<String> = None;
    let mut start = 0;
    for line in text.split_inclusive('\n') {
        let end = start + line.len();
        let trimmed = line.trim();
        if trimmed.starts_with('[') {
            let name = trimmed.trim_start_matches('[').split(']').next().unwrap_or("").trim();
            header = Some(name.to_string());
        }
        if offset < end || end == text.len() {
            let key = trimmed.split_once('=').map(|(k, _)| k.trim().trim_matches('"'));
            return match (header, key) {
                (Some(h), Some(k)) => Some(format!("{h}.{k}")),
                (None, Some(k)) => Some(k.to_string()),
                (Some(h), None) => Some(h),
                (None, None) => None,
            };
        }
        start = end;
    }
    None
}

/// The 1-based line of the key at `path` in `text`, if the file has it.
pub(crate) fn line_of_key(text: &str, path: &[&str]) -> Option<usize> {
    let doc = toml_edit::ImDocument::parse(text).ok()?;
    let (last, tables) = path.split_last()?;
    let mut t: &dyn toml_edit::TableLike = doc.as_table();
    for p in tables {
        t = t.get(p)?.as_table_like()?;
    }
    let span = t.get_key_value(last)?.0.span()?;
    Some(text[..span.start.min(text.len())].matches('\n').count() + 1)
}

/// The 1-based line of `key` (dotted below the table: `seq-cutoff.read`) in the `[[volume]]`
/// table whose name is `volume`, else of that table's first key, if the file has it.
pub(crate) fn line_of_volume_key(text: &str, volume: &str, key: &str) -> Option<usize> {
    let doc = toml_edit::ImDocument::parse(text).ok()?;
    let tables = doc.as_table().get("volume")?.as_array_of_tables()?;
    let table = tables.iter().find(|t| t.get("name").and_then(|n| n.as_str()) == Some(volume))?;
    let line = |start: usize| text[..start.min(text.len())].matches('\n').count() + 1;
    let mut t: &dyn toml_edit::TableLike = table;
    let parts: Vec<&str> = key.split('.').collect();
    if let Some((last, tables)) = parts.split_last() {
        let found = tables
            .iter()
            .try_fold(t, |t, p| t.get(p)?.as_table_like())
            .and_then(|inner| inner.get_key_value(last))
            .and_then(|(k, _)| k.span());
        if let Some(span) = found {
            return Some(line(span.start));
        }
        t = table;
    }
    let (k, _) = t.iter().next()?;
    let span = t.get_key_value(k)?.0.span()?;
    Some(line(span.start))
}
