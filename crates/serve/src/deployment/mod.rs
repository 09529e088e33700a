//! A deployment: client tiers over one array tier, each an `ember serve` run from its own
//! config file, named in a topology file (`deployment.toml`, docs/guide/deployment.md).
//! [`Deployment::load`] reads the topology ([`file`]) and every tier's config file with the
//! loader `ember serve --config` uses ([`crate::ConfigSource`]), and checks that the tiers fit
//! together: one bottom tier (no `backing`), every other tier a client of it whose volumes are
//! NBD exports of it at the address it listens on, every route naming a client tier's volume.
//! `ember sim --deployment` turns it into the laboratory's model; `ember deploy` starts and
//! stops its servers.
//!
//! Relative paths in the topology file and in the tiers' config files are relative to the
//! topology file's directory (`ember deploy` starts every server there).

pub mod file;
pub mod launch;

use std::path::{Path, PathBuf};

use ember_engine::layout::Geometry;
use ember_engine::FormatSpec;
use ember_nbd::client::Endpoint;
use ember_nbd::NbdUri;

use crate::config::{ConfigError, ServeConfig};
use crate::ConfigSource;
use file::error_at;

/// What a tier is in the topology.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// The bottom tier (its backings are files, devices or another server's exports).
    Array,
    /// A client tier: its volumes' backings are exports of the array tier.
    Client,
}

/// One tier, its config file loaded.
#[derive(Clone, Debug)]
pub struct Tier {
    /// Its name in the topology.
    pub name: String,
    /// Its config file (relative to the working directory of the caller).
    pub config_file: PathBuf,
    /// Its configuration, as `ember serve --config` loads it.
    pub config: ServeConfig,
    /// Array or client.
    pub role: Role,
    /// A hit in this tier, ms.
    pub latency_ms: f64,
    /// The array tier: a read of its backing, ms.
    pub backing_latency_ms: f64,
    /// The array tier: an aborted DEMOTE, ms.
    pub aborted_demote_ms: f64,
    /// A client tier: per volume, the index of the array volume it reads from.
    pub array_volumes: Vec<u32>,
    /// Data blocks of its cache device, as formatting lays it out.
    pub capacity_blocks: u64,
    /// The array tier, in the laboratory: it crashes after this many requests of the trace
    /// and restarts from its warmup log (`crash-after-requests`).
    pub crash_after_requests: Option<u64>,
}

/// Where a trace volume's requests go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Route {
    /// The trace's volume name.
    pub trace_volume: String,
    /// The client tier (index into [`Deployment::tiers`]).
    pub tier: usize,
    /// The tier's volume.
    pub volume: u32,
}

/// A topology file and the tiers it names.
#[derive(Clone, Debug)]
pub struct Deployment {
    /// The topology file.
    pub path: PathBuf,
    /// Its directory: relative paths are relative to it.
    pub dir: PathBuf,
    /// Where `ember deploy` keeps logs, pids and sockets.
    pub state_dir: PathBuf,
    /// The tiers, the array first, then the clients in the file's order.
    pub tiers: Vec<Tier>,
    /// The routes, in the file's order.
    pub routes: Vec<Route>,
}

/// Wong & Wilkes' aborted DEMOTE, ms (section 4), when the topology gives none.
pub const DEFAULT_ABORTED_DEMOTE_MS: f64 = 0.16;

impl Deployment {
    /// Read the topology file `path` and the config file of every tier it names.
    pub fn load(path: &Path) -> Result<Deployment, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| error_at(path, "", None, format!("cannot read the topology file: {e}")))?;
        let parsed = file::parse(path, &text)?;
        let at = |offset: usize, message: String| error_at(path, &text, Some(offset), message);
        // A bare file name's parent is empty: the working directory.
        let parent = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let dir = std::path::absolute(&parent).unwrap_or(parent);
        let mut names: Vec<&str> = Vec::new();
        for t in &parsed.tiers {
            if names.contains(&t.name.get_ref().as_str()) {
                return Err(at(
                    t.name.span().start,
                    format!("tier {} named twice", t.name.get_ref()),
                ));
            }
            names.push(t.name.get_ref());
        }
        let bottoms: Vec<_> = parsed.tiers.iter().filter(|t| t.backing.is_none()).collect();
        let array = match bottoms.as_slice() {
            [one] => *one,
            [] => {
                return Err(error_at(
                    path,
                    &text,
                    None,
                    "no bottom tier: every tier names a backing tier".into(),
                ))
            }
            [_, second, ..] => {
                return Err(at(
                    second.name.span().start,
                    "a second tier without `backing`: a deployment has one array tier, the \
                     others name it as their backing"
                        .into(),
                ))
            }
        };
        let array_name = array.name.get_ref().clone();
        let load_tier = |t: &file::TierEntry, role: Role| -> Result<Tier, ConfigError> {
            let config_file = dir.join(t.config.get_ref());
            let config = ConfigSource::new(Some(config_file.clone()), empty(), &[])?.load()?;
            let capacity_blocks = capacity_blocks(&config, &dir)
                .map_err(|e| error_at(&config_file, "", None, format!("{e:#}")))?;
            Ok(Tier {
                name: t.name.get_ref().clone(),
                config_file,
                config,
                role,
                latency_ms: t.latency_ms,
                backing_latency_ms: t.backing_latency_ms.unwrap_or(0.0),
                aborted_demote_ms: t.aborted_demote_ms.unwrap_or(DEFAULT_ABORTED_DEMOTE_MS),
                array_volumes: Vec::new(),
                capacity_blocks,
                crash_after_requests: t.crash_after_requests.as_ref().map(|c| *c.get_ref()),
            })
        };
        let mut tiers = vec![load_tier(array, Role::Array)?];
        for t in parsed.tiers.iter().filter(|t| t.backing.is_some()) {
            let Some(backing) = &t.backing else { continue };
            if backing.get_ref() != &array_name {
                return Err(at(
                    backing.span().start,
                    format!(
                        "tier {} reads from {}, which is not the bottom tier {array_name}: a \
                         deployment is client tiers over one array tier",
                        t.name.get_ref(),
                        backing.get_ref()
                    ),
                ));
            }
            if let Some(c) = &t.crash_after_requests {
                return Err(at(
                    c.span().start,
                    format!(
                        "tier {}: `crash-after-requests` is the array tier's (the laboratory \
                         crashes the array only)",
                        t.name.get_ref()
                    ),
                ));
            }
            let mut tier = load_tier(t, Role::Client)?;
            tier.array_volumes =
                exports_of(&tier, &tiers[0], &dir).map_err(|m| at(backing.span().start, m))?;
            tiers.push(tier);
        }
        let mut routes = Vec::new();
        for r in &parsed.routes {
            let Some(tier) = tiers.iter().position(|t| &t.name == r.tier.get_ref()) else {
                return Err(at(r.tier.span().start, format!("no tier {}", r.tier.get_ref())));
            };
            if tiers[tier].role != Role::Client {
                return Err(at(
                    r.tier.span().start,
                    format!("{} is the array tier: a route names a client tier", r.tier.get_ref()),
                ));
            }
            let volume = match &r.volume {
                None => 0,
                Some(v) => {
                    let vols = &tiers[tier].config.volumes;
                    let i = vols.iter().position(|x| &x.name == v.get_ref()).ok_or_else(|| {
                        at(
                            v.span().start,
                            format!("tier {} has no volume {}", r.tier.get_ref(), v.get_ref()),
                        )
                    })?;
                    i as u32
                }
            };
            routes.push(Route { trace_volume: r.trace_volume.get_ref().clone(), tier, volume });
        }
        let stem =
            path.file_stem().map_or("deployment".into(), |s| s.to_string_lossy().into_owned());
        let state_dir =
            dir.join(parsed.state_dir.unwrap_or_else(|| format!("{stem}.state").into()));
        Ok(Deployment { path: path.to_path_buf(), dir, state_dir, tiers, routes })
    }

    /// The array tier.
    pub fn array(&self) -> &Tier {
        &self.tiers[0]
    }

    /// The client tiers.
    pub fn clients(&self) -> &[Tier] {
        &self.tiers[1..]
    }
}

/// The flags of a server started from its file alone.
fn empty() -> ServeConfig {
    ServeConfig::new("", Vec::new())
}

/// Data blocks of `config`'s cache device as formatting lays it out (4 MiB journal, no
/// warmup log in the device): from `mem:SIZE`, the size of an existing file, or
/// `cache.size` for a file yet to be created.
pub fn capacity_blocks(config: &ServeConfig, dir: &Path) -> anyhow::Result<u64> {
    let c = &config.cache;
    let size = match c.memory_size()? {
        Some(size) => size,
        None => {
            let device = dir.join(&c.device);
            match std::fs::metadata(&device) {
                Ok(m) if m.is_file() => m.len(),
                _ => c.size.ok_or_else(|| {
                    anyhow::anyhow!(
                        "cache device {}: give `[cache] size` (or mem:SIZE) so that its capacity \
                         is known before it exists",
                        c.device.display()
                    )
                })?,
            }
        }
    };
    let spec = FormatSpec::new(Vec::new());
    let g = Geometry::compute(size, c.block_size, spec.journal_bytes, spec.warmup_log_bytes)?;
    Ok(g.data_blocks)
}

/// Per volume of the client tier `client`, the index of the `array` volume its NBD backing
/// names; an error unless every backing is an export of `array` at an address it listens on.
fn exports_of(client: &Tier, array: &Tier, dir: &Path) -> Result<Vec<u32>, String> {
    let listen = &array.config.listen;
    let tcp =
        listen.tcp.clone().or_else(|| listen.unix.is_none().then(|| "127.0.0.1:10809".into()));
    let unix = listen.unix.as_ref().map(|p| dir.join(p));
    let mut out = Vec::new();
    for v in &client.config.volumes {
        let uri = NbdUri::parse(&v.backing).map_err(|e| {
            format!(
                "tier {} volume {}: backing is not an NBD export of tier {}: {e}",
                client.name, v.name, array.name
            )
        })?;
        let at_array = match &uri.endpoint {
            Endpoint::Unix(p) => unix.as_ref().is_some_and(|u| *u == dir.join(p)),
            Endpoint::Tcp(a) => tcp.as_deref() == Some(a.as_str()),
        };
        if !at_array {
            return Err(format!(
                "tier {} volume {}: {} is not where tier {} listens ({})",
                client.name,
                v.name,
                v.backing,
                array.name,
                unix.as_ref().map(|u| u.display().to_string()).or(tcp.clone()).unwrap_or_default()
            ));
        }
        let i =
            array.config.volumes.iter().position(|a| a.name == uri.export).ok_or_else(|| {
                format!(
                    "tier {} volume {}: tier {} exports no {:?}",
                    client.name, v.name, array.name, uri.export
                )
            })?;
        out.push(i as u32);
    }
    Ok(out)
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
