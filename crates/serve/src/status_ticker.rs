//! The systemd status line kept current: a thread that sends `STATUS=` (hit ratio, dirty
//! blocks, warmup) every [`EVERY`] while the server runs under a `$NOTIFY_SOCKET`.

use std::sync::mpsc::{channel, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crate::control::Control;

/// How often the status line is sent.
pub const EVERY: Duration = Duration::from_secs(5);

/// The ticking thread.
pub(crate) struct StatusTicker {
    stop: Sender<()>,
    thread: JoinHandle<()>,
}

impl StatusTicker {
    /// Start ticking; `None` if the thread cannot start (the status line then only
    /// changes at start and reload).
    pub fn start(control: Arc<Control>) -> Option<StatusTicker> {
        let (stop, stopped) = channel::<()>();
        let thread = std::thread::Builder::new()
            .name("ember-status".into())
            .spawn(move || loop {
                match stopped.recv_timeout(EVERY) {
                    Err(RecvTimeoutError::Timeout) => control.notify_status(),
                    _ => return,
                }
            })
            .ok()?;
        Some(StatusTicker { stop, thread })
    }

    /// Stop and join.
    pub fn stop(self) {
        let _ = self.stop.send(());
        let _ = self.thread.join();
    }
}
