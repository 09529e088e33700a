//! The write-back machinery of Qin's thesis: the flusher (4.1, 4.4) and the barriers
//! (write-back flush, 3.1 and 4.4.2; write-back persist, 3.2, 4.2.2 and 5.3; ordered
//! write-back, Koller et al., 2.2). Recovery of the
//! persisted dirty map (5.3) is decoding and lives in [`crate::layout::recover`].
//!
//! Invariants the crash trials check:
//! - a block leaves the dirty map only once backing holds it *durably* (the flusher syncs
//!   backing before marking a batch clean; batches someone waits for share one sync,
//!   `sync_group.rs`) or holds something newer (a write-through
//!   fallback, TRIM or WRITE_ZEROES, dropped only after their backing I/O completed, which
//!   began only once no flusher write of the block was in flight);
//! - write-back flush: a FLUSH closes the current epoch and is acknowledged when no dirty
//!   version of that epoch or an older one is left and backing was synced;
//! - ordered write-back: a FLUSH only closes the epoch; no version of an epoch reaches
//!   backing before every older epoch is durable there, and a request that goes to backing
//!   directly (refused write miss, discard) first waits for the older epochs and holds its
//!   own until its backing I/O is synced (`io/ordered.rs`);
//! - write-back persist: a FLUSH takes a snapshot of the dirty map (versions whose data is
//!   written: a version enters the map only after its cache write completed), syncs backing
//!   and the cache device, then commits the snapshot (journal append or checkpoint), synced,
//!   before it is acknowledged. Blocks named by the persisted map are never reused until a
//!   later commit no longer names them (the persist bitmap).
//!
//! The flusher and the barriers are flows above the engine's core (they take `Arc<Inner>`);
//! [`config`] is the tuning, and imports only the core's `Limits` it resolves to. Cleaning
//! control ([`cleaning`]: a cap on background cleaning and the idle policy) paces the
//! flusher's background batches ([`pace`]) with bcache's PI controller ([`rate`]); it never
//! slows what someone waits for, and it never changes when a block is marked clean.

pub(crate) mod barrier;
pub mod cleaning;
pub mod config;
pub(crate) mod flush_batch;
pub(crate) mod flusher;
pub(crate) mod pace;
pub(crate) mod rate;
pub(crate) mod sync_group;

pub use cleaning::{CleaningConfig, CleaningError};
pub use config::WritebackConfig;

#[cfg(test)]
mod cleaning_tests;
#[cfg(test)]
mod flush_batch_tests;
#[cfg(test)]
mod given_up_tests;
#[cfg(test)]
mod race_tests;
#[cfg(test)]
mod sync_group_tests;
#[cfg(test)]
pub(crate) mod tests;
