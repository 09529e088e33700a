//! NBD URIs (the subset of the NBD URI standard that ember uses): `nbd://host[:port][/export]`
//! and `nbd+unix:///[export]?socket=PATH`.

use std::path::PathBuf;

/// Where an NBD server listens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Endpoint {
    /// `host:port` for TCP.
    Tcp(String),
    /// A Unix socket path.
    Unix(PathBuf),
}

/// A parsed NBD URI: where to connect and which export to ask for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NbdUri {
    /// Where the server listens.
    pub endpoint: Endpoint,
    /// The export name (empty: the default export).
    pub export: String,
}

/// The IANA port for NBD.
pub const DEFAULT_PORT: u16 = 10809;

fn percent_decode(s: &str) -> Result<String, String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = s
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| format!("bad percent escape in {s:?}"))?;
            out.push(hex);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| format!("{s:?} is not UTF-8 once decoded"))
}

impl NbdUri {
    /// Parse `nbd://host[:port][/export]` or `nbd+unix:///[export]?socket=PATH`.
    pub fn parse(uri: &str) -> Result<NbdUri, String> {
        if let Some(rest) = uri.strip_prefix("nbd://") {
            let (authority, path) = match rest.find('/') {
                Some(i) => (&rest[..i], &rest[i + 1..]),
                None => (rest, ""),
            };
            if authority.is_empty() {
                return Err(format!("{uri:?}: missing host"));
            }
            let has_port = if authority.starts_with('[') {
                authority.contains("]:")
            } else {
                authority.contains(':')
            };
            let host_port = if has_port {
                authority.to_string()
            } else {
                format!("{authority}:{DEFAULT_PORT}")
            };
            Ok(NbdUri { endpoint: Endpoint::Tcp(host_port), export: percent_decode(path)? })
        } else if let Some(rest) = uri.strip_prefix("nbd+unix://") {
            let (path_part, query) = match rest.find('?') {
                Some(i) => (&rest[..i], &rest[i + 1..]),
                None => return Err(format!("{uri:?}: nbd+unix needs ?socket=PATH")),
            };
            let export = path_part.strip_prefix('/').unwrap_or(path_part);
            let socket = query
                .split('&')
                .find_map(|kv| kv.strip_prefix("socket="))
                .ok_or_else(|| format!("{uri:?}: nbd+unix needs ?socket=PATH"))?;
            Ok(NbdUri {
                endpoint: Endpoint::Unix(PathBuf::from(percent_decode(socket)?)),
                export: percent_decode(export)?,
            })
        } else {
            Err(format!("{uri:?}: expected nbd:// or nbd+unix://"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_tcp_and_unix_uris() {
        assert_eq!(
            NbdUri::parse("nbd://127.0.0.1:1234/disk%201").unwrap(),
            NbdUri { endpoint: Endpoint::Tcp("127.0.0.1:1234".into()), export: "disk 1".into() }
        );
        assert_eq!(
            NbdUri::parse("nbd://example.com").unwrap().endpoint,
            Endpoint::Tcp("example.com:10809".into())
        );
        assert_eq!(
            NbdUri::parse("nbd://[::1]/x").unwrap().endpoint,
            Endpoint::Tcp("[::1]:10809".into())
        );
        assert_eq!(
            NbdUri::parse("nbd+unix:///name?socket=/tmp/s.sock").unwrap(),
            NbdUri { endpoint: Endpoint::Unix("/tmp/s.sock".into()), export: "name".into() }
        );
        assert!(NbdUri::parse("http://x").is_err());
        assert!(NbdUri::parse("nbd+unix:///name").is_err());
        assert!(NbdUri::parse("nbd://h/%zz").is_err());
    }
}
