//! Where a server's lines go: what it opened and how, the exports, `ready`, the preload's
//! progress, the clean shutdown. `ember serve` prints them ([`Stdio`]); scripts and tests
//! parse the `export` and `ready` lines.

/// The receiver of a server's lines. Called from the starting thread and from the server's
/// own threads (preload progress, signals, shutdown).
pub trait Console: Send + Sync {
    /// A line of the server's progress (on stdout in `ember serve`).
    fn say(&self, line: &str);
    /// An event an operator should see at once, such as the signal that stops the server
    /// (on stderr in `ember serve`).
    fn warn(&self, line: &str);
}

/// `ember serve`'s console: [`Console::say`] on stdout, prefixed with `ember serve: `;
/// [`Console::warn`] a warning event through `tracing` (one line on stderr, in the format
/// `--log-format` chose).
#[derive(Clone, Copy, Debug, Default)]
pub struct Stdio;

impl Console for Stdio {
    fn say(&self, line: &str) {
        println!("ember serve: {line}");
    }

    fn warn(&self, line: &str) {
        tracing::warn!("{line}");
    }
}
