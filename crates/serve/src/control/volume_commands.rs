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

use super::Control;
use crate::backing::open_backing;
use crate::config::{save_new_volume, BackingVolume};
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
    /// too with `save`). A key that is not a volume's own setting refuses the attach; a value
    /// refused by its setting leaves the volume attached, and the reply's error says so.
    pub(super) fn attach(
        &self,
        name: &str,
        backing: &str,
        save: bool,
        settings: &BTreeMap<String, String>,
    ) -> Result<Value, String> {
        for key in settings.keys() {
            super::volume_settings::volume_key(key)?;
        }
        let mut r = self.attach_cold(name, backing, save)?;
        let mut applied = serde_json::Map::new();
        for (key, value) in settings {
            self.set_volume(name, key, value, save)
                .map_err(|e| format!("{name} is attached, but its {key} was not set: {e}"))?;
            applied.insert(key.clone(), Value::from(value.as_str()));
        }
        r["settings"] = Value::Object(applied);
        Ok(r)
    }

    fn attach_cold(&self, name: &str, backing: &str, save: bool) -> Result<Value, String> {
        let _changing = self.changing.lock();
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
