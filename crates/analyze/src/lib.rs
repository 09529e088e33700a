//! Trace characterization for storage-level cache warmup: the analyses of Bonfire (Zhang et
//! al., *Warming up Storage-Level Caches with Bonfire*, FAST 2013, section 3), SieveStore's
//! popularity skew, and LRU miss-ratio curves (exact from stack distances, and SHARDS-sampled).
//!
//! Every analysis runs over [`Accesses`]: a trace split into block accesses once. Nothing here
//! simulates a cache policy; the miss-ratio curve comes from reuse (stack) distances alone.
//!
//! - [`summary`]: WSS, total data and reaccess percentage (Bonfire Table 1);
//! - [`temporal`]: hourly / daily / other reaccess classes per block (Figure 1a), the recency
//!   profile of hourly reaccesses (Figure 1b), daily reaccesses by hour of day (Figure 2);
//! - [`reuse`]: exact reuse distance in O(n log n) (Figure 3), with [`dense`] indexing of
//!   dense block keys;
//! - [`spatial`]: spatial clustering of each class in 1 MiB regions (Figure 4);
//! - [`popularity`]: per-day popularity skew in 10,000 bins (SieveStore Figure 2);
//! - [`mrc`] and [`shards`]: LRU miss-ratio curves;
//! - [`analysis`]: what one analysis computes and what comes out of it;
//! - [`analyzer`]: all of them for one trace or volume, chunk by chunk;
//! - [`report`]: all of them for a trace, per volume and for the whole;
//! - [`stream`]: the report over a trace that streams past, in memory per distinct block;
//! - [`advise`](mod@advise): Bonfire's algorithm decision tree (Figure 8) over a report.

pub mod accesses;
pub mod advise;
pub mod analysis;
pub mod analyzer;
pub mod dense;
pub mod mrc;
pub mod popularity;
pub mod report;
pub mod reuse;
pub mod shards;
pub mod spatial;
pub mod stream;
pub mod summary;
pub mod temporal;

pub use accesses::Accesses;
pub use advise::{advise, Advice, Algorithm};
pub use analysis::{Analysis, AnalyzeConfig};
pub use mrc::MissRatioCurve;
pub use popularity::{Popularity, PopularityDay, VolumeShare};
pub use report::{analyze, TraceReport};
pub use reuse::{reuse_distances, ReuseHistogram, REUSE_BUCKETS};
pub use shards::{shards_mrc, ShardsError};
pub use spatial::Spatial;
pub use summary::Summary;
pub use temporal::{Class, Temporal, DAY_NS, HOUR_NS};
