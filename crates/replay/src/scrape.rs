//! Reading a server's Prometheus text exposition over plain HTTP: `ember replay` samples the
//! cache's hit ratio with it, `ember stats` prints everything.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

/// Read hits of the engine, per volume (blocks).
pub const READ_HITS: &str = "ember_cache_read_hits_total";
/// Read misses of the engine, per volume (blocks).
pub const READ_MISSES: &str = "ember_cache_read_misses_total";

/// Why metrics could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ScrapeError {
    /// The URL is not `http://host:port[/path]` or `host:port`.
    #[error("metrics address {0:?}: expected http://HOST:PORT[/PATH] or HOST:PORT")]
    BadUrl(String),
    /// Connecting, sending or receiving failed.
    #[error("fetching {url}")]
    Io {
        /// The URL.
        url: String,
        /// The error.
        source: std::io::Error,
    },
    /// The server did not answer 200 with a body.
    #[error("fetching {url}: {message}")]
    Http {
        /// The URL.
        url: String,
        /// What was wrong.
        message: String,
    },
    /// A line of the exposition could not be parsed.
    #[error("metrics line {line}: {message}: {text:?}")]
    Parse {
        /// 1-based line number.
        line: usize,
        /// What was wrong.
        message: String,
        /// The line.
        text: String,
    },
}

/// Where a server publishes its metrics.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MetricsUrl {
    /// `host:port`.
    pub authority: String,
    /// Request path (default `/metrics`).
    pub path: String,
}

impl MetricsUrl {
    /// Parse `http://host:port[/path]` or `host:port` (path `/metrics`).
    pub fn parse(s: &str) -> Result<MetricsUrl, ScrapeError> {
        let rest = s.strip_prefix("http://").unwrap_or(s);
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/metrics"),
        };
        if authority.is_empty() || !authority.contains(':') || s.starts_with("https://") {
            return Err(ScrapeError::BadUrl(s.to_string()));
        }
        let path = if path == "/" { "/metrics" } else { path };
        Ok(MetricsUrl { authority: authority.to_string(), path: path.to_string() })
    }

    /// Fetch the exposition text (HTTP/1.0 GET, 5 s timeouts).
    pub fn fetch(&self) -> Result<String, ScrapeError> {
        let url = self.to_string();
        let io = |source| ScrapeError::Io { url: url.clone(), source };
        let addr = self
            .authority
            .to_socket_addrs()
            .map_err(io)?
            .next()
            .ok_or_else(|| ScrapeError::BadUrl(url.clone()))?;
        let timeout = Duration::from_secs(5);
        let mut stream = TcpStream::connect_timeout(&addr, timeout).map_err(io)?;
        stream.set_read_timeout(Some(timeout)).map_err(io)?;
        stream.set_write_timeout(Some(timeout)).map_err(io)?;
        // One write: a server that answers after its first read must see the whole request.
        let request = format!("GET {} HTTP/1.0\r\nHost: {}\r\n\r\n", self.path, self.authority);
        stream.write_all(request.as_bytes()).map_err(io)?;
        let mut raw = Vec::new();
        stream.take(64 << 20).read_to_end(&mut raw).map_err(io)?;
        let text = String::from_utf8(raw).map_err(|_| ScrapeError::Http {
            url: url.clone(),
            message: "the response is not UTF-8".into(),
        })?;
        let (head, body) = text.split_once("\r\n\r\n").ok_or_else(|| ScrapeError::Http {
            url: url.clone(),
            message: "no end of headers in the response".into(),
        })?;
        let status = head.lines().next().unwrap_or_default();
        if status.split_whitespace().nth(1) != Some("200") {
            return Err(ScrapeError::Http { url, message: format!("answered {status:?}") });
        }
        Ok(body.to_string())
    }

    /// Fetch and parse.
    pub fn scrape(&self) -> Result<Vec<Sample>, ScrapeError> {
        parse(&self.fetch()?)
    }
}

impl std::fmt::Display for MetricsUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "http://{}{}", self.authority, self.path)
    }
}

/// One sample line: `name{label="value",...} value`.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    /// Metric name.
    pub name: String,
    /// Labels in the order given.
    pub labels: Vec<(String, String)>,
    /// The value.
    pub value: f64,
}

impl Sample {
    /// The value of label `key`, if present.
    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }
}

/// Sum of every sample called `name` (over all label sets).
pub fn sum(samples: &[Sample], name: &str) -> f64 {
    samples.iter().filter(|s| s.name == name).map(|s| s.value).sum()
}

fn parse_labels(s: &str) -> Result<Vec<(String, String)>, String> {
    let mut labels = Vec::new();
    let mut rest = s.trim();
    while !rest.is_empty() {
        let eq = rest.find('=').ok_or("label without `=`")?;
        let key = rest[..eq].trim().to_string();
        let after = rest[eq + 1..].trim_start();
        let mut chars = after.char_indices();
        if chars.next().map(|(_, c)| c) != Some('"') {
            return Err("label value not quoted".into());
        }
        let mut value = String::new();
        let mut end = None;
        let mut escaped = false;
        for (i, c) in chars {
            if escaped {
                value.push(match c {
                    'n' => '\n',
                    other => other,
                });
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                end = Some(i);
                break;
            } else {
                value.push(c);
            }
        }
        let end = end.ok_or("unterminated label value")?;
        labels.push((key, value));
        rest = after[end + 1..].trim_start();
        rest = rest.strip_prefix(',').unwrap_or(rest).trim_start();
    }
    Ok(labels)
}

fn parse_value(s: &str) -> Option<f64> {
    match s {
        "+Inf" | "Inf" => Some(f64::INFINITY),
        "-Inf" => Some(f64::NEG_INFINITY),
        "NaN" => Some(f64::NAN),
        _ => s.parse().ok(),
    }
}

/// Parse Prometheus text exposition (comments and blank lines skipped; timestamps ignored).
pub fn parse(text: &str) -> Result<Vec<Sample>, ScrapeError> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line_t = line.trim();
        if line_t.is_empty() || line_t.starts_with('#') {
            continue;
        }
        let err = |message: &str| ScrapeError::Parse {
            line: i + 1,
            message: message.to_string(),
            text: line.to_string(),
        };
        let (name, labels, rest) = match line_t.find('{') {
            Some(open) => {
                let close = line_t.rfind('}').ok_or_else(|| err("no closing `}`"))?;
                if close < open {
                    return Err(err("`}` before `{`"));
                }
                let labels = parse_labels(&line_t[open + 1..close]).map_err(|m| err(&m))?;
                (&line_t[..open], labels, &line_t[close + 1..])
            }
            None => {
                let sp = line_t.find(char::is_whitespace).ok_or_else(|| err("no value"))?;
                (&line_t[..sp], Vec::new(), &line_t[sp..])
            }
        };
        let value = rest.split_whitespace().next().ok_or_else(|| err("no value"))?;
        let value = parse_value(value).ok_or_else(|| err("value is not a number"))?;
        if name.is_empty() {
            return Err(err("no metric name"));
        }
        out.push(Sample { name: name.trim().to_string(), labels, value });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_names_labels_values() {
        let text = "# HELP x y\n# TYPE a counter\na 1\nb{volume=\"web\",le=\"+Inf\"} 2.5 1700000000\n\nc{v=\"q\\\"x\"} +Inf\n";
        let s = match parse(text) {
            Ok(s) => s,
            Err(e) => panic!("{e}"),
        };
        assert_eq!(s.len(), 3);
        assert_eq!(s[0], Sample { name: "a".into(), labels: vec![], value: 1.0 });
        assert_eq!(s[1].label("volume"), Some("web"));
        assert_eq!(s[1].label("le"), Some("+Inf"));
        assert_eq!(s[1].value, 2.5);
        assert_eq!(s[2].label("v"), Some("q\"x"));
        assert!(s[2].value.is_infinite());
        assert_eq!(sum(&s, "a"), 1.0);
    }

    #[test]
    fn bad_lines_name_their_number() {
        match parse("a 1\nb{x=\"1\" 2\n") {
            Err(ScrapeError::Parse { line, .. }) => assert_eq!(line, 2),
            other => panic!("{other:?}"),
        }
        assert!(parse("a one\n").is_err());
        assert!(parse("a{x=1} 2\n").is_err());
    }

    #[test]
    fn urls() {
        let u = MetricsUrl::parse("127.0.0.1:9100");
        assert_eq!(
            u.ok(),
            Some(MetricsUrl { authority: "127.0.0.1:9100".into(), path: "/metrics".into() })
        );
        let u = MetricsUrl::parse("http://localhost:1/x").map(|u| u.to_string());
        assert_eq!(u.ok(), Some("http://localhost:1/x".to_string()));
        assert!(MetricsUrl::parse("localhost").is_err());
        assert!(MetricsUrl::parse("https://a:1/").is_err());
    }

    #[test]
    fn fetches_over_http() {
        use std::net::TcpListener;
        let listener = match TcpListener::bind("127.0.0.1:0") {
            Ok(l) => l,
            Err(e) => panic!("{e}"),
        };
        let addr = listener.local_addr().map(|a| a.to_string()).unwrap_or_default();
        let server = std::thread::spawn(move || {
            if let Ok((mut s, _)) = listener.accept() {
                // Read the whole request before answering (closing with unread bytes resets
                // the connection).
                let mut req = Vec::new();
                let mut buf = [0u8; 1024];
                while !req.windows(4).any(|w| w == b"\r\n\r\n") {
                    match s.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => req.extend_from_slice(&buf[..n]),
                    }
                }
                let req = String::from_utf8_lossy(&req).to_string();
                let _ = s.write_all(b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nember_cache_read_hits_total{volume=\"a\"} 7\n");
                return req;
            }
            String::new()
        });
        let url = MetricsUrl::parse(&addr).map_err(|e| e.to_string());
        let samples = url.and_then(|u| u.scrape().map_err(|e| e.to_string()));
        assert_eq!(samples.map(|s| sum(&s, READ_HITS)), Ok(7.0));
        let req = server.join().unwrap_or_default();
        assert!(req.starts_with("GET /metrics HTTP/1.0\r\n"), "{req}");
    }
}
