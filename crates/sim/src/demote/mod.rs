//! Wong and Wilkes' DEMOTE (*My cache or yours? Making storage more exclusive*, USENIX ATC
//! 2002) in the laboratory: N client caches over one array cache ([`topology`]), the mean
//! READ latency model of equations 1-3 ([`latency_model`]) and the paper's comparison of
//! every scheme on one trace ([`experiment`]); client tiers with any policy, sieve and write
//! policy ([`client_cache`]) and a deployment of `ember serve` tiers simulated from their
//! config files ([`deployment`]), with the array's stale rule for DEMOTEs ([`stale_copies`])
//! and its crash and warm restart ([`array_restart`]).
//!
//! The array side's decisions (the schemes, the segmented queue, the ghosts) are the real
//! cache's too: they live in [`ember_policy::demote`].

pub mod array_restart;
pub mod client_cache;
pub mod deployment;
pub mod experiment;
pub mod latency_model;
pub mod stale_copies;
pub mod topology;
