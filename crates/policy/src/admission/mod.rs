//! Admission policies (SieveStore's *sieves*): on a miss, is the block allocated in the cache
//! (an *allocation-write*) or served from backing without allocation?

pub mod aod;

pub use aod::Aod;

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
}
