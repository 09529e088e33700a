//! The NBD server as configured: its limits and TLS ([`server_config`], checked and the
//! certificates loaded before the cache is opened), its worker threads, and where it listens.

use std::time::Duration;

use anyhow::{anyhow, bail, Context};
use ember_nbd::server::{ServerBuilder, ServerConfig, TlsMode, TlsSettings, MAX_PAYLOAD_CEILING};

use crate::config::{LimitSettings, ListenSettings, TlsConfig};

/// The TCP address listened on when neither a TCP address nor a Unix socket is configured.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:10809";

/// Four workers per CPU this process may run on: a worker blocked in a read or waiting on a
/// lock leaves its core to another.
pub fn default_workers() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2) * 4
}

/// The NBD server's configuration: `limits` and `tls` checked (and the certificates loaded),
/// with `workers` worker threads.
pub fn server_config(
    limits: &LimitSettings,
    tls: &TlsConfig,
    workers: usize,
) -> anyhow::Result<ServerConfig> {
    let max_payload =
        u32::try_from(limits.max_payload).ok().filter(|&p| p <= MAX_PAYLOAD_CEILING).ok_or_else(
            || anyhow!("--max-payload {}: at most {MAX_PAYLOAD_CEILING}", limits.max_payload),
        )?;
    let deadline = limits.handshake_deadline_secs;
    if !(deadline.is_finite() && deadline > 0.0) {
        bail!("--handshake-deadline {deadline}: must be a positive number of seconds");
    }
    if limits.busy_poll_us > 10_000 {
        bail!("--busy-poll-us {}: at most 10000 (10 ms)", limits.busy_poll_us);
    }
    let tls = match (tls.mode, &tls.certificates) {
        (TlsMode::Off, None) if !tls.verify_peer => None,
        (TlsMode::Off, _) => {
            bail!("--tls-certificates and --tls-verify-peer need --tls on or --tls require")
        }
        (mode, None) => bail!("--tls {mode} needs --tls-certificates DIR"),
        (mode, Some(dir)) => Some(
            TlsSettings::from_dir(dir, mode, tls.verify_peer)
                .with_context(|| format!("--tls-certificates {}", dir.display()))?,
        ),
    };
    let defaults = ServerConfig::default();
    Ok(ServerConfig {
        workers,
        max_payload,
        discard_limit: (2 * u64::from(max_payload)).max(defaults.discard_limit),
        shared_budget: limits.buffer_budget,
        max_connections: limits.max_connections,
        max_handshake_options: limits.max_handshake_options,
        handshake_deadline: Some(Duration::from_secs_f64(deadline)),
        tls,
        spin: Duration::from_micros(limits.busy_poll_us),
        ..defaults
    })
}

/// Add the listeners of `listen` to `builder`: its TCP address (or [`DEFAULT_LISTEN`] when
/// no Unix socket is given either) and its Unix socket.
pub fn listen(builder: ServerBuilder, listen: &ListenSettings) -> anyhow::Result<ServerBuilder> {
    let mut builder = builder;
    let tcp = match (&listen.tcp, &listen.unix) {
        (Some(l), _) => Some(l.clone()),
        (None, None) => Some(DEFAULT_LISTEN.to_string()),
        (None, Some(_)) => None,
    };
    if let Some(l) = &tcp {
        builder = builder.listen_tcp(l.as_str()).with_context(|| format!("listening on {l}"))?;
    }
    if let Some(u) = &listen.unix {
        builder = builder
            .listen_unix_mode(u, listen.unix_mode)
            .with_context(|| format!("listening on {}", u.display()))?;
    }
    Ok(builder)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    #[test]
    fn limits_and_tls() {
        let parse = |limits: LimitSettings, tls: TlsConfig| {
            server_config(&limits, &tls, 3).map_err(|e| format!("{e:#}"))
        };
        let limits = |f: fn(&mut LimitSettings)| {
            let mut l = LimitSettings::default();
            f(&mut l);
            l
        };
        let tls = |mode, certificates: Option<&str>, verify_peer| TlsConfig {
            mode,
            certificates: certificates.map(PathBuf::from),
            verify_peer,
        };
        let config = parse(
            LimitSettings {
                max_connections: 7,
                buffer_budget: 64 << 20,
                max_payload: 1 << 20,
                max_handshake_options: 5,
                handshake_deadline_secs: 2.5,
                busy_poll_us: 120,
            },
            TlsConfig::default(),
        )
        .unwrap();
        assert_eq!(config.spin, Duration::from_micros(120));
        let default = parse(LimitSettings::default(), TlsConfig::default()).unwrap();
        assert_eq!(default.spin, Duration::from_micros(50));
        let never = parse(limits(|l| l.busy_poll_us = 0), TlsConfig::default()).unwrap();
        assert_eq!(never.spin, Duration::ZERO);
        let err = parse(limits(|l| l.busy_poll_us = 20_000), TlsConfig::default()).unwrap_err();
        assert!(err.contains("--busy-poll-us 20000: at most 10000"), "{err}");
        assert_eq!(config.workers, 3);
        assert_eq!(config.max_connections, 7);
        assert_eq!(config.shared_budget, 64 << 20);
        assert_eq!(config.max_payload, 1 << 20);
        assert_eq!(config.max_handshake_options, 5);
        assert_eq!(config.handshake_deadline, Some(Duration::from_millis(2500)));
        assert!(config.tls.is_none());
        let err = parse(limits(|l| l.max_payload = 64 << 20), TlsConfig::default()).unwrap_err();
        assert!(err.contains("at most 33554432"), "{err}");
        let err =
            parse(limits(|l| l.handshake_deadline_secs = 0.0), TlsConfig::default()).unwrap_err();
        assert!(err.contains("positive number of seconds"), "{err}");
        let l = LimitSettings::default;
        let err = parse(l(), tls(TlsMode::Require, None, false)).unwrap_err();
        assert!(err.contains("--tls require needs --tls-certificates"), "{err}");
        let err = parse(l(), tls(TlsMode::Off, None, true)).unwrap_err();
        assert!(err.contains("--tls on"), "{err}");
        let err = parse(l(), tls(TlsMode::On, Some("/nonexistent"), false)).unwrap_err();
        assert!(err.contains("server-cert.pem"), "{err}");
    }
}
