//! SieveStore (Pritchett and Thottethodi, ISCA 2010) in the laboratory: the sieves' cache
//! managers over a trace in memory ([`run`]) or streamed ([`stream`]), one request at a time
//! ([`continuous`], [`discrete`]); their metrics per day and minute ([`metrics`]) and the SSD
//! cost model ([`cost_model`]); ensemble against per-volume caches ([`ensemble`]); the
//! paper's comparison ([`experiment`]) and sensitivity analysis ([`sensitivity`]); one
//! cache over many volumes with per-volume settings, as the real cache runs it ([`volumes`]).
//!
//! The sieves themselves, their registry and the epoch install rule are the real cache's
//! too: they live in [`ember_policy::admission`].

pub mod accesses;
pub mod continuous;
pub mod cost_model;
pub mod discrete;
pub mod ensemble;
pub mod epoch_spool;
pub mod experiment;
pub mod metrics;
pub mod run;
pub mod sensitivity;
pub mod stream;
pub mod volumes;

pub use metrics::{day_origin, DayStats, SieveRun, DAY_NS, MINUTE_NS};
pub use run::{run_continuous, run_discrete, run_sieve, run_sieve_with, CacheFactory};
