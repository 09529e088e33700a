//! Trace-driven cache simulation: runs `ember-policy` decisions over `ember-trace` requests.

pub mod belady_selective;
pub mod cost_model;
pub mod ensemble;
pub mod experiment_sievestore;
pub mod oracle_resident;
pub mod sieve_lru;
pub mod sievestore;
