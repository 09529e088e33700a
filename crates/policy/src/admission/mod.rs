//! Admission policies (SieveStore's *sieves*): on a miss, is the block allocated in the cache
//! (an *allocation-write*) or served from backing without allocation?
//!
//! Two kinds of sieve live here. Per-miss sieves implement [`Admission`] (AOD, WMNA,
//! SieveStore-C, RandSieve-C, OCF's nhit, libCacheSim's doorkeeper and probabilistic filter,
//! a fixed set). Discrete sieves, which choose a whole
//! batch of blocks at the end of an epoch (SieveStore-D, RandSieve-BlkD, the ideal sieve),
//! implement [`EpochSieve`]; a cache manager (the simulator's or the real cache's)
//! batch-allocates what they choose by one rule, [`install()`].
//!
//! The registry of every sieve by name, with its parameters, is [`SieveSpec`]; it builds a
//! [`Sieve`] of either kind. The simulator and the real cache both build their sieves there.

pub mod aod;
pub mod config_error;
pub mod cutoff;
pub mod doorkeeper;
pub mod epoch;
pub mod epoch_admission;
pub mod fixed;
pub mod ideal;
pub mod install;
pub mod key_hash;
pub mod ocf_nhit;
pub mod params;
pub mod per_volume;
pub mod prob;
pub mod randsieve_blkd;
pub mod randsieve_c;
pub mod sieve;
pub mod sievestore_c;
pub mod sievestore_d;
pub mod spec;
pub mod window;
pub mod wmna;
pub mod write_around;

pub use aod::Aod;
pub use config_error::SieveConfigError;
pub use cutoff::CutoffAdmission;
pub use doorkeeper::Doorkeeper;
pub use epoch::EpochSieve;
pub use epoch_admission::EpochAdmission;
pub use fixed::FixedSet;
pub use ideal::Ideal;
pub use install::{install, Installation};
pub use ocf_nhit::{OcfNhit, OcfNhitConfig};
pub use params::SieveParams;
pub use per_volume::VolumeSieves;
pub use prob::Probabilistic;
pub use randsieve_blkd::RandSieveBlkD;
pub use randsieve_c::RandSieveC;
pub use sieve::Sieve;
pub use sievestore_c::{SieveStoreC, SieveStoreCConfig};
pub use sievestore_d::SieveStoreD;
pub use spec::SieveSpec;
pub use wmna::Wmna;
pub use write_around::WriteAround;

/// Decides, per missed block, whether to allocate it in the cache.
///
/// The caller reports every access with [`Admission::observe`] (hits too: some sieves count
/// them), then on a miss asks [`Admission::admit`]. Time arrives in each [`crate::Access`];
/// a sieve keeps no clock of its own.
pub trait Admission: Send {
    /// Short lowercase name, as used on the command line (`aod`, `wmna`, ...).
    fn name(&self) -> &'static str;

    /// Record an access; `hit` tells whether the block was resident.
    fn observe(&mut self, access: &crate::Access, hit: bool);

    /// On a miss of `access.key`: allocate it now?
    fn admit(&mut self, access: &crate::Access) -> bool;

    /// Bytes of memory the sieve's own state occupies (SieveStore reports it as a metric).
    fn memory_bytes(&self) -> usize {
        0
    }

    /// The cache's occupancy before the coming [`Admission::admit`]: `resident` of `capacity`
    /// blocks. Only occupancy-triggered sieves (OCF's nhit) use it; the default ignores it.
    fn set_occupancy(&mut self, _resident: usize, _capacity: usize) {}

    /// True if this sieve ignores [`Admission::observe`] and admits every miss (AOD): the
    /// simulator then drives the replacement policy with one combined
    /// [`crate::Replacement::access`] per block instead of a lookup and an insertion.
    #[inline]
    fn admits_every_miss(&self) -> bool {
        false
    }

    /// A hint, given before the cache lookup of `access`, that [`Admission::admit`] may be
    /// asked about it: a sieve with large tables can start loading the entry it will need
    /// (SieveStore-C's IMCT) while the cache is searched. It must not change any decision.
    #[inline]
    fn prefetch(&self, _access: &crate::Access) {}

    /// A discrete (epoch) sieve in a real cache ([`EpochAdmission`]): the epoch is over;
    /// the blocks chosen for the next one, most wanted first. `None` for a per-miss sieve
    /// (the default).
    fn end_epoch(&mut self) -> Option<Vec<(u64, u64)>> {
        None
    }

    /// A discrete sieve in a real cache: the time of the first access it observed (epochs
    /// are counted from it), once there was one. `None` otherwise (the default).
    fn epoch_origin(&self) -> Option<u64> {
        None
    }
}
