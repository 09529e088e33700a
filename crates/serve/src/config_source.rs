//! The config file and the command line together ([`ConfigSource`]): the file read again at
//! every load, with the flags given on the command line over it, so that a flag keeps
//! overriding the file across reloads; the result checked as a server would be started from
//! it, and every error located in the file (docs/reference/config.md).

use std::path::{Path, PathBuf};

use crate::config::{command_line, get_value as get, line_of_key, parse_with, set_value as set};
use crate::config::{ConfigError, Key, ServeConfig};

/// Where a server's configuration comes from: an optional file and the flags given on the
/// command line. [`ConfigSource::load`] reads the file again each time (a reload).
#[derive(Clone, Debug)]
pub struct ConfigSource {
    file: Option<PathBuf>,
    /// The command line's configuration (every flag, given or default).
    flags: ServeConfig,
    /// The settings given on the command line, as the file's tables.
    overrides: toml::Table,
    given: Vec<&'static Key>,
}

impl ConfigSource {
    /// The configuration `flags` describes, without a file.
    pub fn flags_only(flags: ServeConfig) -> ConfigSource {
        ConfigSource { file: None, flags, overrides: toml::Table::new(), given: Vec::new() }
    }

    /// The file `file` with the settings of `flags` named in `given` (flag names such as
    /// `write-policy`; an unknown name is an error) over it.
    pub fn new(
        file: Option<PathBuf>,
        flags: ServeConfig,
        given: &[&str],
    ) -> Result<ConfigSource, ConfigError> {
        let table = toml::Table::try_from(&flags).map_err(|e| command_line(e.to_string()))?;
        let mut overrides = toml::Table::new();
        let mut keys = Vec::new();
        for name in given {
            let key = Key::find(name)
                .ok_or_else(|| command_line(format!("--{name} is not a setting")))?;
            if let Some(v) = get(&table, key.path) {
                set(&mut overrides, key.path, v.clone());
            }
            keys.push(key);
        }
        Ok(ConfigSource { file, flags, overrides, given: keys })
    }

    /// The config file, if there is one.
    pub fn file(&self) -> Option<&Path> {
        self.file.as_deref()
    }

    /// Whether a flag on the command line gives `key` (a reload or `--save` leaves it).
    pub fn overridden(&self, key: &Key) -> bool {
        self.file.is_some() && self.given.iter().any(|k| k.flag == key.flag)
    }

    /// The server's name: `name` in the configuration, else the config file's stem.
    pub fn name(&self, config: &ServeConfig) -> Option<String> {
        config.name.clone().or_else(|| {
            let stem = self.file.as_deref()?.file_stem()?;
            Some(stem.to_string_lossy().into_owned())
        })
    }

    /// Read the file (if any), put the command line's settings over it, and check the
    /// result as [`ServeConfig::check`] does; every error is located in the file.
    pub fn load(&self) -> Result<ServeConfig, ConfigError> {
        let Some(path) = &self.file else {
            let config = self.flags.clone();
            config.check().map_err(|e| command_line(format!("{e:#}")))?;
            return Ok(config);
        };
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
            file: path.clone(),
            line: None,
            key: None,
            message: format!("cannot read the config file: {e}"),
        })?;
        let config = parse_with(path, &text, &self.overrides)?;
        config.check().map_err(|e| {
            let message = format!("{e:#}");
            let key = Key::named_in(&message).filter(|k| !self.overridden(k));
            match key {
                Some(k) => ConfigError {
                    file: path.clone(),
                    line: line_of_key(&text, k.path),
                    key: Some(k.dotted()),
                    message,
                },
                None => match crate::config::named_volume_key(&message) {
                    Some((volume, key)) => ConfigError {
                        file: path.clone(),
                        line: crate::config::line_of_volume_key(&text, volume, key),
                        key: Some(format!("volume.{key}")),
                        message,
                    },
                    None => ConfigError { file: path.clone(), line: None, key: None, message },
                },
            }
        })?;
        Ok(config)
    }
}

#[cfg(test)]
#[path = "config_source_tests.rs"]
mod tests;
