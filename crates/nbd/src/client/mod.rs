//! A blocking NBD client with many requests in flight.
//!
//! A [`Client`] is `Send + Sync`: any number of threads may call it at once, and each call
//! (`read`, `write`, …) waits only for its own reply; replies are matched to requests by
//! cookie on a reader thread. For pipelining from one thread, the `start_*` methods send a
//! request and return an [`InFlight`] ticket to [`InFlight::wait`] on later.
//!
//! ```no_run
//! use ember_nbd::Client;
//!
//! let client = Client::connect_uri("nbd://127.0.0.1:10809/disk")?;
//! client.write(0, &[0xab; 4096], false)?;
//! let tickets: Vec<_> = (0..8).map(|i| client.start_read(i * 512, 512)).collect::<Result<_, _>>()?;
//! for t in tickets {
//!     assert_eq!(t.wait()?.len(), 512);
//! }
//! client.flush()?;
//! client.disconnect()?;
//! # Ok::<(), ember_nbd::ClientError>(())
//! ```
//!
//! - `open.rs`: [`ClientBuilder`], connecting and the handshake, the reader thread's start;
//! - `connect.rs`: the TCP connection (bounded connect, no self-connection, dead peers);
//! - `handshake.rs`: the client side of the fixed-newstyle handshake;
//! - `connection.rs`: the [`Client`] in the transmission phase, and closing it;
//! - `requests.rs`: sending requests (`start_*`, and the blocking forms);
//! - `pending.rs`: the requests waiting for replies, and [`InFlight`] tickets;
//! - `replies.rs`: the reader thread, structured reply chunks;
//! - `coverage.rs`: which bytes of a READ the chunks described;
//! - `error.rs`, `info.rs`, `uri.rs`: [`ClientError`], [`ExportInfo`], [`NbdUri`].

mod connect;
mod connection;
mod coverage;
mod error;
mod handshake;
mod info;
mod open;
mod pending;
mod replies;
mod requests;
#[cfg(test)]
mod tests;
mod uri;

pub use connection::Client;
pub use error::ClientError;
pub use info::ExportInfo;
pub use open::{ClientBuilder, DEFAULT_HANDSHAKE_TIMEOUT};
pub use pending::InFlight;
pub use uri::{Endpoint, NbdUri, DEFAULT_PORT};
