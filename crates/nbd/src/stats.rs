//! What the server reports about its work: an observer trait the server calls for every
//! request and connection, and [`ServerStats`], a ready observer keeping per-command counts,
//! bytes, errors and latency histograms (for the cli to export to Prometheus). It records
//! into per-thread shards, folded when read, so requests answered on different threads do
//! not bounce shared cache lines.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
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

/// Shards of [`ServerStats`]: threads beyond this many share shards.
const SHARDS: usize = 8;

/// One thread's share of the per-command counters (its own cache lines).
#[derive(Debug, Default)]
#[repr(align(128))]
struct Shard {
    commands: [CommandStats; Command::TRACKED.len()],
}

/// A [`ServerObserver`] that keeps [`CommandStats`] per command and connection counts.
#[derive(Debug)]
pub struct ServerStats {
    shards: Box<[Shard]>,
    opened: AtomicU64,
    closed: AtomicU64,
}

impl Default for ServerStats {
    fn default() -> Self {
        ServerStats {
            shards: (0..SHARDS).map(|_| Shard::default()).collect(),
            opened: AtomicU64::new(0),
            closed: AtomicU64::new(0),
        }
    }
}

impl ServerStats {
    /// Empty statistics.
    pub fn new() -> ServerStats {
        ServerStats::default()
    }

    /// The counters of `command` as of now (all unknown command numbers share one entry):
    /// every thread's shard added up.
    pub fn command(&self, command: Command) -> CommandStats {
        let sum = CommandStats::default();
        for shard in self.shards.iter() {
            let c = &shard.commands[command.index()];
            sum.count.fetch_add(c.count(), Ordering::Relaxed);
            sum.errors.fetch_add(c.errors(), Ordering::Relaxed);
            sum.bytes.fetch_add(c.bytes(), Ordering::Relaxed);
            sum.latency.add(&c.latency);
        }
        sum
    }

    /// This thread's shard (taken round-robin on the thread's first request).
    fn mine(&self) -> &Shard {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        thread_local! {
            static SHARD: usize = NEXT.fetch_add(1, Ordering::Relaxed) % SHARDS;
        }
        &self.shards[SHARD.with(|s| *s)]
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
        let stats = &self.mine().commands[observation.command.index()];
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

    /// Observations from more threads than there are shards all reach the folded counters,
    /// latency histogram included.
    #[test]
    fn observations_on_many_threads_fold() {
        let stats = std::sync::Arc::new(ServerStats::new());
        let n = SHARDS as u64 + 3;
        let threads: Vec<_> = (0..n)
            .map(|t| {
                let stats = stats.clone();
                std::thread::spawn(move || {
                    for _ in 0..500 {
                        stats.on_command(&CommandObservation {
                            command: Command::Read,
                            bytes: t,
                            latency: Duration::from_micros(3),
                            error: None,
                        });
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let read = stats.command(Command::Read);
        assert_eq!(read.count(), 500 * n);
        assert_eq!(read.bytes(), 500 * (0..n).sum::<u64>());
        assert_eq!(read.latency().count(), 500 * n);
        assert_eq!(read.latency().sum_ns(), 500 * n * 3_000);
        assert_eq!(read.latency().counts()[LatencyHistogram::bucket_of(3_000)], 500 * n);
    }
}
