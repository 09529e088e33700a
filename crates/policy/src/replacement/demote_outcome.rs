//! What became of a DEMOTE (Wong and Wilkes, *My cache or yours?*, USENIX ATC 2002, section
//! 1.1): the answer of a policy that takes DEMOTEs ([`super::Replacement::demote`]), such as
//! the array cache of [`crate::demote`].

/// What became of a DEMOTE.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DemoteOutcome {
    /// The array stored the block (a full SAN transfer).
    Stored,
    /// The array already held the block or could not make room: short-circuited.
    Aborted,
}
