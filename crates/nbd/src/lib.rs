//! The NBD protocol (NetworkBlockDevice/nbd `doc/proto.md`) for ember: what an export must
//! provide ([`Export`]), a multi-threaded fixed-newstyle server ([`server`]) and a blocking,
//! pipelining client ([`client`]). The protocol subset and every error mapping are documented
//! in `docs/reference/nbd.md`.

#![warn(missing_docs)]

pub mod client;
pub mod errno;
pub mod export;
pub mod export_map;
#[doc(hidden)]
pub mod fuzz_entry;
pub mod latency;
pub mod mem_export;
pub mod proto;
pub mod reply;
pub mod request;
pub mod server;
pub mod stats;
pub mod stream;

pub use client::{
    Client, ClientBuilder, ClientError, ExportInfo, InFlight, NbdUri, DEFAULT_HANDSHAKE_TIMEOUT,
};
pub use ember_readbuf::ReadBuf;
pub use errno::Errno;
pub use export::{Export, ExportError, ExportFlags, ExportSet, FastRead, ReadStart};
pub use export_map::ExportMap;
pub use latency::LatencyHistogram;
pub use mem_export::MemExport;
pub use request::{Command, Request};
pub use server::{
    ListenAddr, RunningServer, Server, ServerBuilder, ServerConfig, ServerError, ShutdownHandle,
};
pub use stats::{CommandObservation, CommandStats, ServerObserver, ServerStats};
