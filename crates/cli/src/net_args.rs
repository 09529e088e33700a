//! The NBD server's flags of `ember serve`: connection and buffer limits, the handshake's
//! bounds, TLS, the Unix socket's mode and the busy-poll (docs/reference/limits.md,
//! docs/reference/tls.md), and the [`LimitSettings`] and [`TlsConfig`] they become.

use std::path::PathBuf;

use clap::Args;
use ember_nbd::server::TlsMode;
use ember_serve::config::{LimitSettings, TlsConfig};
use ember_serve::parse_size;

/// The NBD server's limits and TLS (docs/reference/limits.md and docs/reference/tls.md).
#[derive(Args, Debug)]
pub struct NetArgs {
    /// Connections open at once; one more is accepted and closed at once.
    #[arg(long, default_value_t = 128)]
    pub max_connections: usize,

    /// Bytes of READ replies and WRITE payloads all connections together may hold (bytes,
    /// or with K/M/G); at the limit, requests over 1 MiB wait for buffers to be freed.
    #[arg(long, value_name = "SIZE", value_parser = parse_size, default_value = "256M")]
    pub buffer_budget: u64,

    /// Largest READ/WRITE payload advertised and accepted (at most 32M).
    #[arg(long, value_name = "SIZE", value_parser = parse_size, default_value = "32M")]
    pub max_payload: u64,

    /// Options one handshake may send before the server hangs up.
    #[arg(long, default_value_t = 32)]
    pub max_handshake_options: usize,

    /// Seconds a whole handshake (TLS included) may take before the connection is dropped.
    #[arg(long, value_name = "SECONDS", default_value_t = 10.0)]
    pub handshake_deadline: f64,

    /// TLS: off, on (offered; plaintext clients still served) or require (every client
    /// must upgrade with STARTTLS).
    #[arg(long, value_name = "MODE", default_value = "off", value_parser = parse_tls_mode)]
    pub tls: TlsMode,

    /// Directory of PEM files as qemu-nbd and nbdkit name them: server-cert.pem,
    /// server-key.pem, and ca-cert.pem for --tls-verify-peer.
    #[arg(long, value_name = "DIR")]
    pub tls_certificates: Option<PathBuf>,

    /// Accept only clients presenting a certificate issued by the CA in ca-cert.pem.
    #[arg(long)]
    pub tls_verify_peer: bool,

    /// Permission bits of the --unix socket, in octal (default owner-only).
    #[arg(long, value_name = "OCTAL", default_value = "600", value_parser = parse_mode)]
    pub unix_mode: u32,

    /// Longest busy-poll of a connection's socket, in microseconds, after a reply when the
    /// connection has nothing in flight (adaptive below this; 0: never poll; docs/reference/nbd.md).
    #[arg(long, value_name = "MICROSECONDS", default_value_t = 50)]
    pub busy_poll_us: u64,
}

fn parse_tls_mode(s: &str) -> Result<TlsMode, String> {
    s.parse()
}

/// Parse an octal permission mode such as `600` or `0660`.
pub fn parse_mode(s: &str) -> Result<u32, String> {
    let mode = u32::from_str_radix(s.trim_start_matches("0o"), 8)
        .map_err(|_| format!("{s:?} is not an octal mode (e.g. 600)"))?;
    if mode > 0o777 {
        return Err(format!("{s:?}: only permission bits (at most 777) are allowed"));
    }
    Ok(mode)
}

impl NetArgs {
    /// The NBD server's limits these flags describe.
    pub fn limits(&self) -> LimitSettings {
        LimitSettings {
            max_connections: self.max_connections,
            buffer_budget: self.buffer_budget,
            max_payload: self.max_payload,
            max_handshake_options: self.max_handshake_options,
            handshake_deadline_secs: self.handshake_deadline,
            busy_poll_us: self.busy_poll_us,
        }
    }

    /// The TLS these flags describe.
    pub fn tls(&self) -> TlsConfig {
        TlsConfig {
            mode: self.tls,
            certificates: self.tls_certificates.clone(),
            verify_peer: self.tls_verify_peer,
        }
    }
}
