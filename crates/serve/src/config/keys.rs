//! Every setting by its two names: the `ember serve` flag and the key in the config file
//! (a path of tables), and whether a running server applies a new value (`ember ctl set`,
//! `reload`) or needs a restart. The command line's flags override the file's keys through
//! this table; `ember ctl set KEY` takes the flag's name; an error that names a flag is
//! located at its key in the file.

/// One setting.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Key {
    /// The `ember serve` flag without its dashes (`write-policy`); `ember ctl` names the
    /// setting so.
    pub flag: &'static str,
    /// Where the config file holds it (`["live", "write-policy"]`).
    pub path: &'static [&'static str],
    /// A running server applies a new value (else the new value needs a restart).
    pub live: bool,
}

impl Key {
    /// The key's dotted path in the file (`live.write-policy`).
    pub fn dotted(&self) -> String {
        self.path.join(".")
    }

    /// The setting named by a flag (`write-policy` or `--write-policy`) or a dotted path.
    pub fn find(name: &str) -> Option<&'static Key> {
        let flag = name.trim_start_matches("--");
        KEYS.iter().find(|k| k.flag == flag || k.dotted() == name)
    }

    /// The setting whose flag a message names first (`--max-dirty 200%: ...`).
    pub fn named_in(message: &str) -> Option<&'static Key> {
        message.match_indices("--").find_map(|(i, _)| {
            let rest = &message[i + 2..];
            let end =
                rest.find(|c: char| !(c.is_ascii_alphanumeric() || c == '-')).unwrap_or(rest.len());
            KEYS.iter().find(|k| k.flag == &rest[..end])
        })
    }
}

const fn key(flag: &'static str, path: &'static [&'static str], live: bool) -> Key {
    Key { flag, path, live }
}

/// Every setting of `ember serve`, in the order of its flags.
pub const KEYS: &[Key] = &[
    key("name", &["name"], false),
    key("control", &["control"], false),
    key("log-format", &["log-format"], false),
    key("cache", &["cache", "device"], false),
    key("backing", &["volume"], false),
    key("listen", &["listen", "tcp"], false),
    key("unix", &["listen", "unix"], false),
    key("policy", &["live", "policy"], true),
    key("admission", &["live", "admission"], true),
    key("write-policy", &["live", "write-policy"], true),
    key("block-size", &["cache", "block-size"], false),
    key("metrics", &["metrics"], false),
    key("format-if-needed", &["cache", "format-if-needed"], false),
    key("cache-size", &["cache", "size"], false),
    key("direct", &["cache", "direct"], false),
    key("trust-nbd-backing", &["nbd-backing", "trust-unchanged"], false),
    key("workers", &["workers"], false),
    key("max-connections", &["live", "limits", "max-connections"], true),
    key("buffer-budget", &["live", "limits", "buffer-budget"], true),
    key("max-payload", &["live", "limits", "max-payload"], false),
    key("max-handshake-options", &["live", "limits", "max-handshake-options"], false),
    key("handshake-deadline", &["live", "limits", "handshake-deadline"], false),
    key("tls", &["tls", "mode"], false),
    key("tls-certificates", &["tls", "certificates"], false),
    key("tls-verify-peer", &["tls", "verify-peer"], false),
    key("unix-mode", &["listen", "unix-mode"], false),
    key("busy-poll-us", &["live", "limits", "busy-poll-us"], false),
    key("warmup-log", &["warmup", "log"], false),
    key("warmup", &["warmup", "selector"], false),
    key("warmup-size", &["warmup", "size"], false),
    key("warmup-region", &["warmup", "region"], false),
    key("warmup-log-size", &["warmup", "log-size"], false),
    key("warmup-staging", &["warmup", "staging"], false),
    key("warmup-log-interval", &["warmup", "log-interval"], false),
    key("warmup-snapshot", &["warmup", "snapshot"], false),
    key("warmup-snapshot-staging", &["warmup", "snapshot-staging"], false),
    key("warmup-snapshot-size", &["warmup", "snapshot-size"], false),
    key("epoch-count-memory", &["live", "epoch-count-memory"], true),
    key("sieve-t1", &["live", "sieve", "t1"], true),
    key("sieve-t2", &["live", "sieve", "t2"], true),
    key("sieve-window", &["live", "sieve", "window"], true),
    key("sieve-subwindows", &["live", "sieve", "subwindows"], true),
    key("sieve-imct", &["live", "sieve", "imct"], true),
    key("sieve-threshold", &["live", "sieve", "threshold"], true),
    key("epoch", &["live", "sieve", "epoch"], true),
    key("sieve-fraction", &["live", "sieve", "fraction"], true),
    key("sieve-seed", &["live", "sieve", "seed"], true),
    key("admit-probability", &["live", "sieve", "probability"], true),
    key("bloom-keys", &["live", "sieve", "bloom-keys"], true),
    key("bloom-fpr", &["live", "sieve", "bloom-fpr"], true),
    key("max-dirty", &["live", "writeback", "max-dirty"], true),
    key("min-dirty", &["live", "writeback", "min-dirty"], true),
    key("max-epochs", &["live", "writeback", "max-epochs"], true),
    key("flush-order", &["live", "writeback", "flush-order"], true),
    key("seq-cutoff-policy", &["live", "seq-cutoff", "policy"], true),
    key("seq-cutoff-read", &["live", "seq-cutoff", "read"], true),
    key("seq-cutoff-write", &["live", "seq-cutoff", "write"], true),
    key("seq-cutoff-streams", &["live", "seq-cutoff", "streams"], true),
    key("flush-rate", &["live", "cleaning", "flush-rate"], true),
    key("flush-idle", &["live", "cleaning", "flush-idle"], true),
    key("dirty-target", &["live", "cleaning", "dirty-target"], true),
    key("flush-min-rate", &["live", "cleaning", "min-rate"], true),
    key("demote", &["tiers", "demote"], false),
    key("demote-queue", &["tiers", "demote-queue"], false),
    key("array-scheme", &["tiers", "array-scheme"], false),
    key("demote-admission", &["tiers", "demote-admission"], false),
    key("nbd-reconnect", &["nbd-backing", "reconnect"], false),
    key("nbd-dead-after", &["nbd-backing", "dead-after"], false),
    key("io-error-limit", &["health", "io-error-limit"], false),
    key("io-error-halflife", &["health", "io-error-halflife"], false),
    key("io-timeout", &["health", "io-timeout"], false),
    key("state-dir", &["health", "state-dir"], false),
    key("reformat-failed-cache", &["cache", "reformat-failed"], false),
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{BackingVolume, ServeConfig};

    /// Every key's path exists in a serialized config (with every optional setting given),
    /// and no two keys share a flag or a path.
    #[test]
    fn every_key_is_a_path_of_the_config() {
        let mut c = ServeConfig::new("c.img", vec![BackingVolume::new("v", "b.img")]);
        c.name = Some("n".into());
        c.control = Some("c.sock".into());
        c.metrics = Some("127.0.0.1:0".into());
        c.workers = Some(2);
        c.cache.size = Some(1 << 20);
        c.listen.tcp = Some("127.0.0.1:0".into());
        c.listen.unix = Some("u.sock".into());
        c.tls.certificates = Some("certs".into());
        c.warmup.log = Some("w.log".into());
        c.live.writeback.max_dirty = Some("50%".into());
        c.live.writeback.min_dirty = Some("10".into());
        c.live.cleaning.dirty_target = Some("5%".into());
        c.tiers.array_scheme = Some("demote-lru".into());
        c.health.state_dir = Some("state".into());
        let table = toml::Table::try_from(&c).unwrap();
        for k in KEYS {
            let mut item = toml::Value::Table(table.clone());
            for p in k.path {
                item = item.get(p).unwrap_or_else(|| panic!("{}: no {p}", k.flag)).clone();
            }
        }
        let mut flags: Vec<_> = KEYS.iter().map(|k| k.flag).collect();
        flags.sort();
        flags.dedup();
        assert_eq!(flags.len(), KEYS.len());
        assert_eq!(Key::named_in("--max-dirty 200%: no").map(|k| k.flag), Some("max-dirty"));
        assert_eq!(Key::named_in("--warmup-log x").map(|k| k.flag), Some("warmup-log"));
        assert_eq!(Key::find("live.write-policy").map(|k| k.flag), Some("write-policy"));
    }
}
