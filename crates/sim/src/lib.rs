//! Trace-driven cache simulation: runs `ember-policy` decisions over `ember-trace` requests.
//!
//! A [`Trace`](ember_trace::Trace) is split once into an [`AccessStream`] (block keys, ops,
//! times and, for oracle policies, next-access virtual times); [`simulate`] runs one
//! replacement policy with one admission policy over it and returns [`SimResult`] counters
//! (and a timeline with [`RunConfig::interval`]); [`run_grid`] runs many such simulations in
//! parallel. Cache sizes are parsed by [`Capacity`], timeline intervals by [`Interval`].
//!
//! [`run_streaming`] runs a grid over a trace read once in bounded chunks
//! ([`ember_trace::BlockReader`]), holding the policies' state and two chunks, never the
//! whole trace; its results equal [`simulate`]'s.

pub mod belady_selective;
pub mod capacity;
pub mod cost_model;
pub mod counters;
pub mod distinct;
pub mod ensemble;
pub mod epoch_spool;
pub mod error;
pub mod experiment_sievestore;
pub mod grid;
pub mod grid_shared;
pub mod hierarchy;
pub mod hierarchy_experiment;
pub mod interval;
pub mod latency_model;
pub mod oracle_resident;
pub mod sievestore;
pub mod sievestore_run;
pub mod sievestore_sensitivity;
pub mod sievestore_stream;
pub mod simulate;
pub mod stream;
pub mod streaming;
#[cfg(test)]
mod testing;
pub mod warmup_convergence;
pub mod warmup_evidence;
pub mod warmup_experiment;
pub mod warmup_load;
pub mod warmup_scheme;
pub mod warmup_stream;
pub mod warmup_sweep;

pub use capacity::{parse_capacities, Capacity};
pub use counters::{Counters, IntervalStats};
pub use distinct::DistinctCounter;
pub use error::SimError;
pub use grid::{default_threads, run_grid, GridProgress};
pub use interval::Interval;
pub use simulate::{simulate, simulate_with_progress, RunConfig, SimResult};
pub use stream::{next_access_times, AccessStream, AccessStreamBuilder, Span, Split};
pub use streaming::{
    count_pass, policy_run, run_streaming, run_streaming_records, run_streaming_with_next,
    ChunkRun, Cutter, StreamTotals, CHUNK_ACCESSES,
};
