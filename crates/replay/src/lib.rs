//! `ember replay`: replays a block trace against an NBD server (the Bonfire prototype's trace
//! replayer), as fast as possible or at the trace's own timing, at queue depth 1 or deeper on
//! one or several connections per export.
//!
//! - [`plan`]: trace volumes onto exports, offsets wrapped modulo the export size, aligned to
//!   512-byte sectors.
//! - [`pattern`]: every written sector carries a stamp (sector address, write generation,
//!   run seed) and a body derived from it, so any read can be checked.
//! - [`expected`]: which write generation each sector must hold.
//! - [`replayer`]: the run (ordering of overlapping requests, timing, prefill, verification).
//! - [`report`]: throughput, latency percentiles per op, verification, server hit ratio.
//! - [`scrape`]: fetching and parsing a server's Prometheus text (for the hit ratio over time).

#![warn(missing_docs)]

pub mod expected;
pub mod pattern;
pub mod plan;
pub mod replayer;
pub mod report;
pub mod scrape;

pub use plan::{plan, ExportTarget, Plan, PlanStats, PlannedIo};
pub use replayer::{replay, ReplayConfig, ReplayError, Session, Timing};
pub use report::{LatencySummary, OpReport, Report, ServerReport, Verification};
pub use scrape::{MetricsUrl, Sample, ScrapeError};
