//! Bonfire's warmup study (Zhang et al., FAST 2013) in the laboratory: the experiment that
//! restarts a cache each period, cold or preloaded by a selector ([`experiment`], streamed:
//! [`stream`]), its metrics (convergence time, eq. 1: [`convergence`]; server load reduction,
//! eq. 2: [`load`]), the schemes compared ([`scheme`]), the sweep of Table 2 ([`sweep`]), the
//! ranking of selectors by evidence ([`evidence`]), and [`advise()`], the one entry point a
//! server uses (`ember serve --warmup auto`).
//!
//! The selectors themselves are the real cache's too: they live in
//! [`ember_policy::warmup`].

pub mod advise;
pub mod convergence;
pub mod evidence;
pub mod experiment;
pub mod load;
pub mod scheme;
pub mod stream;
pub mod sweep;

pub use advise::{advise, Advice, AdviseConfig};
