//! Synthetic trace generators.

pub mod ensemble;
