//! What every simulation shares: the block-access stream ([`stream`]), one run of a
//! replacement policy with a sieve over it ([`simulate`]), grids of runs over a stream held in
//! memory ([`grid`]), streamed in chunks ([`streaming`]) or over one shared index
//! ([`grid_shared`]), the [`plan`] that picks among them for a request, miniature
//! simulations over a spatial sample for miss-ratio curves of any policy ([`minisim`]), and
//! the vocabulary of results ([`counters`], [`tally`]), sizes ([`capacity`]), timelines
//! ([`interval`]), the uncounted warm-up period ([`warmup_period`]) and working sets
//! ([`distinct`]). The oracles of SieveStore section 3.1 ([`belady_selective`],
//! [`oracle_resident`]) sit here too: they are replacement decisions, not a topology.

pub mod belady_selective;
pub mod capacity;
pub mod chunk_run;
pub mod counters;
pub mod cutter;
pub mod distinct;
pub mod error;
pub mod grid;
pub mod grid_shared;
pub mod interval;
pub mod minisim;
pub mod oracle_resident;
pub mod plan;
pub mod simulate;
pub mod stream;
pub mod streaming;
pub(crate) mod tally;
#[cfg(test)]
pub(crate) mod testing;
pub mod warmup_period;
