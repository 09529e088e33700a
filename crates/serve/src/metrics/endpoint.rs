//! The metrics endpoint: `GET /metrics` over plain HTTP/1.0, answered by a small responder
//! thread with what a [`Render`] returns.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// What the metrics endpoint renders on each request.
pub type Render = Arc<dyn Fn() -> String + Send + Sync>;

/// A running metrics responder.
pub struct MetricsServer {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl MetricsServer {
    /// Listen on `addr` and answer `GET /metrics` (and `/`) with `render()`.
    pub fn start(addr: &str, render: Render) -> io::Result<MetricsServer> {
        let listener = TcpListener::bind(addr)
            .map_err(|e| io::Error::new(e.kind(), format!("metrics address {addr}: {e}")))?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let stop = Arc::clone(&stop);
            std::thread::Builder::new().name("metrics".into()).spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    match listener.accept() {
                        Ok((stream, _)) => {
                            let _ = answer(stream, &render);
                        }
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                            std::thread::sleep(Duration::from_millis(20));
                        }
                        Err(_) => std::thread::sleep(Duration::from_millis(20)),
                    }
                }
            })?
        };
        Ok(MetricsServer { addr, stop, thread: Some(thread) })
    }

    /// The address bound.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stop answering and join the thread.
    pub fn stop(mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn answer(mut stream: TcpStream, render: &Render) -> io::Result<()> {
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(Duration::from_secs(2)))?;
    stream.set_write_timeout(Some(Duration::from_secs(5)))?;
    let mut request = Vec::new();
    let mut buf = [0u8; 1024];
    while !request.windows(4).any(|w| w == b"\r\n\r\n") && !request.windows(2).any(|w| w == b"\n\n")
    {
        let n = stream.read(&mut buf)?;
        if n == 0 || request.len() > 16 * 1024 {
            break;
        }
        request.extend_from_slice(&buf[..n]);
    }
    let text = String::from_utf8_lossy(&request);
    let mut words = text.split_whitespace();
    let (method, path) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
    let path = path.split('?').next().unwrap_or("");
    let (status, body) = match (method, path) {
        ("GET", "/metrics" | "/") => ("200 OK", render()),
        ("GET", _) => ("404 Not Found", "not found; metrics are at /metrics\n".to_string()),
        _ => ("405 Method Not Allowed", "only GET\n".to_string()),
    };
    let head = format!(
        "HTTP/1.0 {status}\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes())?;
    stream.write_all(body.as_bytes())?;
    stream.flush()
}

#[cfg(test)]
mod tests {
    use super::*;
    use ember_replay::scrape::{sum, MetricsUrl};

    #[test]
    fn serves_over_http_and_404s_elsewhere() {
        let render: Render = Arc::new(|| "x_total 42\n".to_string());
        let server = match MetricsServer::start("127.0.0.1:0", render) {
            Ok(s) => s,
            Err(e) => panic!("{e}"),
        };
        let url = MetricsUrl::parse(&server.addr().to_string()).map_err(|e| e.to_string());
        let got = url.and_then(|u| u.scrape().map_err(|e| e.to_string()));
        assert_eq!(got.map(|s| sum(&s, "x_total")), Ok(42.0));
        let other =
            MetricsUrl::parse(&format!("{}/nope", server.addr())).map_err(|e| e.to_string());
        let err = other.and_then(|u| u.fetch().map_err(|e| e.to_string()));
        assert!(matches!(&err, Err(m) if m.contains("404")), "{err:?}");
        server.stop();
    }
}
