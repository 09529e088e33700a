//! `ember serve` itself: a server with its lines on stdout and its events on stderr,
//! stopped by SIGTERM, SIGINT or `ember ctl stop`, reloaded by SIGHUP or `ember ctl reload`,
//! its control socket at the default path unless configured, systemd notified, shut down
//! cleanly.

use std::sync::Arc;

use crate::build::{Options, Server};
use crate::config::ServeConfig;
use crate::config_source::ConfigSource;
use crate::console::Stdio;

/// `ember serve` of a configuration without a file ([`run_from`]).
pub fn run(config: ServeConfig) -> anyhow::Result<()> {
    run_from(config, None)
}

/// `ember serve`: start the server `config` describes (loaded from `source`, which a reload
/// reads again), with its lines on stdout and stderr and the allocator bounded
/// (`memory_return.rs`), serve until stopped, then shut down cleanly.
pub fn run_from(config: ServeConfig, source: Option<ConfigSource>) -> anyhow::Result<()> {
    crate::memory_return::bound_allocator();
    let options = Options {
        console: Arc::new(Stdio),
        stop_on_signals: true,
        source,
        default_control: true,
        notify: true,
    };
    Server::start_with(config, options)?.wait().map(drop)
}
