//! Building a server from a [`ServeConfig`] ([`Server::start`]): the settings checked
//! (`plan.rs`), then the backings, the cache device, the engine, its batch sieve and warmup,
//! the NBD server with its listeners, the metrics endpoint; the lines that say what was
//! opened, the `export` lines and, once it serves, `ready`. What runs is a [`Running`].

use std::sync::Arc;

use anyhow::{anyhow, Context};
use ember_engine::{Engine, EngineConfig, EngineError, VolumeConfig, VolumeSpec};
use ember_nbd::server::TlsMode;
use ember_nbd::{ExportSet, ListenAddr, ServerStats};

use crate::backing::open_backing;
use crate::cache_device::open_cache;
use crate::config::ServeConfig;
use crate::config_source::ConfigSource;
use crate::console::{Console, Stdio};
use crate::control::{default_socket, Control, ControlSocket};
use crate::memory_return::ReturnOnClose;
use crate::metrics::{server_render, MetricsServer};
use crate::notify::Notifier;
use crate::plan::{EnginePlan, Plan};
use crate::running::{Exported, Running};
use crate::signals::SignalWatch;
use crate::status_ticker::StatusTicker;
use crate::tiers::array_replacement;
use crate::writeback::dirty_limit_message;
use crate::EngineExports;

/// How a server runs, beside what it is configured to be: where its lines go, whether
/// signals stop and reload it, where a reload reads its configuration, whether it opens
/// its control socket at the default path and notifies systemd.
#[derive(Clone)]
pub struct Options {
    /// Where the server's lines go.
    pub console: Arc<dyn Console>,
    /// Stop gracefully on SIGTERM or SIGINT and reload on SIGHUP (process-wide handlers:
    /// `ember serve` sets it, a library user usually does not).
    pub stop_on_signals: bool,
    /// Where the configuration came from, read again by `reload` (without it, `reload`
    /// has nothing to read).
    pub source: Option<ConfigSource>,
    /// Without a configured control socket, open one at the default path
    /// ([`crate::control::default_socket`]); one already answered there is then skipped
    /// with a warning. A configured socket is always opened, and its failure is an error.
    pub default_control: bool,
    /// Notify systemd through `$NOTIFY_SOCKET` (READY, RELOADING, STOPPING, STATUS).
    pub notify: bool,
}

impl Default for Options {
    /// Lines on stdout and stderr as `ember serve` prints them; no signal handlers, no
    /// config file, a control socket only where configured, no systemd notification.
    fn default() -> Self {
        Options {
            console: Arc::new(Stdio),
            stop_on_signals: false,
            source: None,
            default_control: false,
            notify: false,
        }
    }
}

/// Builds and starts servers.
pub struct Server;

impl Server {
    /// Build and start the server `config` describes, with the default [`Options`].
    pub fn start(config: ServeConfig) -> anyhow::Result<Running> {
        Server::start_with(config, Options::default())
    }

    /// Build and start the server `config` describes: when this returns, every export is
    /// served and `ready` has been said. Every setting that can be checked without the
    /// devices is checked before any of them is opened.
    pub fn start_with(mut config: ServeConfig, options: Options) -> anyhow::Result<Running> {
        let console = options.console;
        // The volumes the cache device records and the configuration does not name join
        // it before anything is checked.
        let unopened = crate::recorded::at_start(&mut config, console.as_ref())?;
        let Plan { engine, warmup, memory, net } = Plan::check(&config)?;
        let name = match &options.source {
            Some(s) => s.name(&config),
            None => config.name.clone(),
        };
        let control_path = config
            .control
            .clone()
            .or_else(|| options.default_control.then(|| default_socket(name.as_deref())));
        let state = crate::degraded::state_file(
            &config,
            options.source.as_ref().and_then(|s| s.file()),
            control_path.as_deref(),
            name.as_deref(),
        );
        let prior = crate::degraded::before_open(&config, state, console.as_ref())?;
        let config = prior.effective(config);
        let engine = Arc::new(open_engine(&config, engine, prior.reformat, console.as_ref())?);
        let open = engine.open_report();
        for name in open.unserved.iter().filter(|n| !unopened.contains(n)) {
            console.say(&format!(
                "volume {name}: recorded on the cache device but not named and not servable \
                 (being removed, or no backing recorded): kept recorded, not exported (name it \
                 again to serve it)"
            ));
        }
        crate::recorded::record_served(&engine, &config, console.as_ref());
        let book = crate::degraded::after_open(&engine, &config, prior, console.clone())?;
        if let Some(w) = &warmup {
            crate::warmup::start(&engine, &config.warmup, w, &console)?;
        }

        let stats = Arc::new(ServerStats::new());
        let exports = Arc::new(EngineExports::new(engine.clone()));
        let clients = exports.clients();
        let builder = ember_nbd::Server::builder(exports as Arc<dyn ExportSet>)
            .observer(Arc::new(ReturnOnClose::new(stats.clone())));
        let builder = crate::net::listen(builder, &config.listen)?;
        let tls = net.tls.as_ref().map(|t| (t.mode(), t.verify_peer()));
        let server = builder.config(net).build().context("starting the NBD server")?;

        let metrics = match &config.metrics {
            Some(addr) => {
                let m = MetricsServer::start(addr, server_render(stats, engine.clone()))?;
                console.say(&format!("metrics http://{}/metrics", m.addr()));
                Some(m)
            }
            None => None,
        };
        if let Some((mode, verify_peer)) = tls {
            console.say(&format!(
                "TLS {} ({}client certificates verified)",
                if mode == TlsMode::Require { "required" } else { "offered" },
                if verify_peer { "" } else { "no " }
            ));
        }
        let secure = tls.is_some_and(|(mode, _)| mode == TlsMode::Require);
        let exported = exported(server.addrs(), &engine.volume_names(), secure);
        for e in &exported {
            console.say(&format!("export {} {}", e.name, e.uri));
        }

        let notify = Arc::new(if options.notify { Notifier::from_env() } else { Notifier::none() });
        let socket_path = config.control.clone();
        let control = Arc::new(Control::new(
            engine.clone(),
            server.shutdown_handle(),
            clients,
            book,
            config,
            options.source,
            notify.clone(),
        ));
        let socket = match socket_path {
            Some(path) => match ControlSocket::bind(&path, control.clone()) {
                Ok(s) => Some(s),
                Err(e) => {
                    if let Some(m) = metrics {
                        m.stop();
                    }
                    return Err(e);
                }
            },
            None if options.default_control => {
                let path = default_socket(name.as_deref());
                match ControlSocket::bind(&path, control.clone()) {
                    Ok(s) => Some(s),
                    Err(e) => {
                        tracing::warn!(error = %format!("{e:#}"), "no control socket: give --control PATH to open one elsewhere");
                        None
                    }
                }
            }
            None => None,
        };
        if let Some(s) = &socket {
            console.say(&format!("control {}", s.path().display()));
        }
        let signals = if options.stop_on_signals {
            match SignalWatch::start(control.clone(), console.clone()) {
                Ok(s) => Some(s),
                Err(e) => {
                    if let Some(s) = socket {
                        s.close();
                    }
                    if let Some(m) = metrics {
                        m.stop();
                    }
                    return Err(e);
                }
            }
        } else {
            None
        };
        let nbd = match server.spawn() {
            Ok(nbd) => nbd,
            Err(e) => {
                if let Some(s) = signals {
                    s.close();
                }
                if let Some(s) = socket {
                    s.close();
                }
                if let Some(m) = metrics {
                    m.stop();
                }
                return Err(anyhow!(e).context("NBD server"));
            }
        };
        console.say("ready");
        notify.ready();
        control.notify_status();
        let ticker = notify.enabled().then(|| StatusTicker::start(control.clone()));
        Ok(Running::new(
            engine,
            nbd,
            metrics,
            exported,
            crate::running::Attached { signals, socket, control, ticker: ticker.flatten() },
            console,
            memory,
        ))
    }
}

/// Open the backings and the cache device, then the engine over them, and start its batch
/// sieve; say what was opened.
fn open_engine(
    config: &ServeConfig,
    plan: EnginePlan,
    reformat: bool,
    console: &dyn Console,
) -> anyhow::Result<Engine> {
    let mut volumes = Vec::new();
    let mut specs = Vec::new();
    for b in &config.volumes {
        let backing = open_backing(b, &config.nbd_backing, config.tiers.queue())?;
        if config.tiers.demote {
            if backing.takes_demotes() {
                console.say(&format!("backing {}: DEMOTE granted, client tier demotes", b.name));
            } else {
                console.say(&format!(
                    "backing {}: takes no DEMOTE (x-ember:demote refused or not NBD), the client \
                     tier runs as NONE-LRU",
                    b.name
                ));
            }
        }
        specs.push(VolumeSpec { name: b.name.clone(), size: backing.size() });
        volumes.push(VolumeConfig { name: b.name.clone(), backing });
    }
    if reformat {
        crate::degraded::reformat(&config.cache, &specs)?;
    }
    let cache = open_cache(&config.cache, &specs, console)?;
    let EnginePlan {
        write_mode,
        kind,
        array_scheme,
        demote_admission,
        admission,
        batch_epoch,
        writeback,
        seq_cutoff,
        cleaning,
        volumes: own,
        shares,
    } = plan;
    let engine = Engine::open_with(
        EngineConfig {
            cache,
            volumes,
            write_mode,
            replacement: Box::new(move |cap| match array_scheme {
                Some(s) => array_replacement(s, cap),
                None if shares => crate::config::under_shares(kind, cap),
                None => ember_policy::replacement::build(kind, cap),
            }),
            admission,
        },
        writeback,
    )
    .map_err(|e| match e {
        EngineError::DirtyLimit(e) => anyhow!(dirty_limit_message(&e)),
        e => anyhow!(e).context(format!("opening cache {}", config.cache.device.display())),
    })?;
    engine.set_demote_admission(demote_admission);
    if let Some(s) = array_scheme {
        console.say(&format!(
            "array tier, scheme {s} (Wong & Wilkes), DEMOTEs {}{}",
            if s.demotes() { "taken" } else { "refused" },
            match (s.demotes(), demote_admission) {
                (false, _) => String::new(),
                (true, d) => format!(", admission of DEMOTEs: {d}"),
            }
        ));
    }
    engine.set_seq_cutoff(seq_cutoff);
    for o in &own {
        crate::control::set_volume_own(&engine, o)
            .with_context(|| format!("volume {}: its own settings", o.name))?;
    }
    engine.set_cleaning(&cleaning).map_err(|e| match e {
        EngineError::DirtyLimit(e) => anyhow!(dirty_limit_message(&e)),
        e => anyhow!(e),
    })?;
    if let Some(epoch_ns) = batch_epoch {
        engine.start_batch_sieve(epoch_ns).context("starting the discrete sieve")?;
    }
    let open = engine.open_report();
    for name in &open.attached {
        console.say(&format!(
            "volume {name}: not recorded on the cache device: recorded now, cached cold"
        ));
    }
    if let Some(up) = &open.upgraded {
        console.say(&format!("cache {}: {up}", config.cache.device.display()));
    }
    let g = engine.geometry();
    console.say(&format!(
        "cache {} start {:?} ({} blocks loaded{}), {} blocks of {} bytes, policy {}, admission \
         {}, {}",
        config.cache.device.display(),
        open.start,
        open.loaded_blocks,
        if open.reason.is_empty() { String::new() } else { format!("; {}", open.reason) },
        g.data_blocks,
        g.block_size,
        kind,
        config.live.admission,
        write_mode.name()
    ));
    Ok(engine)
}

/// Every volume at every address, as a client names it (`nbds` when TLS is required).
fn exported(addrs: &[ListenAddr], volumes: &[String], secure: bool) -> Vec<Exported> {
    let scheme = if secure { "nbds" } else { "nbd" };
    let mut out = Vec::new();
    for addr in addrs {
        for name in volumes {
            let uri = match addr {
                ListenAddr::Tcp(a) => format!("{scheme}://{a}/{name}"),
                ListenAddr::Unix(p) => format!("{scheme}+unix:///{name}?socket={}", p.display()),
            };
            out.push(Exported { name: name.clone(), uri });
        }
    }
    out
}
