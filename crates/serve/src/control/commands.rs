//! What each control command does ([`Control`]): `status`, `flush`, `get`, `set`,
//! `reload` and `stop`, over the engine, the NBD server and the configuration in force; the
//! volume commands (`attach`, `uncache`, `recache`, `remove`) are in `volume_commands.rs`,
//! `replace-cache` in `replace_cache.rs`.
//!
//! The configuration in force is the config file with the command line over it, and the
//! `set` values over both until the server stops. `reload` reads the file again: the flags
//! keep overriding it, the `set` values it replaces are reported, what can change live is
//! applied, and what cannot is reported as needing a restart (the value in force stays).
//! Changes (`set`, `reload`) run one at a time; `status` and `get` never wait for them.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use ember_engine::{Engine, WriteMode};
use ember_nbd::server::ShutdownHandle;
use parking_lot::Mutex;
use serde_json::{json, Value};

use super::engine_live;
use super::protocol::Command;
use super::status::{Status, StatusSources};
use crate::clients::Clients;
use crate::config::{get_value, save_setting, set_value, Key, ServeConfig, KEYS};
use crate::config_source::ConfigSource;
use crate::degraded::Bookkeeping;
use crate::notify::Notifier;
use crate::plan::Plan;

/// The control plane of one server.
pub struct Control {
    engine: Arc<Engine>,
    nbd: ShutdownHandle,
    /// The connections to each export (`remove` refuses to stop one with clients).
    clients: Arc<Clients>,
    /// Degraded mode's bookkeeping (the state file, the cache device in service).
    book: Arc<Bookkeeping>,
    source: Option<ConfigSource>,
    state: Mutex<State>,
    /// Held by `set` and `reload` while they change the server.
    changing: Mutex<()>,
    notify: Arc<Notifier>,
    started: Instant,
}

struct State {
    config: ServeConfig,
    /// The values `set` gave, by flag, in force until a reload replaces them.
    sets: BTreeMap<&'static str, toml::Value>,
}

/// One group of settings the engine or the NBD server applies together.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Group {
    Limits,
    Writeback,
    Replacement,
    Admission,
    WritePolicy,
    SeqCutoff,
    Cleaning,
}

#[path = "replace_cache.rs"]
mod replace_cache;
#[path = "volume_commands.rs"]
mod volume_commands;
#[path = "volume_settings.rs"]
mod volume_settings;

fn group(key: &Key) -> Option<Group> {
    match key.path {
        ["live", "limits", ..] => Some(Group::Limits),
        ["live", "writeback", ..] => Some(Group::Writeback),
        ["live", "policy"] => Some(Group::Replacement),
        ["live", "admission"] | ["live", "epoch-count-memory"] | ["live", "sieve", ..] => {
            Some(Group::Admission)
        }
        ["live", "write-policy"] => Some(Group::WritePolicy),
        ["live", "seq-cutoff", ..] => Some(Group::SeqCutoff),
        ["live", "cleaning", ..] => Some(Group::Cleaning),
        _ => None,
    }
}

/// The keys whose values differ between `a` and `b`.
fn changed(a: &toml::Table, b: &toml::Table) -> Vec<&'static Key> {
    KEYS.iter().filter(|k| get_value(a, k.path) != get_value(b, k.path)).collect()
}

fn table(config: &ServeConfig) -> Result<toml::Table, String> {
    toml::Table::try_from(config).map_err(|e| e.to_string())
}

fn from_table(t: toml::Table) -> Result<ServeConfig, String> {
    use serde::Deserialize;
    ServeConfig::deserialize(toml::Value::Table(t)).map_err(from_table_err)
}

/// A deserialization error of a table, as a message.
fn from_table_err(e: toml::de::Error) -> String {
    e.message().trim().to_string()
}

/// `text` as the TOML value a file would hold: a number, a boolean, or else a string.
fn typed(text: &str) -> toml::Value {
    format!("v = {text}")
        .parse::<toml::Table>()
        .ok()
        .and_then(|mut t| t.remove("v"))
        .filter(|v| !v.is_table() && !v.is_array())
        .unwrap_or_else(|| toml::Value::String(text.to_string()))
}

impl Control {
    /// The control plane of a server serving `engine` through `nbd`, configured as
    /// `config` (from `source`, when it was started from a config file).
    pub(crate) fn new(
        engine: Arc<Engine>,
        nbd: ShutdownHandle,
        clients: Arc<Clients>,
        book: Arc<Bookkeeping>,
        config: ServeConfig,
        source: Option<ConfigSource>,
        notify: Arc<Notifier>,
    ) -> Control {
        Control {
            engine,
            nbd,
            clients,
            book,
            source,
            state: Mutex::new(State { config, sets: BTreeMap::new() }),
            changing: Mutex::new(()),
            notify,
            started: Instant::now(),
        }
    }

    /// Carry out `command`, reporting a long one's progress (done, total); the result or
    /// why it failed. `stop` only answers: the caller stops the server after replying.
    pub fn handle(
        &self,
        command: &Command,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<Value, String> {
        match command {
            Command::Status => serde_json::to_value(self.status()).map_err(|e| e.to_string()),
            Command::Flush { volume } => self.flush(volume.as_deref(), progress),
            Command::Get { key, volume: Some(v) } => self.get_volume(v, key),
            Command::Get { key, volume: None } => self.get(key),
            Command::Set { key, value, save, volume: Some(v) } => {
                self.set_volume(v, key, value, *save)
            }
            Command::Set { key, value, save, volume: None } => {
                self.set(key, value, *save, progress)
            }
            Command::Reload => self.reload(progress),
            Command::Stop => Ok(json!({ "stopping": true })),
            Command::Attach { volume, backing, save, settings } => {
                self.attach(volume, backing, *save, settings)
            }
            Command::Uncache { volume } => self.uncache(volume, progress),
            Command::Recache { volume } => self.recache(volume),
            Command::Remove { volume, force } => self.remove(volume, *force, progress),
            Command::ClearLost { volume } => super::clear_lost::clear_lost(&self.engine, volume),
            Command::ReplaceCache { path, format } => self.replace_cache(path, *format),
        }
    }

    /// The server's and every volume's state now.
    pub fn status(&self) -> Status {
        let config = self.state.lock().config.clone();
        Status::read(StatusSources {
            engine: &self.engine,
            nbd: &self.nbd,
            name: self.source.as_ref().and_then(|s| s.name(&config)).or(config.name.clone()),
            config_file: self.source.as_ref().and_then(|s| s.file().map(Into::into)),
            config: &config,
            uptime_secs: self.started.elapsed().as_secs_f64(),
        })
    }

    /// Stop as SIGTERM does.
    pub fn stop(&self) {
        self.notify.stopping();
        self.nbd.shutdown();
    }

    fn flush(
        &self,
        volume: Option<&str>,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<Value, String> {
        if let Some(v) = volume {
            if self.engine.volume(v).is_none() {
                return Err(format!(
                    "no volume {v:?} (volumes: {})",
                    self.engine.volume_names().join(", ")
                ));
            }
        }
        let start = Instant::now();
        tracing::info!(volume = volume.unwrap_or("all"), "flush started");
        let written = engine_live::flush_all(&self.engine, volume, progress).map_err(|e| {
            tracing::warn!(volume = volume.unwrap_or("all"), error = %format!("{e:#}"), "flush failed");
            format!("{e:#}")
        })?;
        let secs = start.elapsed().as_secs_f64();
        tracing::info!(
            volume = volume.unwrap_or("all"),
            blocks = written,
            seconds = secs,
            "flush done"
        );
        Ok(json!({ "volume": volume, "blocks": written, "seconds": secs }))
    }

    fn key(name: &str) -> Result<&'static Key, String> {
        Key::find(name).ok_or_else(|| {
            format!("no setting {name:?}: a setting is named as its ember serve flag (write-policy, max-dirty, ...)")
        })
    }

    fn get(&self, name: &str) -> Result<Value, String> {
        let key = Self::key(name)?;
        let state = self.state.lock();
        let t = table(&state.config)?;
        let value = get_value(&t, key.path).cloned();
        let from = if state.sets.contains_key(key.flag) {
            "set"
        } else if self.source.as_ref().is_some_and(|s| s.overridden(key)) {
            "command line"
        } else if self.source.as_ref().is_some_and(|s| s.file().is_some()) {
            "file or default"
        } else {
            "command line or default"
        };
        Ok(json!({
            "key": key.flag,
            "path": key.dotted(),
            "value": value.map(|v| toml_to_json(&v)),
            "live": key.live,
            "from": from,
        }))
    }

    fn set(
        &self,
        name: &str,
        text: &str,
        save: bool,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<Value, String> {
        let key = Self::key(name)?;
        if !key.live {
            return Err(format!(
                "{} cannot change while serving: change it in the config file and restart",
                key.flag
            ));
        }
        let _changing = self.changing.lock();
        let old = self.state.lock().config.clone();
        let old_t = table(&old)?;
        let mut new = None;
        let mut last_error = String::new();
        for value in [typed(text), toml::Value::String(text.to_string())] {
            let mut t = old_t.clone();
            set_value(&mut t, key.path, value);
            match from_table(t) {
                Ok(c) => {
                    new = Some(c);
                    break;
                }
                Err(e) => last_error = e,
            }
        }
        let new = new.ok_or_else(|| format!("{} {text:?}: {last_error}", key.flag))?;
        if new == old {
            return Ok(json!({ "key": key.flag, "value": text, "changed": false, "saved": false }));
        }
        let plan = Plan::check(&new).map_err(|e| format!("{e:#}"))?;
        let group =
            group(key).ok_or_else(|| format!("{} cannot change while serving", key.flag))?;
        self.apply(group, &old, &new, &plan, progress)
            .map_err(|e| format!("{} {text}: {e:#}", key.flag))?;
        let new_t = table(&new)?;
        let stored =
            get_value(&new_t, key.path).cloned().unwrap_or(toml::Value::String(text.into()));
        {
            let mut state = self.state.lock();
            state.config = new;
            state.sets.insert(key.flag, stored.clone());
        }
        let mut note = None;
        if save {
            let source = self.source.as_ref().filter(|s| s.file().is_some());
            let Some(file) = source.and_then(|s| s.file()) else {
                return Err(format!(
                    "{} is now {text}, but not saved: the server was started without a config file",
                    key.flag
                ));
            };
            save_setting(file, key, &stored)
                .map_err(|e| format!("{} is now {text}, but {e:#}", key.flag))?;
            if source.is_some_and(|s| s.overridden(key)) {
                note = Some(format!("--{} on the command line still overrides the file", key.flag));
            }
        }
        let old_v = get_value(&old_t, key.path).map(toml_to_json);
        let old_text = old_v.clone().unwrap_or(Value::Null).to_string();
        let new_text = toml_to_json(&stored).to_string();
        tracing::info!(key = key.flag, old = %old_text, new = %new_text, saved = save, "setting changed");
        Ok(json!({
            "key": key.flag,
            "old": old_v,
            "value": toml_to_json(&stored),
            "changed": true,
            "saved": save,
            "note": note,
        }))
    }

    /// Apply `group` of `new` (checked into `plan`) to the running server; `old` is the
    /// configuration in force; a write-policy switch reports its drain through `progress`.
    fn apply(
        &self,
        group: Group,
        old: &ServeConfig,
        new: &ServeConfig,
        plan: &Plan,
        progress: &mut dyn FnMut(u64, u64),
    ) -> anyhow::Result<()> {
        let e = &plan.engine;
        match group {
            Group::Limits => {
                let l = &plan_limits(plan);
                self.nbd.set_limits(l.0, l.1).map_err(anyhow::Error::from)
            }
            Group::Writeback => engine_live::set_writeback(&self.engine, e.writeback),
            Group::Replacement => {
                if old.tiers.array_scheme.is_some() {
                    anyhow::bail!("an array tier's scheme replaces the replacement policy");
                }
                engine_live::set_replacement(&self.engine, e.kind)
            }
            Group::Admission => {
                let live = &new.live;
                let spec = live
                    .sieve
                    .spec(&live.admission)
                    .map_err(|e| anyhow::anyhow!("admission: {e}"))?;
                engine_live::set_admission(&self.engine, &spec)
            }
            Group::WritePolicy => engine_live::set_write_mode(&self.engine, e.write_mode, progress),
            Group::SeqCutoff => {
                engine_live::set_seq_cutoff(&self.engine, e.seq_cutoff);
                Ok(())
            }
            Group::Cleaning => engine_live::set_cleaning(&self.engine, &e.cleaning),
        }
    }

    fn reload(&self, progress: &mut dyn FnMut(u64, u64)) -> Result<Value, String> {
        let Some(source) = self.source.as_ref().filter(|s| s.file().is_some()) else {
            return Err("nothing to reload: the server was started without --config".into());
        };
        self.notify.reloading();
        let result = self.reload_from(source, progress);
        self.notify.ready();
        self.notify.status(&self.status().summary());
        match &result {
            Ok(v) => tracing::info!(report = %v, "reloaded"),
            Err(e) => tracing::warn!(error = %e, "reload refused"),
        }
        result
    }

    fn reload_from(
        &self,
        source: &ConfigSource,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<Value, String> {
        let mut file = source.load().map_err(|e| e.to_string())?;
        let _changing = self.changing.lock();
        // The file over the volumes the cache device records and serves, as at start.
        let served: Vec<_> = self
            .engine
            .recorded()
            .into_iter()
            .filter(|r| self.engine.volume(&r.name).is_some())
            .collect();
        for line in crate::recorded::merge(&mut file, &served).lines {
            tracing::info!("reload: {line}");
        }
        let (old, sets) = {
            let s = self.state.lock();
            (s.config.clone(), s.sets.clone())
        };
        let old_t = table(&old)?;
        let file_t = table(&file)?;
        let replaced: Vec<Value> = sets
            .iter()
            .filter_map(|(flag, set)| {
                let key = Key::find(flag)?;
                let now = get_value(&file_t, key.path);
                (now != Some(set)).then(|| {
                    json!({ "key": flag, "set": toml_to_json(set), "file": now.map(toml_to_json) })
                })
            })
            .collect();
        let keys = changed(&old_t, &file_t);
        let plan = Plan::check(&file).map_err(|e| format!("{e:#}"))?;
        // The volumes' own settings first (a volume's write policy of its own must be gone
        // before the cache-wide one switches); the volume set itself needs a restart.
        let volumes = self.reload_volumes(&old, &file, &plan);
        let keys: Vec<&Key> =
            keys.into_iter().filter(|k| !(k.flag == "backing" && volumes.is_some())).collect();
        let mut groups: Vec<Group> = keys.iter().filter_map(|k| group(k)).collect();
        groups.sort();
        groups.dedup();
        // Into a write-back policy, the sieve first (a discrete sieve cannot follow dirty
        // blocks); out of one, the policy first.
        if plan.engine.write_mode.is_write_back() {
            groups.sort_by_key(|g| (*g == Group::WritePolicy) as u8);
        } else {
            groups.sort_by_key(|g| (*g != Group::WritePolicy) as u8);
        }
        let mut refused = Vec::new();
        let mut kept: Vec<&Key> = Vec::new();
        for g in groups {
            if let Err(e) = self.apply(g, &old, &file, &plan, progress) {
                let names: Vec<_> =
                    keys.iter().filter(|k| group(k) == Some(g)).map(|k| k.flag).collect();
                refused.push(json!({ "keys": names, "reason": format!("{e:#}") }));
                kept.extend(keys.iter().filter(|k| group(k) == Some(g)));
            }
        }
        let restart: Vec<&Key> = keys.iter().copied().filter(|k| !k.live).collect();
        // In force now: the file, except what needs a restart or was refused.
        let mut now_t = file_t.clone();
        for k in restart.iter().chain(kept.iter()) {
            match get_value(&old_t, k.path) {
                Some(v) => set_value(&mut now_t, k.path, v.clone()),
                None => remove_value(&mut now_t, k.path),
            }
        }
        let mut now = from_table(now_t)?;
        let mut applied: Vec<String> = keys
            .iter()
            .filter(|k| k.live && !kept.iter().any(|x| x.flag == k.flag))
            .map(|k| k.flag.to_string())
            .collect();
        if let Some(v) = volumes {
            for i in v.kept {
                now.volumes[i] = old.volumes[i].clone();
            }
            applied.extend(v.applied);
            refused.extend(v.refused);
        }
        for v in now.volumes.iter().filter(|v| self.engine.volume(&v.name).is_some()) {
            if let Err(e) = self.record_volume(v) {
                refused.push(json!({
                    "keys": [format!("volume.{}", v.name)],
                    "reason": format!("in force, but not recorded on the cache device: {e}"),
                }));
            }
        }
        {
            let mut s = self.state.lock();
            s.config = now;
            s.sets.retain(|flag, _| kept.iter().any(|k| k.flag == *flag));
        }
        Ok(json!({
            "applied": applied,
            "refused": refused,
            "restart": restart.iter().map(|k| k.flag).collect::<Vec<_>>(),
            "replaced_sets": replaced,
        }))
    }

    /// The write policy in force.
    pub fn write_mode(&self) -> WriteMode {
        self.engine.write_mode()
    }

    /// Send systemd the status line.
    pub fn notify_status(&self) {
        if self.notify.enabled() {
            self.notify.status(&self.status().summary());
        }
    }
}

/// The connection limit and the buffer budget of a checked plan.
fn plan_limits(plan: &Plan) -> (usize, u64) {
    (plan.net.max_connections, plan.net.shared_budget)
}

fn remove_value(t: &mut toml::Table, path: &[&str]) {
    let Some((last, tables)) = path.split_last() else {
        return;
    };
    let mut t = t;
    for p in tables {
        match t.get_mut(*p) {
            Some(toml::Value::Table(inner)) => t = inner,
            _ => return,
        }
    }
    t.remove(*last);
}

/// A TOML value as JSON (dates as strings).
pub(crate) fn toml_to_json(v: &toml::Value) -> Value {
    match v {
        toml::Value::String(s) => Value::from(s.as_str()),
        toml::Value::Integer(i) => Value::from(*i),
        toml::Value::Float(f) => Value::from(*f),
        toml::Value::Boolean(b) => Value::from(*b),
        toml::Value::Datetime(d) => Value::from(d.to_string()),
        toml::Value::Array(a) => Value::Array(a.iter().map(toml_to_json).collect()),
        toml::Value::Table(t) => {
            Value::Object(t.iter().map(|(k, v)| (k.clone(), toml_to_json(v))).collect())
        }
    }
}
