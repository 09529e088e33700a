//! The volume set the cache device records (layout version 2's volume records: each volume's
//! backing as it was given and its own settings, the keys of its `[[volume]]` table as TOML),
//! merged with the set a start or a reload names (docs/reference/layout.md, the restart rule):
//!
//! - a recorded volume the configuration does not name is served from its recorded backing
//!   with its recorded settings; one whose backing cannot be opened is reported and left
//!   recorded, unserved (the others are served);
//! - a named volume keeps what the configuration says: its backing and every key its table
//!   sets win, and a key only the record holds is kept;
//! - a volume being removed, or recorded without a backing (a cache formatted by `ember cache
//!   format` and not served since), is served only when named.
//!
//! Each difference is one line. After the start, and after each change of a volume's
//! settings, what is served is recorded again (`record_of`, [`record_served`]).

use anyhow::bail;
use ember_engine::device::{FileDevice, FileOptions};
use ember_engine::layout::VolumeRecord;
use ember_engine::{BackingRecord, Engine, VolumeState};
use serde::Deserialize;

use crate::backing::open_backing;
use crate::config::{BackingVolume, ServeConfig};
use crate::console::Console;

/// The record of `v`: its backing as given, and the keys of its `[[volume]]` table other
/// than `name` and `backing`, as TOML (empty: none).
pub fn record_of(v: &BackingVolume) -> BackingRecord {
    let settings = match toml::Table::try_from(v) {
        Ok(mut t) => {
            t.remove("name");
            t.remove("backing");
            if t.is_empty() {
                String::new()
            } else {
                toml::to_string(&t).unwrap_or_default()
            }
        }
        Err(_) => String::new(),
    };
    BackingRecord { backing: v.backing.clone(), settings }
}

/// What [`merge`] did.
#[derive(Debug, Default)]
pub struct Merged {
    /// One line per difference between the named set and the recorded one.
    pub lines: Vec<String>,
    /// The volumes added from the record (not named).
    pub added: Vec<String>,
}

/// Every key of `t` with its value, dotted (`seq-cutoff.read`).
fn leaves(t: &toml::Table, prefix: &str, out: &mut Vec<(String, toml::Value)>) {
    for (k, v) in t {
        let key = if prefix.is_empty() { k.clone() } else { format!("{prefix}.{k}") };
        match v {
            toml::Value::Table(inner) => leaves(inner, &key, out),
            v => out.push((key, v.clone())),
        }
    }
}

/// `over`'s keys put into `base`, tables key by key.
fn overlay(base: &mut toml::Table, over: &toml::Table) {
    for (k, v) in over {
        if let (Some(toml::Value::Table(b)), toml::Value::Table(o)) = (base.get_mut(k), v) {
            overlay(b, o);
            continue;
        }
        base.insert(k.clone(), v.clone());
    }
}

/// The recorded settings of `r` as a table; Err says why they cannot be read.
fn recorded_table(r: &VolumeRecord) -> Result<toml::Table, String> {
    r.recorded.settings.parse::<toml::Table>().map_err(|e| e.to_string())
}

/// Merge `recorded` (the slots in use of a cache device) into `config`'s volumes: see the
/// module doc. Changes only `config`.
pub fn merge(config: &mut ServeConfig, recorded: &[VolumeRecord]) -> Merged {
    let mut m = Merged::default();
    for r in recorded.iter().filter(|r| r.in_use() && r.state != VolumeState::Removing) {
        let name = &r.name;
        let rec_t = match recorded_table(r) {
            Ok(t) => t,
            Err(e) => {
                m.lines.push(format!(
                    "volume {name}: its recorded settings cannot be read ({e}): not used"
                ));
                toml::Table::new()
            }
        };
        let named = config.volumes.iter().position(|v| &v.name == name);
        let mut table = rec_t.clone();
        let (backing, from) = match named {
            Some(i) => {
                let v = &config.volumes[i];
                let rec_backing = &r.recorded.backing;
                if !rec_backing.is_empty() && *rec_backing != v.backing {
                    m.lines.push(format!(
                        "volume {name}: backing {} from the configuration (recorded: {rec_backing})",
                        v.backing
                    ));
                }
                let mut cfg_t = toml::Table::try_from(v).unwrap_or_default();
                cfg_t.remove("name");
                cfg_t.remove("backing");
                let (mut cfg_leaves, mut rec_leaves) = (Vec::new(), Vec::new());
                leaves(&cfg_t, "", &mut cfg_leaves);
                leaves(&rec_t, "", &mut rec_leaves);
                for (k, v) in &cfg_leaves {
                    if let Some((_, w)) = rec_leaves.iter().find(|(rk, _)| rk == k) {
                        if w != v {
                            m.lines.push(format!(
                                "volume {name}: {k} = {v} from the configuration (recorded: {w})"
                            ));
                        }
                    }
                }
                for (k, w) in &rec_leaves {
                    if !cfg_leaves.iter().any(|(ck, _)| ck == k) {
                        m.lines.push(format!(
                            "volume {name}: {k} = {w} as recorded on the cache device (the \
                             configuration does not set it)"
                        ));
                    }
                }
                overlay(&mut table, &cfg_t);
                (v.backing.clone(), Some(i))
            }
            None if r.recorded.backing.is_empty() => continue,
            None => (r.recorded.backing.clone(), None),
        };
        table.insert("name".into(), toml::Value::String(name.clone()));
        table.insert("backing".into(), toml::Value::String(backing.clone()));
        let merged = match BackingVolume::deserialize(toml::Value::Table(table)) {
            Ok(v) => v,
            Err(e) => {
                m.lines.push(format!("volume {name}: its recorded settings are not used: {e}"));
                BackingVolume::new(name.clone(), backing.clone())
            }
        };
        match from {
            Some(i) => {
                if merged != config.volumes[i] {
                    config.volumes[i] = merged;
                }
            }
            None => {
                m.lines.push(format!(
                    "volume {name}: recorded on the cache device, not named: served from its \
                     recorded backing {backing}{}",
                    if rec_t.is_empty() { "" } else { " with its recorded settings" }
                ));
                config.volumes.push(merged);
                m.added.push(name.clone());
            }
        }
    }
    m
}

/// At start, before anything is checked or opened for service: read what the cache device
/// records (a device that does not exist yet, a memory cache or one that is not formatted
/// records nothing), merge it into `config`, and leave out, with a line each, the recorded
/// volumes whose backing cannot be opened. Says every difference on `console`. Returns the
/// names it reported as not served. Refuses a start that serves no volume.
pub(crate) fn at_start(
    config: &mut ServeConfig,
    console: &dyn Console,
) -> anyhow::Result<Vec<String>> {
    let mut reported = Vec::new();
    let on_device =
        config.cache.memory_size().ok().flatten().is_none() && config.cache.device.exists();
    let recorded = if on_device {
        FileDevice::open(&config.cache.device, FileOptions::default())
            .ok()
            .and_then(|dev| Engine::recorded_volumes(&dev).ok())
            .unwrap_or_default()
    } else {
        Vec::new()
    };
    let merged = merge(config, &recorded);
    for line in &merged.lines {
        console.say(line);
    }
    for name in &merged.added {
        let Some(i) = config.volumes.iter().position(|v| &v.name == name) else { continue };
        let v = &config.volumes[i];
        if let Err(e) = open_backing(v, &config.nbd_backing, config.tiers.queue()) {
            console.say(&format!(
                "volume {name}: its recorded backing {} cannot be opened ({e:#}): kept \
                 recorded, not exported",
                v.backing
            ));
            config.volumes.remove(i);
            reported.push(name.clone());
        }
    }
    if config.volumes.is_empty() {
        bail!("--backing: no volume (and the cache device records none that can be served)");
    }
    Ok(reported)
}

/// Record every volume `engine` serves with its backing and settings as `config` has them;
/// a line on `console` when the device keeps no records.
pub(crate) fn record_served(engine: &Engine, config: &ServeConfig, console: &dyn Console) {
    let records: Vec<(String, BackingRecord)> = config
        .volumes
        .iter()
        .filter(|v| engine.volume(&v.name).is_some())
        .map(|v| (v.name.clone(), record_of(v)))
        .collect();
    match engine.record_volumes(&records) {
        Ok(true) => {}
        Ok(false) => console.say(
            "volume records: not kept (the cache device's journal region is too small to spare \
             their area): a restart serves the volumes it names",
        ),
        Err(e) => console.say(&format!(
            "volume records: not written ({e}): a restart serves the volumes it names and \
             those recorded before"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn recorded(name: &str, backing: &str, settings: &str) -> VolumeRecord {
        let mut r = ember_engine::layout::VolumeRecord::free();
        r.name = name.into();
        r.state = VolumeState::Cached;
        r.size = 1;
        r.recorded = BackingRecord { backing: backing.into(), settings: settings.into() };
        r
    }

    #[test]
    fn a_record_holds_the_tables_keys_and_reads_back() {
        let mut v = BackingVolume::new("db", "/dev/sdb");
        assert_eq!(
            record_of(&v),
            BackingRecord { backing: "/dev/sdb".into(), ..Default::default() }
        );
        v.min_share = Some("25%".into());
        v.seq_cutoff.read = Some(1 << 20);
        let r = record_of(&v);
        let mut config = ServeConfig::new("cache.img", vec![]);
        let m = merge(&mut config, &[recorded("db", &r.backing, &r.settings)]);
        assert_eq!(config.volumes, vec![v]);
        assert_eq!(m.added, vec!["db".to_string()]);
    }

    /// The configuration wins for the keys it sets and the backing it names; a key only the
    /// record holds is kept; one line per difference; a removing volume or one without a
    /// recorded backing is not added.
    #[test]
    fn the_configuration_wins_for_what_it_names() {
        let mut named = BackingVolume::new("a", "/new/a");
        named.write_policy = Some("write-around".into());
        let mut config = ServeConfig::new("cache.img", vec![named]);
        let mut removing = recorded("gone", "/dev/x", "");
        removing.state = VolumeState::Removing;
        let m = merge(
            &mut config,
            &[
                recorded("a", "/old/a", "write-policy = \"write-through\"\nmin-share = \"10%\"\n"),
                removing,
                recorded("fresh", "", ""),
            ],
        );
        let a = &config.volumes[0];
        assert_eq!(a.backing, "/new/a");
        assert_eq!(a.write_policy.as_deref(), Some("write-around"));
        assert_eq!(a.min_share.as_deref(), Some("10%"));
        assert_eq!(config.volumes.len(), 1);
        assert!(m.added.is_empty());
        assert_eq!(m.lines.len(), 3, "{:?}", m.lines);
        assert!(m.lines[0].contains("backing /new/a") && m.lines[0].contains("/old/a"));
        assert!(m.lines.iter().any(|l| l.contains("write-policy") && l.contains("recorded")));
        assert!(m.lines.iter().any(|l| l.contains("min-share") && l.contains("does not set")));
    }
}
