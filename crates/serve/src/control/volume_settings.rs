//! `get --volume` and `set --volume`: a volume's own settings (its `[[volume]]` table's
//! `write-policy`, `admission`, `sieve.*`, `seq-cutoff.*`, `min-share` and `max-share`,
//! docs/reference/config.md),
//! each falling back to the cache-wide value when unset. A key is named as in the table
//! (`seq-cutoff.read`) or as the cache-wide flag (`seq-cutoff-read`); the value `default`
//! unsets it. A `set` is checked as the whole configuration would be, applied to the
//! engine, kept in the configuration in force and recorded on the cache device (a restart
//! keeps it, unless the configuration then sets the key), and with `save` written into the
//! volume's table of the config file.

use serde::Deserialize;
use serde_json::{json, Value};

use super::{from_table_err, table, toml_to_json, typed, Control};
use crate::config::{get_value, save_volume_setting, set_value, BackingVolume, Key, VolumeOwn};
use crate::plan::Plan;

/// The keys a `[[volume]]` table may hold, as paths below it.
const VOLUME_KEYS: &[&[&str]] = &[
    &["write-policy"],
    &["admission"],
    &["sieve", "t1"],
    &["sieve", "t2"],
    &["sieve", "window"],
    &["sieve", "subwindows"],
    &["sieve", "imct"],
    &["sieve", "fraction"],
    &["sieve", "seed"],
    &["sieve", "probability"],
    &["sieve", "bloom-keys"],
    &["sieve", "bloom-fpr"],
    &["seq-cutoff", "policy"],
    &["seq-cutoff", "read"],
    &["seq-cutoff", "write"],
    &["min-share"],
    &["max-share"],
];

/// The path in a `[[volume]]` table of the setting `name`.
pub(super) fn volume_key(name: &str) -> Result<&'static [&'static str], String> {
    let dotted = name.trim_start_matches("volume.");
    let found = VOLUME_KEYS.iter().copied().find(|p| p.join(".") == dotted).or_else(|| {
        let key = Key::find(name)?;
        let rest = key.path.strip_prefix(&["live"][..])?;
        VOLUME_KEYS.iter().copied().find(|p| *p == rest)
    });
    found.ok_or_else(|| {
        let names: Vec<String> = VOLUME_KEYS.iter().map(|p| p.join(".")).collect();
        format!("{name:?} is not a volume's own setting: {}", names.join(", "))
    })
}

impl Control {
    fn volume_index(config: &crate::config::ServeConfig, volume: &str) -> Result<usize, String> {
        config.volumes.iter().position(|v| v.name == volume).ok_or_else(|| {
            let names: Vec<&str> = config.volumes.iter().map(|v| v.name.as_str()).collect();
            format!("no volume {volume:?} (volumes: {})", names.join(", "))
        })
    }

    /// The value of volume `volume`'s setting `name`: its own, or the cache-wide one.
    pub(super) fn get_volume(&self, volume: &str, name: &str) -> Result<Value, String> {
        let path = volume_key(name)?;
        let config = self.state.lock().config.clone();
        let i = Self::volume_index(&config, volume)?;
        let own_t = toml::Table::try_from(&config.volumes[i]).map_err(|e| e.to_string())?;
        let (value, from) = match get_value(&own_t, path) {
            Some(v) => (Some(v.clone()), "volume"),
            None => {
                let live: Vec<&str> = std::iter::once("live").chain(path.iter().copied()).collect();
                (get_value(&table(&config)?, &live).cloned(), "cache-wide")
            }
        };
        Ok(json!({
            "key": path.join("."),
            "volume": volume,
            "value": value.map(|v| toml_to_json(&v)),
            "live": true,
            "from": from,
        }))
    }

    /// Set volume `volume`'s setting `name` to `text` (`default`: unset it).
    pub(super) fn set_volume(
        &self,
        volume: &str,
        name: &str,
        text: &str,
        save: bool,
    ) -> Result<Value, String> {
        let path = volume_key(name)?;
        let dotted = path.join(".");
        let _changing = self.changing.lock();
        let old = self.state.lock().config.clone();
        let i = Self::volume_index(&old, volume)?;
        let old_t = toml::Table::try_from(&old.volumes[i]).map_err(|e| e.to_string())?;
        let (new_volume, _, stored) = with_value(volume, &old_t, path, text)?;
        let mut new = old.clone();
        new.volumes[i] = new_volume;
        let old_v = get_value(&old_t, path).map(toml_to_json);
        if new == old {
            return Ok(json!({
                "key": dotted, "volume": volume, "old": old_v, "value": old_v,
                "changed": false, "saved": false, "note": null,
            }));
        }
        let plan = Plan::check(&new).map_err(|e| format!("{e:#}"))?;
        let own = plan
            .engine
            .volumes
            .iter()
            .find(|o| o.name == volume)
            .cloned()
            .unwrap_or_else(|| VolumeOwn::cache_wide(volume));
        self.apply_volume(path, &own).map_err(|e| format!("{volume}: {dotted} {text}: {e:#}"))?;
        let recorded = self.record_volume(&new.volumes[i]);
        self.state.lock().config = new;
        recorded.map_err(|e| {
            format!("{volume}: {dotted} is now {text}, but not recorded on the cache device: {e}")
        })?;
        if save {
            let Some(file) = self.source.as_ref().and_then(|s| s.file()) else {
                return Err(format!(
                    "{volume}: {dotted} is now {text}, but not saved: the server was started \
                     without a config file"
                ));
            };
            save_volume_setting(file, volume, path, stored.as_ref())
                .map_err(|e| format!("{volume}: {dotted} is now {text}, but {e:#}"))?;
        }
        let new_v = stored.as_ref().map(toml_to_json);
        tracing::info!(volume, key = %dotted, new = %text, saved = save, "volume setting changed");
        Ok(json!({
            "key": dotted, "volume": volume, "old": old_v, "value": new_v,
            "changed": true, "saved": save, "note": null,
        }))
    }

    /// Put the group of `path` of `own` in force (a sieve change makes a fresh sieve; the
    /// others leave it).
    pub(super) fn apply_volume(&self, path: &[&str], own: &VolumeOwn) -> anyhow::Result<()> {
        let name = own.name.as_str();
        match path.first().copied() {
            Some("write-policy") => {
                self.engine.set_volume_write_mode(name, own.write_mode)?;
            }
            Some("seq-cutoff") => {
                self.engine.set_volume_seq_cutoff(name, own.seq_cutoff)?;
            }
            Some("min-share" | "max-share") => {
                super::engine_live::set_volume_shares(&self.engine, own)?
            }
            _ => {
                let sieve = own.sieve.as_ref().map(|s| s.build()).transpose()?;
                self.engine.set_volume_admission(name, sieve)?;
            }
        }
        Ok(())
    }
}

/// `t`, a `[[volume]]` table of volume `volume`, with the setting at `path` set to `text`
/// (`default`: unset), read back as a volume: the volume, its table and the value stored.
/// The value is taken as the file would hold it (a number, a boolean), else as a string.
pub(super) fn with_value(
    volume: &str,
    t: &toml::Table,
    path: &[&str],
    text: &str,
) -> Result<(BackingVolume, toml::Table, Option<toml::Value>), String> {
    let candidates = if text == "default" {
        vec![None]
    } else {
        vec![Some(typed(text)), Some(toml::Value::String(text.to_string()))]
    };
    let mut last_error = String::new();
    for value in candidates {
        let mut t = t.clone();
        match &value {
            Some(v) => set_value(&mut t, path, v.clone()),
            None => remove_path(&mut t, path),
        }
        match BackingVolume::deserialize(toml::Value::Table(t.clone())) {
            Ok(v) => return Ok((v, t, value)),
            Err(e) => last_error = from_table_err(e),
        }
    }
    Err(format!("{volume}: {} {text:?}: {last_error}", path.join(".")))
}

/// What a reload did to the volumes' own settings.
pub(super) struct VolumeReload {
    /// `volume.NAME` of each volume whose changed settings were applied.
    pub applied: Vec<String>,
    /// Each refused volume: `keys` (`[volume.NAME]`) and `reason`.
    pub refused: Vec<Value>,
    /// The indexes of the refused volumes, whose settings in force stay the old ones.
    pub kept: Vec<usize>,
}

impl Control {
    /// Apply the own settings of every volume whose `[[volume]]` table changed between
    /// `old` and `file` (checked into `plan`), each setting that changed on its own (an
    /// unchanged sieve keeps its counts). `None` if the volume set itself changed (names,
    /// backings or order): that needs a restart, and nothing is applied.
    pub(super) fn reload_volumes(
        &self,
        old: &crate::config::ServeConfig,
        file: &crate::config::ServeConfig,
        plan: &Plan,
    ) -> Option<VolumeReload> {
        let same_set = old.volumes.len() == file.volumes.len()
            && old
                .volumes
                .iter()
                .zip(&file.volumes)
                .all(|(a, b)| a.name == b.name && a.backing == b.backing);
        if !same_set {
            return None;
        }
        let mut r = VolumeReload { applied: Vec::new(), refused: Vec::new(), kept: Vec::new() };
        for (i, (was, now)) in old.volumes.iter().zip(&file.volumes).enumerate() {
            if was == now {
                continue;
            }
            let own = plan
                .engine
                .volumes
                .iter()
                .find(|o| o.name == now.name)
                .cloned()
                .unwrap_or_else(|| VolumeOwn::cache_wide(&now.name));
            let mut groups: Vec<&[&str]> = Vec::new();
            if was.write_policy != now.write_policy {
                groups.push(&["write-policy"]);
            }
            if was.admission != now.admission || was.sieve != now.sieve {
                groups.push(&["admission"]);
            }
            if was.seq_cutoff != now.seq_cutoff {
                groups.push(&["seq-cutoff"]);
            }
            if was.min_share != now.min_share || was.max_share != now.max_share {
                groups.push(&["max-share"]);
            }
            let done = groups.iter().try_for_each(|g| self.apply_volume(g, &own));
            match done {
                Ok(()) => r.applied.push(format!("volume.{}", now.name)),
                Err(e) => {
                    r.refused.push(json!({
                        "keys": [format!("volume.{}", now.name)],
                        "reason": format!("{e:#}"),
                    }));
                    r.kept.push(i);
                }
            }
        }
        Some(r)
    }
}

/// Remove `path` from `t`, and a table it leaves empty.
fn remove_path(t: &mut toml::Table, path: &[&str]) {
    match path {
        [] => {}
        [last] => {
            t.remove(*last);
        }
        [first, rest @ ..] => {
            if let Some(toml::Value::Table(inner)) = t.get_mut(*first) {
                remove_path(inner, rest);
                if inner.is_empty() {
                    t.remove(*first);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_volume_setting_is_named_as_in_its_table_or_as_the_flag() {
        assert_eq!(volume_key("write-policy"), Ok(&["write-policy"][..]));
        assert_eq!(volume_key("seq-cutoff-read"), Ok(&["seq-cutoff", "read"][..]));
        assert_eq!(volume_key("seq-cutoff.read"), Ok(&["seq-cutoff", "read"][..]));
        assert_eq!(volume_key("sieve-t1"), Ok(&["sieve", "t1"][..]));
        assert_eq!(volume_key("live.admission"), Ok(&["admission"][..]));
        assert!(volume_key("max-dirty").unwrap_err().contains("not a volume's own setting"));
        assert!(volume_key("seq-cutoff-streams").is_err(), "the cache's stream count");
        assert!(volume_key("epoch").is_err(), "discrete sieves are cache-wide");
    }
}
