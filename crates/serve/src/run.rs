//! `ember serve` itself: a server with its lines on stdout and stderr, stopped by SIGTERM or
//! SIGINT, shut down cleanly.

use std::sync::Arc;

use crate::build::{Options, Server};
use crate::config::ServeConfig;
use crate::console::Stdio;

/// `ember serve`: start the server `config` describes, with its lines on stdout and stderr
/// and the allocator bounded (`memory_return.rs`), serve until SIGTERM or SIGINT, then shut
/// down cleanly.
pub fn run(config: ServeConfig) -> anyhow::Result<()> {
    crate::memory_return::bound_allocator();
    let options = Options { console: Arc::new(Stdio), stop_on_signals: true };
    Server::start_with(config, options)?.wait().map(drop)
}
