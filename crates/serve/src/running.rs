//! A server that runs ([`Running`]): what it exports, how to stop it, and its clean shutdown
//! (the NBD server drained, the metrics endpoint stopped, then the engine's clean shutdown,
//! which persists the map so that the next start is warm).

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context;
use ember_engine::{Engine, ShutdownReport, Stats};
use ember_nbd::server::{RunningServer, ShutdownHandle};
use ember_nbd::ListenAddr;

use crate::console::Console;
use crate::control::{Control, ControlSocket};
use crate::metrics::MetricsServer;
use crate::signals::SignalWatch;
use crate::status_ticker::StatusTicker;

/// One volume at one address, as the `export` line names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Exported {
    /// The volume's export name.
    pub name: String,
    /// `nbd://HOST:PORT/NAME`, `nbd+unix:///NAME?socket=PATH`, or `nbds…` when TLS is
    /// required.
    pub uri: String,
}

/// How a server ended: the engine's clean shutdown and its last counters.
#[derive(Debug)]
pub struct Stopped {
    /// What the clean shutdown persisted.
    pub report: ShutdownReport,
    /// The counters at the end.
    pub stats: Stats,
}

/// A server serving its exports. Stop it with [`Running::shutdown`], a [`Running::stopper`]
/// from any thread, or a signal (with [`crate::Options::stop_on_signals`]); [`Running::wait`]
/// returns once it stopped and the cache shut down cleanly. Dropping it without waiting
/// leaves the cache as after a crash: the next start is cold.
pub struct Running {
    engine: Arc<Engine>,
    nbd: RunningServer,
    metrics: Option<MetricsServer>,
    exported: Vec<Exported>,
    attached: Attached,
    console: Arc<dyn Console>,
    memory: bool,
}

/// What runs beside the NBD server and stops with it: the signal handlers, the control
/// socket, the systemd status ticker.
pub(crate) struct Attached {
    pub signals: Option<SignalWatch>,
    pub socket: Option<ControlSocket>,
    pub control: Arc<Control>,
    pub ticker: Option<StatusTicker>,
}

impl Running {
    pub(crate) fn new(
        engine: Arc<Engine>,
        nbd: RunningServer,
        metrics: Option<MetricsServer>,
        exported: Vec<Exported>,
        attached: Attached,
        console: Arc<dyn Console>,
        memory: bool,
    ) -> Running {
        Running { engine, nbd, metrics, exported, attached, console, memory }
    }

    /// The server's control plane (what the control socket's commands call).
    pub fn control(&self) -> &Arc<Control> {
        &self.attached.control
    }

    /// The control socket's path, if it has one.
    pub fn control_socket(&self) -> Option<&std::path::Path> {
        self.attached.socket.as_ref().map(ControlSocket::path)
    }

    /// The engine serving the volumes.
    pub fn engine(&self) -> &Arc<Engine> {
        &self.engine
    }

    /// Every volume at every address, in the order of the `export` lines.
    pub fn exports(&self) -> &[Exported] {
        &self.exported
    }

    /// The addresses the NBD server listens on.
    pub fn addrs(&self) -> &[ListenAddr] {
        self.nbd.addrs()
    }

    /// The metrics endpoint's address, if it serves metrics.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics.as_ref().map(MetricsServer::addr)
    }

    /// A handle that starts the graceful stop from any thread.
    pub fn stopper(&self) -> ShutdownHandle {
        self.nbd.shutdown_handle()
    }

    /// Stop gracefully and wait for the clean shutdown ([`Running::wait`]).
    pub fn shutdown(self) -> anyhow::Result<Stopped> {
        self.stopper().shutdown();
        self.wait()
    }

    /// Wait until the server is stopped, then shut the cache down cleanly and say how it
    /// ended. An NBD server that failed is an error, and the cache is then left as after a
    /// crash.
    pub fn wait(self) -> anyhow::Result<Stopped> {
        let served = self.nbd.join();
        let Attached { signals, socket, control, ticker } = self.attached;
        if let Some(s) = signals {
            s.close();
        }
        if let Some(t) = ticker {
            t.stop();
        }
        if let Some(s) = socket {
            s.close();
        }
        drop(control);
        if let Some(m) = self.metrics {
            m.stop();
        }
        served.context("NBD server")?;
        let report = self.engine.shutdown().context("clean shutdown of the cache")?;
        let s = self.engine.stats();
        let ratio = 100.0 * s.read_hit_ratio();
        let (hits, misses) = (s.total.read_hits, s.total.read_misses);
        self.console.say(&if self.memory {
            format!(
                "clean shutdown: memory cache discarded ({} blocks); read hit ratio {ratio:.2}% \
                 ({hits} hits, {misses} misses)",
                report.persisted_blocks
            )
        } else {
            format!(
                "clean shutdown: {} blocks persisted (checkpoint generation {}); read hit ratio \
                 {ratio:.2}% ({hits} hits, {misses} misses)",
                report.persisted_blocks, report.generation
            )
        });
        Ok(Stopped { report, stats: s })
    }
}
