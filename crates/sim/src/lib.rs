//! Trace-driven cache simulation: runs `ember-policy` decisions over `ember-trace` requests.
//!
//! The crate is in four topics:
//!
//! - [`core`]: what every simulation shares. A [`Trace`](ember_trace::Trace) is split once
//!   into an [`AccessStream`] (block keys, ops, times and, for oracle policies, next-access
//!   virtual times); [`simulate`] runs one replacement policy with one admission policy over
//!   it and returns [`SimResult`] counters (and a timeline with [`RunConfig::interval`]).
//!   A grid of policies and sizes over a trace file is described by a [`Plan`], which picks
//!   the driver: the trace streamed once in bounded chunks (or read in place), one shared
//!   index for the policies it models, a streaming pass of next-access times for OPT, or the
//!   whole trace in memory. Cache sizes are parsed by [`Capacity`], timeline intervals by
//!   [`Interval`]; the uncounted warm-up period ([`WarmupPeriod`]: requests that run but are
//!   not counted) applies to every driver.
//! - [`sievestore`]: SieveStore's sieves under their cache managers, metrics, cost model,
//!   ensembles and experiments.
//! - [`demote`]: Wong and Wilkes' clients over an array cache with DEMOTE, the latency model
//!   and experiments.
//! - [`warmup`]: Bonfire's warmup experiments, and [`warmup::advise()`], the one entry point a
//!   server uses (`ember serve --warmup auto`).
//!
//! The decisions themselves (replacement, sieves, DEMOTE placement, warmup selectors) live in
//! `ember-policy`, where the real cache builds them too; nothing here does real I/O.

pub mod core;
pub mod demote;
pub mod sievestore;
pub mod warmup;

pub use crate::core::capacity::Capacity;
pub use crate::core::counters::{Counters, IntervalStats};
pub use crate::core::error::SimError;
pub use crate::core::grid::default_threads;
pub use crate::core::interval::Interval;
pub use crate::core::plan::Plan;
pub use crate::core::simulate::{simulate, simulate_with_progress, RunConfig, SimResult};
pub use crate::core::stream::{AccessStream, AccessStreamBuilder, Split};
pub use crate::core::warmup_period::{CountStart, WarmupPeriod};
