//! A running ember server, assembled from a plain-data [`ServeConfig`]: the backing volumes
//! (files, block devices, upstream NBD exports), the cache device (a file, O_DIRECT, memory),
//! the engine with its policies, warmup and tiers, the engine's volumes as NBD exports with
//! the server's limits and TLS, Prometheus metrics, memory return, signals and the clean
//! shutdown. `ember serve` parses its flags into a [`ServeConfig`] and calls [`run`]; a
//! program or a test calls [`Server::start`] and gets a [`Running`] server.
//!
//! The NBD adapter joins the engine (which speaks its own types, [`ember_engine::Volume`] and
//! [`ember_engine::EngineError`]) to `ember-nbd`:
//!
//! - [`VolumeExport`] / [`EngineExports`]: engine volumes as NBD exports, and [`clients`]:
//!   which export each connection holds;
//! - [`NbdDevice`]: an export of an upstream NBD server as a backing (or cache) device;
//! - [`open_spec`]: a device named on a command line (NBD URI or path).
//!
//! Building a server, file by file: `config/` (the settings), `plan.rs` (every setting
//! checked before a device is opened), `backing.rs`, `cache_device.rs`, `policies.rs`,
//! `writeback.rs`, `tiers.rs`, `recorded.rs` (the volume set the cache device records),
//! `warmup.rs` and `preload_progress.rs`, `lab.rs` (the one use
//! of the laboratory: the admission registry and `--warmup auto`), `net.rs` (limits, TLS,
//! listeners), `metrics/`, `memory_return.rs`, `build.rs` ([`Server`]), `running.rs`
//! ([`Running`]), `signals.rs`, `run.rs` ([`run`]); `console.rs` is where their lines go.
//!
//! Operating it while it serves: `config/file.rs` and `config_source.rs` (the config file
//! under the command line's flags), `control/` (the control socket and its commands, `ember ctl`'s protocol),
//! `notify.rs` and `status_ticker.rs` (systemd's readiness protocol).
//!
//! Several servers as one deployment: `deployment/` (the topology file that names each
//! tier's config file and which tier is whose backing).

mod admission;
mod backing;
mod build;
mod cache_device;
pub mod clients;
pub mod config;
mod config_source;
pub mod console;
pub mod control;
mod degraded;
mod demote_queue;
pub mod deployment;
mod export;
#[doc(hidden)]
pub mod fuzz_entry;
mod lab;
pub mod memory_return;
pub mod metrics;
mod nbd_device;
pub mod net;
pub mod notify;
mod plan;
mod policies;
mod prefetch;
mod preload_progress;
pub mod recorded;
mod run;
mod running;
mod signals;
mod size;
mod spec;
pub mod stale;
pub mod state_file;
mod status_ticker;
mod tiers;
pub mod warmup;
mod writeback;

pub use build::{Options, Server};
pub use cache_device::refuse_on_memory;
pub use config::{BackingVolume, ServeConfig};
pub use config_source::ConfigSource;
pub use demote_queue::{DemoteQueue, DemoteReplies};
pub use export::{to_export_error, EngineExports, VolumeExport};
pub use nbd_device::NbdDevice;
pub use policies::{parse_policy, parse_write_mode};
pub use run::{run, run_from};
pub use running::{Exported, Running, Stopped};
pub use size::parse_size;
pub use spec::open_spec;
pub use tiers::array_replacement;
pub use writeback::dirty_limit_message;
