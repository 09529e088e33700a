//! What the server reports about its work: an observer trait the server calls for every
//! request and connection, and [`ServerStats`], a ready observer keeping per-command counts,
//! bytes, errors and latency histograms (for the cli to export to Prometheus).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::errno::Errno;
use crate::latency::LatencyHistogram;
use crate::request::Command;

/// One finished request, as the server saw it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CommandObservation {
    /// The command.
    pub command: Command,
    /// Bytes moved: data read or written, or the length trimmed / zeroed.
    pub bytes: u64,
    /// From the request being fully received (header and payload) to its reply being
    /// written to the socket (or dropped, if the client has gone).
    pub latency: Duration,
    /// The error the reply carried, if any.
    pub error: Option<Errno>,
}

/// Receives the server's observations. Called from many threads at once.
pub trait ServerObserver: Send + Sync {
    /// A request was answered (DISC, which has no reply, is reported with zero latency).
    fn on_command(&self, observation: &CommandObservation);

    /// A client connected.
    fn on_connection_opened(&self) {}

    /// A client's connection closed (after all its replies were written or dropped).
    fn on_connection_closed(&self) {}
}

/// Counters for one command.
#[derive(Debug, Default)]
pub struct CommandStats {
    count: AtomicU64,
    errors: AtomicU64,
    bytes: AtomicU64,
    latency: LatencyHistogram,
}

impl CommandStats {
    /// Requests answered.
    pub fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }

    /// Requests answered with an error.
    pub fn errors(&self) -> u64 {
        self.errors.load(Ordering::Relaxed)
    }

    /// Bytes moved by successful requests.
    pub fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }

    /// Latency of every answered request.
    pub fn latency(&self) -> &LatencyHistogram {
        &self.latency
    }
}

/// A [`ServerObserver`] that keeps [`CommandStats`] per command and connection counts.
#[derive(Debug, Default)]
pub struct ServerStats {
    commands: [CommandStats; Command::TRACKED.len()],
    opened: AtomicU64,
    closed: AtomicU64,
}

impl ServerStats {
    /// Empty statistics.
    pub fn new() -> ServerStats {
        ServerStats::default()
    }

    /// The counters of `command` (all unknown command numbers share one entry).
    pub fn command(&self, command: Command) -> &CommandStats {
        &self.commands[command.index()]
    }

    /// Connections opened so far.
    pub fn connections_opened(&self) -> u64 {
        self.opened.load(Ordering::Relaxed)
    }

    /// Connections currently open.
    pub fn connections_open(&self) -> u64 {
        self.opened.load(Ordering::Relaxed).saturating_sub(self.closed.load(Ordering::Relaxed))
    }
}

impl ServerObserver for ServerStats {
    fn on_command(&self, observation: &CommandObservation) {
        let stats = &self.commands[observation.command.index()];
        stats.count.fetch_add(1, Ordering::Relaxed);
        if observation.error.is_some() {
            stats.errors.fetch_add(1, Ordering::Relaxed);
        } else {
            stats.bytes.fetch_add(observation.bytes, Ordering::Relaxed);
        }
        stats.latency.record(observation.latency);
    }

    fn on_connection_opened(&self) {
        self.opened.fetch_add(1, Ordering::Relaxed);
    }

    fn on_connection_closed(&self) {
        self.closed.fetch_add(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_per_command() {
        let stats = ServerStats::new();
        let ok = CommandObservation {
            command: Command::Read,
            bytes: 4096,
            latency: Duration::from_micros(10),
            error: None,
        };
        stats.on_command(&ok);
        stats.on_command(&ok);
        stats.on_command(&CommandObservation { error: Some(Errno::Inval), ..ok });
        stats.on_command(&CommandObservation { command: Command::Unknown(77), ..ok });
        stats.on_connection_opened();
        stats.on_connection_opened();
        stats.on_connection_closed();
        let read = stats.command(Command::Read);
        assert_eq!(read.count(), 3);
        assert_eq!(read.errors(), 1);
        assert_eq!(read.bytes(), 8192);
        assert_eq!(read.latency().count(), 3);
        assert_eq!(stats.command(Command::Unknown(1)).count(), 1);
        assert_eq!(stats.command(Command::Write).count(), 0);
        assert_eq!(stats.connections_opened(), 2);
        assert_eq!(stats.connections_open(), 1);
    }
}
