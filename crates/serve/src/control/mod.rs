//! The control plane of a running server (docs/reference/control.md): the protocol
//! (`protocol.rs`), the socket and its connections (`socket.rs`), what each command does
//! (`commands.rs`), the status snapshot (`status.rs`), what the commands ask of the engine
//! (`engine_live.rs`) and the client `ember ctl` uses (`client.rs`).

mod clear_lost;
mod client;
mod commands;
mod engine_live;
mod health_view;
pub mod protocol;
mod socket;
mod status;

pub use client::{default_socket, find_socket, request, RUN_DIR};
pub use commands::Control;
pub(crate) use engine_live::set_volume_own;
pub use health_view::HealthView;
pub use protocol::{parse_request, Command, Progress, Reply, Request, MAX_REQUEST, VERSION};
pub use socket::{allowed, peer_credentials, ControlSocket, IDLE, MAX_CONNECTIONS};
pub use status::{CacheStatus, Status, VolumeStatus, WarmupStatus};
