//! The volume commands of the control plane (docs/reference/control.md): `attach` opens a
//! backing as `--backing NAME=SPEC` would and hands it to the engine, which records it on
//! the cache device and serves it cold; `uncache` and `recache` turn a volume's caching off
//! (its blocks written back and dropped, the export served from backing) and on again;
//! `remove` stops an export, refused while clients are connected to it unless forced (their
//! new requests then fail with ESHUTDOWN, the ones in flight finish first).
//!
//! Each runs under the lock `set` and `reload` hold, and keeps the configuration in force
//! (`status`'s backings) in step: an attached volume joins its volumes, a removed one leaves
//! them. The cache device records the change (an attached volume's backing as given, in the
//! same change as its slot), so a restart serves the recorded set whether or not it names
//! the volume (docs/reference/layout.md, the restart rule); the config file is changed only
//! when `attach` is asked to save (its `[[volume]]` table appended, as `set --save` writes a
//! key).

use super::volume_settings::with_value;
use super::Control;
use crate::backing::open_backing;
use crate::config::{save_new_volume, save_volume_setting, BackingVolume, VolumeOwn};
use crate::plan::Plan;
use ember_engine::VolumeChange;
use serde_json::{json, Value};
use std::collections::BTreeMap;

fn reply(c: &VolumeChange) -> Value {
    json!({
        "volume": c.volume,
        "slot": c.slot,
        "written_back": c.written_back,
        "dropped": c.dropped,
        "seconds": c.took.as_secs_f64(),
    })
}

impl Control {
    /// Record `v`'s backing as given and its own settings on the cache device.
    pub(super) fn record_volume(&self, v: &BackingVolume) -> Result<(), String> {
        let rec = crate::recorded::record_of(v);
        self.engine.record_volumes(&[(v.name.clone(), rec)]).map(drop).map_err(|e| e.to_string())
    }

    /// Attach `name` over `backing`, then give it `settings` (as `set --volume` does, saved
    /// too with `save`). Every setting is checked before anything is attached, as the whole
    /// configuration with the volume would be (and a share against the cache's): a key
    /// that is not a volume's own setting, or a value its setting refuses, attaches nothing.
    /// The settings are then applied together: if the engine still refuses one, the volume
    /// stays attached with none of them, and the error says which.
    pub(super) fn attach(
        &self,
        name: &str,
        backing: &str,
        save: bool,
        settings: &BTreeMap<String, String>,
    ) -> Result<Value, String> {
        let mut paths = Vec::new();
        for key in settings.keys() {
            paths.push(super::volume_settings::volume_key(key)?);
        }
        let _changing = self.changing.lock();
        if save && self.source.as_ref().and_then(|s| s.file()).is_none() {
            return Err(format!(
                "{name} is not attached: not saved: the server was started without a config file"
            ));
        }
        let checked = if settings.is_empty() {
            None
        } else {
            Some(self.check_attach(name, backing, settings, &paths)?)
        };
        let mut r = self.attach_cold(name, backing, save)?;
        let Some((volume, own, stored)) = checked else {
            r["settings"] = Value::Object(serde_json::Map::new());
            return Ok(r);
        };
        let mut groups: Vec<&[&str]> = Vec::new();
        for (key, path) in settings.keys().zip(&paths) {
            let group = &path[..1];
            if groups.contains(&group) {
                continue;
            }
            if let Err(e) = self.apply_volume(group, &own) {
                // None of them in force: each group applied so far back to the cache-wide.
                let wide = VolumeOwn::cache_wide(name);
                for g in &groups {
                    let _ = self.apply_volume(g, &wide);
                }
                return Err(format!(
                    "{name} is attached, with none of its settings: its {key} was not set: {e:#}"
                ));
            }
            groups.push(group);
        }
        self.record_volume(&volume)
            .map_err(|e| format!("{name} is attached with its settings, but not recorded: {e}"))?;
        {
            let mut state = self.state.lock();
            if let Some(v) = state.config.volumes.iter_mut().find(|v| v.name == name) {
                *v = volume;
            }
        }
        if save {
            if let Some(file) = self.source.as_ref().and_then(|s| s.file()) {
                for (path, value) in paths.iter().zip(&stored) {
                    save_volume_setting(file, name, path, value.as_ref())
                        .map_err(|e| format!("{name} is attached with its settings, but {e:#}"))?;
                }
            }
        }
        let applied: serde_json::Map<String, Value> =
            settings.iter().map(|(k, v)| (k.clone(), Value::from(v.as_str()))).collect();
        tracing::info!(volume = name, settings = ?settings, "attached volume's settings applied");
        r["settings"] = Value::Object(applied);
        Ok(r)
    }

    /// Check `settings` (at `paths`) for volume `name` over `backing` before it is attached:
    /// the volume with them, its own settings, and each value as stored.
    #[allow(clippy::type_complexity, reason = "one private result")]
    fn check_attach(
        &self,
        name: &str,
        backing: &str,
        settings: &BTreeMap<String, String>,
        paths: &[&'static [&'static str]],
    ) -> Result<(BackingVolume, VolumeOwn, Vec<Option<toml::Value>>), String> {
        let refused = |e: String| format!("{name} is not attached: {e}");
        let plain = BackingVolume::new(name, backing);
        let mut t = toml::Table::try_from(&plain).map_err(|e| e.to_string())?;
        let mut volume = plain;
        let mut stored = Vec::new();
        for ((key, text), path) in settings.iter().zip(paths) {
            let (v, next, value) =
                with_value(name, &t, path, text).map_err(|e| refused(format!("its {key}: {e}")))?;
            (volume, t) = (v, next);
            stored.push(value);
        }
        let mut config = self.state.lock().config.clone();
        config.volumes.retain(|v| v.name != name);
        config.volumes.push(volume.clone());
        let plan = Plan::check(&config).map_err(|e| refused(format!("{e:#}")))?;
        let own = plan
            .engine
            .volumes
            .iter()
            .find(|o| o.name == name)
            .cloned()
            .unwrap_or_else(|| VolumeOwn::cache_wide(name));
        let stats = self.engine.stats();
        let limits = own.share_limits(stats.capacity_blocks, u64::from(stats.block_size));
        if limits.is_some() {
            self.engine.check_volume_shares(name, limits).map_err(|e| refused(e.to_string()))?;
        }
        Ok((volume, own, stored))
    }

    /// Attach `name` over `backing`, with no own setting; the caller holds `changing`.
    fn attach_cold(&self, name: &str, backing: &str, save: bool) -> Result<Value, String> {
        let b = BackingVolume::new(name, backing);
        b.check().map_err(|e| format!("{e:#}"))?;
        if self.engine.volume(name).is_some() {
            return Err(format!("volume {name:?} is already exported"));
        }
        let config = self.state.lock().config.clone();
        let dev = open_backing(&b, &config.nbd_backing, config.tiers.queue())
            .map_err(|e| format!("{e:#}"))?;
        let recorded = crate::recorded::record_of(&b);
        let change = self.engine.attach(name, dev, recorded).map_err(|e| {
            tracing::warn!(volume = name, error = %e, "attach refused");
            e.to_string()
        })?;
        {
            let mut state = self.state.lock();
            state.config.volumes.retain(|v| v.name != name);
            state.config.volumes.push(b);
        }
        tracing::info!(volume = name, backing, slot = change.slot, "volume attached");
        if save {
            let Some(file) = self.source.as_ref().and_then(|s| s.file()) else {
                return Err(format!(
                    "{name} is attached, but not saved: the server was started without a \
                     config file"
                ));
            };
            save_new_volume(file, name, backing)
                .map_err(|e| format!("{name} is attached, but {e:#}"))?;
        }
        let mut r = reply(&change);
        r["backing"] = Value::from(backing);
        r["saved"] = Value::from(save);
        Ok(r)
    }

    pub(super) fn uncache(
        &self,
        name: &str,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<Value, String> {
        let _changing = self.changing.lock();
        tracing::info!(volume = name, "uncache started");
        let change =
            self.engine.uncache(name, &mut |p| progress(p.done, p.total)).map_err(|e| {
                tracing::warn!(volume = name, error = %e, "uncache failed");
                e.to_string()
            })?;
        tracing::info!(
            volume = name,
            written_back = change.written_back,
            dropped = change.dropped,
            "volume uncached"
        );
        Ok(reply(&change))
    }

    pub(super) fn recache(&self, name: &str) -> Result<Value, String> {
        let _changing = self.changing.lock();
        let change = self.engine.recache(name).map_err(|e| e.to_string())?;
        tracing::info!(volume = name, "volume cached again");
        Ok(reply(&change))
    }

    pub(super) fn remove(
        &self,
        name: &str,
        force: bool,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<Value, String> {
        let _changing = self.changing.lock();
        if self.engine.volume(name).is_none() {
            return Err(format!(
                "no volume {name:?} is exported (volumes: {})",
                self.engine.volume_names().join(", ")
            ));
        }
        let clients = self.clients.count(name);
        if clients > 0 && !force {
            return Err(format!(
                "volume {name:?} has {clients} client connection(s): disconnect them first, or \
                 use --force (their new requests then fail with ESHUTDOWN)"
            ));
        }
        tracing::info!(volume = name, clients, force, "remove started");
        let change = self.engine.remove(name, &mut |p| progress(p.done, p.total)).map_err(|e| {
            tracing::warn!(volume = name, error = %e, "remove failed");
            e.to_string()
        })?;
        self.state.lock().config.volumes.retain(|v| v.name != name);
        tracing::info!(
            volume = name,
            slot = change.slot,
            written_back = change.written_back,
            "volume removed"
        );
        let mut r = reply(&change);
        r["clients"] = Value::from(clients);
        Ok(r)
    }
}
