//! The control protocol (docs/reference/control.md): one JSON request per line, one JSON
//! reply per line, each carrying the protocol's version `v`.
//!
//! A request names its command in `cmd`, with the command's arguments beside it:
//! `{"v":1,"cmd":"status"}`, `{"v":1,"cmd":"flush","volume":"web"}`,
//! `{"v":1,"cmd":"set","key":"write-policy","value":"write-through","save":false}`. A
//! command that acts on one volume takes it as `volume`: `flush`, and the volume commands
//! `{"v":1,"cmd":"attach","volume":"c","backing":"/srv/c.img"}`, `uncache`, `recache` and
//! `{"v":1,"cmd":"remove","volume":"b","force":true}`.
//!
//! A reply is `{"v":1,"ok":true,"result":...}` or `{"v":1,"ok":false,"error":"..."}`; a
//! long command (`flush`) may send `{"v":1,"progress":{"done":N,"total":M}}` lines before
//! its reply. A request of another version, an unknown command or field, a line that is
//! not JSON or longer than [`MAX_REQUEST`] gets an error reply.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

/// The protocol version this server speaks.
pub const VERSION: u32 = 1;

/// The longest request line, in bytes, newline excluded.
pub const MAX_REQUEST: usize = 64 << 10;

/// A command of the control protocol.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "cmd", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Command {
    /// Every volume's state and the server's limits and connections.
    Status,
    /// Write back every block dirty at the call, then sync backing.
    Flush {
        /// A volume that must exist; every volume is flushed either way (the volumes share
        /// the cache's epochs).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        volume: Option<String>,
    },
    /// The value in force of a setting.
    Get {
        /// The setting: its `ember serve` flag's name (`write-policy`) or its key
        /// (`live.write-policy`).
        key: String,
        /// One volume's own setting (the key in its `[[volume]]` table, or the flag).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        volume: Option<String>,
    },
    /// Change a setting while serving.
    Set {
        /// The setting, as for `get`.
        key: String,
        /// The new value, as the flag takes it (`write-through`, `30%`, `64`).
        value: String,
        /// Also write it into the config file (atomically, keeping its comments).
        #[serde(default)]
        save: bool,
        /// Set one volume's own setting (`default` as the value: the cache-wide one again).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        volume: Option<String>,
    },
    /// Read the config file again and apply what can change live.
    Reload,
    /// Stop as SIGTERM does: drain the clients, shut the cache down cleanly.
    Stop,
    /// Add an export while serving: a new volume recorded on the cache device, cold.
    Attach {
        /// Its export name (1 to 64 bytes).
        volume: String,
        /// Its backing: a path or an NBD URI, as `--backing NAME=SPEC` takes it.
        backing: String,
        /// Also add its `[[volume]]` table to the config file (atomically, keeping its
        /// comments).
        #[serde(default)]
        save: bool,
        /// Its own settings, as `set --volume` takes them (key: value), applied together
        /// once it is attached; a key `set --volume` does not know, or a value its setting
        /// refuses, refuses the attach (checked before anything is attached).
        #[serde(default)]
        settings: BTreeMap<String, String>,
    },
    /// Write back and drop a volume's blocks; it stays exported, served from backing.
    Uncache {
        /// The volume.
        volume: String,
    },
    /// Cache an uncached volume again (cold).
    Recache {
        /// The volume.
        volume: String,
    },
    /// Stop a volume's export, write its dirty blocks back and free its slot.
    Remove {
        /// The volume.
        volume: String,
        /// Even with clients connected: their new requests fail with ESHUTDOWN.
        #[serde(default)]
        force: bool,
    },
    /// Accept backing's version of every block of a volume lost with a failed cache device
    /// (docs/reference/degraded.md): the blocks leave the lost list, a refused volume is
    /// served again.
    ClearLost {
        /// The volume.
        volume: String,
    },
    /// Put a new cache device in place of the one given up (degraded mode): the cache caches
    /// again, cold; the lost list stays (docs/reference/degraded.md).
    ReplaceCache {
        /// The new device: a file or a block device, at least the failed one's size.
        path: String,
        /// Reformat it even if it holds an ember cache.
        #[serde(default)]
        format: bool,
    },
}

impl Command {
    /// The command's name, as `cmd` spells it.
    pub fn name(&self) -> &'static str {
        match self {
            Command::Status => "status",
            Command::Flush { .. } => "flush",
            Command::Get { .. } => "get",
            Command::Set { .. } => "set",
            Command::Reload => "reload",
            Command::Stop => "stop",
            Command::Attach { .. } => "attach",
            Command::Uncache { .. } => "uncache",
            Command::Recache { .. } => "recache",
            Command::Remove { .. } => "remove",
            Command::ClearLost { .. } => "clear-lost",
            Command::ReplaceCache { .. } => "replace-cache",
        }
    }
}

impl Command {
    /// The arguments the command takes, as the request names them.
    pub fn fields(&self) -> &'static [&'static str] {
        match self {
            Command::Status | Command::Reload | Command::Stop => &[],
            Command::Flush { .. } => &["volume"],
            Command::Get { .. } => &["key", "volume"],
            Command::Set { .. } => &["key", "value", "save", "volume"],
            Command::Attach { .. } => &["volume", "backing", "save", "settings"],
            Command::Uncache { .. } | Command::Recache { .. } => &["volume"],
            Command::Remove { .. } => &["volume", "force"],
            Command::ClearLost { .. } => &["volume"],
            Command::ReplaceCache { .. } => &["path", "format"],
        }
    }
}

/// A request line: the version and the command.
#[derive(Clone, Debug, PartialEq)]
pub struct Request {
    /// The protocol version the client speaks.
    pub v: u32,
    /// What it asks.
    pub command: Command,
}

impl Request {
    /// A request of this protocol's version.
    pub fn new(command: Command) -> Request {
        Request { v: VERSION, command }
    }

    /// The request as one line of JSON (no newline).
    pub fn to_line(&self) -> String {
        let mut value = serde_json::to_value(&self.command).unwrap_or(Value::Null);
        if let Value::Object(map) = &mut value {
            map.insert("v".into(), Value::from(self.v));
        }
        value.to_string()
    }
}

/// Parse one request line (without its newline): an error says what is wrong, for the
/// error reply.
pub fn parse_request(line: &[u8]) -> Result<Request, String> {
    if line.len() > MAX_REQUEST {
        return Err(format!("request longer than {MAX_REQUEST} bytes"));
    }
    let text = std::str::from_utf8(line).map_err(|_| "request is not UTF-8".to_string())?;
    let value: Value =
        serde_json::from_str(text).map_err(|e| format!("request is not JSON: {e}"))?;
    let Value::Object(mut map) = value else {
        return Err("request is not a JSON object".into());
    };
    let v = match map.remove("v") {
        Some(Value::Number(n)) => n.as_u64().and_then(|n| u32::try_from(n).ok()),
        Some(_) => None,
        None => return Err(format!("request has no version: add \"v\":{VERSION}")),
    }
    .ok_or_else(|| "\"v\" must be a protocol version number".to_string())?;
    if v != VERSION {
        return Err(format!("protocol version {v} is not spoken here (version {VERSION})"));
    }
    let command = Command::deserialize(Value::Object(map.clone())).map_err(|e| e.to_string())?;
    // serde's deny_unknown_fields does not reach a variant without fields (`status`).
    if let Some(unknown) =
        map.keys().find(|k| *k != "cmd" && !command.fields().contains(&k.as_str()))
    {
        return Err(format!("unknown field `{unknown}` for `{}`", command.name()));
    }
    Ok(Request { v, command })
}

/// A reply line.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Reply {
    /// The protocol version.
    pub v: u32,
    /// Interim progress of a long command (no `ok` yet).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<Progress>,
    /// Whether the command succeeded (absent on a progress line).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ok: Option<bool>,
    /// The command's result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    /// Why it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Progress of a long command: `done` of `total` units (blocks, for `flush`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Progress {
    /// Units done.
    pub done: u64,
    /// Units at the start.
    pub total: u64,
}

impl Reply {
    /// A success carrying `result`.
    pub fn ok(result: Value) -> Reply {
        Reply { v: VERSION, progress: None, ok: Some(true), result: Some(result), error: None }
    }

    /// A failure saying why.
    pub fn error(why: impl Into<String>) -> Reply {
        Reply { v: VERSION, progress: None, ok: Some(false), result: None, error: Some(why.into()) }
    }

    /// An interim progress line.
    pub fn progress(done: u64, total: u64) -> Reply {
        Reply {
            v: VERSION,
            progress: Some(Progress { done, total }),
            ok: None,
            result: None,
            error: None,
        }
    }

    /// Whether this is the final reply (not a progress line).
    pub fn is_final(&self) -> bool {
        self.ok.is_some()
    }

    /// The reply as one line of JSON, newline included.
    pub fn to_line(&self) -> String {
        let mut s = serde_json::to_string(self)
            .unwrap_or_else(|_| format!("{{\"v\":{VERSION},\"ok\":false,\"error\":\"reply\"}}"));
        s.push('\n');
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_round_trip_and_bad_ones_are_named() {
        for command in [
            Command::Status,
            Command::Flush { volume: None },
            Command::Flush { volume: Some("web".into()) },
            Command::Get { key: "write-policy".into(), volume: None },
            Command::Set { key: "max-dirty".into(), value: "30%".into(), save: true, volume: None },
            Command::Set {
                key: "write-policy".into(),
                value: "write-around".into(),
                save: false,
                volume: Some("db".into()),
            },
            Command::Reload,
            Command::Stop,
            Command::Attach {
                volume: "c".into(),
                backing: "/srv/c.img".into(),
                save: true,
                settings: BTreeMap::from([("write-policy".into(), "write-through".into())]),
            },
            Command::Uncache { volume: "a".into() },
            Command::Recache { volume: "a".into() },
            Command::Remove { volume: "b".into(), force: true },
            Command::ClearLost { volume: "db".into() },
            Command::ReplaceCache { path: "/dev/sdf".into(), format: true },
        ] {
            let line = Request::new(command.clone()).to_line();
            assert_eq!(parse_request(line.as_bytes()), Ok(Request::new(command)), "{line}");
        }
        let p = |s: &str| parse_request(s.as_bytes()).unwrap_err();
        assert!(p(r#"{"cmd":"status"}"#).contains("no version"));
        assert!(p(r#"{"v":2,"cmd":"status"}"#).contains("version 2"));
        assert!(p(r#"{"v":1,"cmd":"dance"}"#).contains("dance"));
        assert!(p(r#"{"v":1,"cmd":"status","colour":1}"#).contains("colour"));
        assert!(p(r#"{"v":1,"cmd":"get"}"#).contains("key"));
        assert!(p("[1,2]").contains("object"));
        assert!(p("{").contains("not JSON"));
        assert!(p(&"x".repeat(MAX_REQUEST + 1)).contains("longer"));
        let r: Reply = serde_json::from_str(Reply::progress(3, 9).to_line().trim()).unwrap();
        assert!(!r.is_final());
        assert_eq!(r.progress, Some(Progress { done: 3, total: 9 }));
    }
}
