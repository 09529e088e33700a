//! The flags of `ember serve` and the configuration they become (the checks themselves are
//! the server's, tested in `ember_serve`; these run them from the flags).

use super::*;
use clap::Parser;
use ember_engine::{SnapshotOptions, WarmupSize};
use ember_serve::warmup::parse_warmup_size;
use std::path::Path;
use std::time::Duration;

#[test]
fn defaults_are_the_servers() {
    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        serve: ServeArgs,
    }
    let c =
        Cli::try_parse_from(["serve", "--cache", "c.img", "--backing", "web=/dev/sdb"]).unwrap();
    let web = BackingVolume::new("web", "/dev/sdb");
    assert_eq!(c.serve.config().unwrap(), ServeConfig::new("c.img", vec![web]));
    let c = Cli::try_parse_from([
        "serve",
        "--cache",
        "mem:64M",
        "--backing",
        "a=x",
        "--backing",
        "b=nbd://h/b",
        "--policy",
        "arc",
        "--max-dirty",
        "10%",
        "--workers",
        "3",
        "--unix",
        "s.sock",
        "--demote",
    ])
    .unwrap();
    let config = c.serve.config().unwrap();
    assert_eq!(config.volumes.len(), 2);
    assert_eq!(config.volumes[1].backing, "nbd://h/b");
    assert_eq!(config.live.policy, "arc");
    assert_eq!(config.live.writeback.max_dirty.as_deref(), Some("10%"));
    assert_eq!(config.workers, Some(3));
    assert_eq!(config.listen.unix.as_deref(), Some(Path::new("s.sock")));
    assert!(config.tiers.demote);
}

#[test]
fn limits_and_tls_flags() {
    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        net: NetArgs,
    }
    let parse = |args: &[&str]| {
        Cli::try_parse_from(std::iter::once("serve").chain(args.iter().copied()))
            .map_err(|e| e.to_string())
            .and_then(|c| {
                ember_serve::net::server_config(&c.net.limits(), &c.net.tls(), 3)
                    .map_err(|e| format!("{e:#}"))
            })
    };
    let config = parse(&[
        "--max-connections",
        "7",
        "--buffer-budget",
        "64M",
        "--max-payload",
        "1M",
        "--max-handshake-options",
        "5",
        "--handshake-deadline",
        "2.5",
        "--busy-poll-us",
        "120",
    ])
    .unwrap();
    assert_eq!(config.spin, Duration::from_micros(120));
    assert_eq!(parse(&[]).unwrap().spin, Duration::from_micros(50));
    assert_eq!(parse(&["--busy-poll-us", "0"]).unwrap().spin, Duration::ZERO);
    let err = parse(&["--busy-poll-us", "20000"]).unwrap_err();
    assert!(err.contains("--busy-poll-us 20000: at most 10000"), "{err}");
    let limits = (config.workers, config.max_connections, config.shared_budget);
    assert_eq!(limits, (3, 7, 64 << 20));
    let handshake = (config.max_payload, config.max_handshake_options, config.handshake_deadline);
    assert_eq!(handshake, (1 << 20, 5, Some(Duration::from_millis(2500))));
    assert!(config.tls.is_none());
    let err = parse(&["--max-payload", "64M"]).unwrap_err();
    assert!(err.contains("at most 33554432"), "{err}");
    let err = parse(&["--tls", "require"]).unwrap_err();
    assert!(err.contains("--tls require needs --tls-certificates"), "{err}");
    let err = parse(&["--tls-verify-peer"]).unwrap_err();
    assert!(err.contains("--tls on"), "{err}");
    let err = parse(&["--tls", "maybe"]).unwrap_err();
    assert!(err.contains("not a TLS mode"), "{err}");
    let err = parse(&["--tls", "on", "--tls-certificates", "/nonexistent"]).unwrap_err();
    assert!(err.contains("server-cert.pem"), "{err}");
    assert_eq!(parse_mode("600"), Ok(0o600));
    assert_eq!(parse_mode("0660"), Ok(0o660));
    assert!(parse_mode("1777").is_err());
    assert!(parse_mode("9").is_err());
}

#[test]
fn warmup_sizes_and_flags() {
    assert_eq!(parse_warmup_size("50%").ok(), Some(WarmupSize::Percent(50.0)));
    assert_eq!(parse_warmup_size("256M").ok(), Some(WarmupSize::Bytes(256 << 20)));
    assert!(parse_warmup_size("0%").is_err());
    assert!(parse_warmup_size("101%").is_err());
    assert!(parse_warmup_size("x%").is_err());
    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        w: WarmupArgs,
    }
    let parse = |args: &[&str]| {
        Cli::try_parse_from(std::iter::once("serve").chain(args.iter().copied()))
            .map_err(|e| e.to_string())
            .and_then(|c| c.w.settings().options(Path::new("c.img")).map_err(|e| format!("{e:#}")))
    };
    assert!(parse(&[]).unwrap().is_none());
    let o = parse(&["--warmup-log", "w.log", "--warmup", "top-k", "--warmup-region", "4K"])
        .unwrap()
        .unwrap();
    assert_eq!(o.selector, Some(ember_policy::warmup::SelectorKind::TopK));
    assert_eq!((o.region_bytes, o.staging_bytes, o.log_bytes), (4096, 256 << 10, 64 << 20));
    assert_eq!(parse(&["--warmup-log", "w", "--warmup", "none"]).unwrap().unwrap().selector, None);
    assert!(parse(&["--warmup", "top-k"]).unwrap_err().contains("--warmup-log"));
    assert!(parse(&["--warmup-log", "w", "--warmup", "lru"])
        .unwrap_err()
        .contains("unknown warmup selector"));
    assert!(parse(&["--warmup-log", "w", "--warmup-region", "2M"])
        .unwrap_err()
        .contains("4K to 1M"));
    // The snapshot, its sizes, the log interval, auto.
    let o = parse(&["--warmup-log", "w", "--warmup-snapshot", "--warmup-log-interval", "2s"])
        .unwrap()
        .unwrap();
    assert_eq!(o.snapshot, Some(SnapshotOptions { staging_bytes: 128 << 20, size_bytes: 1 << 30 }));
    assert_eq!(o.log_interval, Duration::from_secs(2));
    let o = parse(&[
        "--warmup-log",
        "w",
        "--warmup-snapshot",
        "--warmup-snapshot-staging",
        "64K",
        "--warmup-snapshot-size",
        "4M",
        "--warmup",
        "auto",
    ])
    .unwrap()
    .unwrap();
    assert_eq!(o.snapshot, Some(SnapshotOptions { staging_bytes: 64 << 10, size_bytes: 4 << 20 }));
    assert_eq!(o.log_interval, Duration::from_millis(10));
    assert!(parse(&["--warmup-log", "w"]).unwrap().unwrap().snapshot.is_none());
    assert!(parse(&["--warmup-log", "w", "--warmup-snapshot-size", "4M"])
        .unwrap_err()
        .contains("--warmup-snapshot"));
    assert!(parse(&["--warmup-log", "w", "--warmup-log-interval", "0ms"])
        .unwrap_err()
        .contains("between 1ms and 3600s"));
}

#[test]
fn backings() {
    let parse =
        |s: &str| parse_backing(s).and_then(|b| b.check().map(|()| b)).map_err(|e| e.to_string());
    let b = BackingVolume::new("web", "/dev/sdb");
    assert_eq!(parse("web=/dev/sdb"), Ok(b));
    let b = BackingVolume::new("db", "nbd://h:1/x=y");
    assert_eq!(parse("db=nbd://h:1/x=y"), Ok(b));
    assert!(parse("/dev/sdb").is_err());
    assert!(parse("=x").is_err());
    assert!(parse("x=").is_err());
}

/// The flags given on the command line are the settings they name, whatever struct of
/// arguments they come from (clap also lists each flattened struct as a group: not a flag).
#[test]
fn given_flags_are_the_flags_typed() {
    use clap::{CommandFactory, FromArgMatches};
    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        serve: ServeArgs,
    }
    let matches = Cli::command()
        .try_get_matches_from([
            "serve",
            "--config",
            "e.toml",
            "--max-dirty",
            "75",
            "--policy",
            "arc",
        ])
        .unwrap();
    assert!(Cli::from_arg_matches(&matches).is_ok());
    let mut given = given_flags(&matches);
    given.sort();
    assert_eq!(given, ["max-dirty", "policy"]);
}

/// Every flag of `ember serve` but the file's own (`--config`, `--print-config`, `--check`)
/// is a setting with a key in the config file, so that it overrides the file's key and
/// `ember ctl get|set` can name it: `settings_of` (what `given_flags` hands `ConfigSource`)
/// names no setting that `Key::find` does not know.
#[test]
fn every_flag_is_a_setting_with_a_key() {
    use clap::CommandFactory;
    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        serve: ServeArgs,
    }
    let cmd = Cli::command();
    let mut missing = Vec::new();
    for arg in cmd.get_arguments() {
        let Some(long) = arg.get_long() else { continue };
        for name in settings_of(long) {
            if ember_serve::config::Key::find(&name).is_none() {
                missing.push(name);
            }
        }
    }
    assert!(missing.is_empty(), "flags with no key in the config file: {missing:?}");
}
