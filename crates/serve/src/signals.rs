//! SIGTERM and SIGINT stop a server gracefully: a thread waits for the first of them, says
//! so, and starts the NBD server's drain; the clean shutdown of the cache follows
//! ([`crate::Running::wait`]).

use std::sync::Arc;
use std::thread::JoinHandle;

use anyhow::Context;
use ember_nbd::server::ShutdownHandle;
use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::{Handle, Signals};

use crate::console::Console;

/// The signal handlers and their waiting thread.
pub(crate) struct SignalWatch {
    handle: Handle,
    thread: JoinHandle<()>,
}

impl SignalWatch {
    /// Install the handlers; the first signal calls `stop`.
    pub fn start(stop: ShutdownHandle, console: Arc<dyn Console>) -> anyhow::Result<SignalWatch> {
        let mut signals = Signals::new([SIGTERM, SIGINT]).context("installing signal handlers")?;
        let handle = signals.handle();
        let thread = std::thread::Builder::new().name("signals".into()).spawn(move || {
            if let Some(sig) = signals.forever().next() {
                console.warn(&format!("signal {sig}, shutting down"));
                stop.shutdown();
            }
        })?;
        Ok(SignalWatch { handle, thread })
    }

    /// Stop waiting and join the thread.
    pub fn close(self) {
        self.handle.close();
        let _ = self.thread.join();
    }
}
