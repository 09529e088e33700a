//! Signals: SIGTERM and SIGINT stop a server gracefully (a thread waits for them, says so,
//! and stops it as `ember ctl stop` does: systemd is told STOPPING, the NBD server drains,
//! the clean shutdown of the cache follows in [`crate::Running::wait`]); SIGHUP reloads
//! the config file as `ember ctl reload` does (systemd's `ExecReload`).

use std::sync::Arc;
use std::thread::JoinHandle;

use anyhow::Context;
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::iterator::{Handle, Signals};

use crate::console::Console;
use crate::control::{Command, Control};

/// The signal handlers and their waiting thread.
pub(crate) struct SignalWatch {
    handle: Handle,
    thread: JoinHandle<()>,
}

impl SignalWatch {
    /// Install the handlers: the first SIGTERM or SIGINT stops the server, each SIGHUP
    /// reloads it.
    pub fn start(control: Arc<Control>, console: Arc<dyn Console>) -> anyhow::Result<SignalWatch> {
        let mut signals =
            Signals::new([SIGTERM, SIGINT, SIGHUP]).context("installing signal handlers")?;
        let handle = signals.handle();
        let thread = std::thread::Builder::new().name("signals".into()).spawn(move || {
            for sig in signals.forever() {
                if sig == SIGHUP {
                    match control.handle(&Command::Reload, &mut |_, _| {}) {
                        Ok(report) => console.say(&format!("reloaded: {report}")),
                        Err(e) => console.warn(&format!("reload refused: {e}")),
                    }
                    continue;
                }
                console.warn(&format!("signal {sig}, shutting down"));
                control.stop();
                return;
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
