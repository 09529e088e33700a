//! The control socket: a Unix stream socket, mode 0600, that accepts only peers whose uid
//! (SO_PEERCRED) is the server's or root. Each connection runs on its own thread and may
//! send many requests, one line each; a line longer than [`MAX_REQUEST`] ends the
//! connection after an error reply, any other bad request gets an error reply and the
//! connection goes on. At most [`MAX_CONNECTIONS`] connections at once: one more gets an
//! error reply and is closed. A connection idle for [`IDLE`] is closed.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::Shutdown;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::io::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use parking_lot::Mutex;

use super::commands::Control;
use super::protocol::{parse_request, Command, Reply, MAX_REQUEST};

/// Control connections open at once.
pub const MAX_CONNECTIONS: usize = 16;

/// How long a connection may stay silent before it is closed.
pub const IDLE: Duration = Duration::from_secs(300);

/// Progress lines of a long command are sent at most this often.
const PROGRESS_EVERY: Duration = Duration::from_millis(200);

/// The listening control socket and its accepting thread.
pub struct ControlSocket {
    path: PathBuf,
    /// The socket file's (device, inode) as bound: the file is removed at close only if the
    /// path still names it (another server may have replaced a file it found stale).
    file_id: (u64, u64),
    /// The listener's descriptor, owned by the accept thread until it ends: close shuts it
    /// down to wake the thread's `accept`, whatever the path names by then.
    listener_fd: std::os::unix::io::RawFd,
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

struct Shared {
    control: Arc<Control>,
    stop: AtomicBool,
    next_id: AtomicU64,
    /// Open connections, so that closing the socket ends them.
    open: Mutex<HashMap<u64, UnixStream>>,
}

/// The uid, gid and pid of the peer of `stream` (SO_PEERCRED).
pub fn peer_credentials(stream: &UnixStream) -> std::io::Result<libc::ucred> {
    let mut cred = libc::ucred { pid: 0, uid: 0, gid: 0 };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into `cred`, which we own.
    let rc = unsafe {
        libc::getsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(cred)
}

/// Whether a peer of uid `uid` may use the socket: the server's own user or root.
pub fn allowed(uid: libc::uid_t) -> bool {
    // SAFETY: geteuid has no preconditions.
    uid == 0 || uid == unsafe { libc::geteuid() }
}

impl ControlSocket {
    /// Listen on `path` (its directory created if missing). A socket file left by a server
    /// that is gone is replaced; one a running server answers on is an error.
    pub fn bind(path: &Path, control: Arc<Control>) -> anyhow::Result<ControlSocket> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("creating the directory of {}", path.display()))?;
        }
        if path.exists() {
            if UnixStream::connect(path).is_ok() {
                bail!("{}: another server answers on this control socket", path.display());
            }
            std::fs::remove_file(path)
                .with_context(|| format!("removing the stale control socket {}", path.display()))?;
        }
        let listener = UnixListener::bind(path)
            .with_context(|| format!("binding the control socket {}", path.display()))?;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
            .with_context(|| format!("chmod 600 {}", path.display()))?;
        let file_id = file_id(path).with_context(|| format!("stat {}", path.display()))?;
        let listener_fd = listener.as_raw_fd();
        let shared = Arc::new(Shared {
            control,
            stop: AtomicBool::new(false),
            next_id: AtomicU64::new(0),
            open: Mutex::new(HashMap::new()),
        });
        let s = shared.clone();
        let thread = std::thread::Builder::new()
            .name("ember-control".into())
            .spawn(move || accept_loop(listener, s))
            .context("starting the control socket's thread")?;
        Ok(ControlSocket {
            path: path.to_path_buf(),
            file_id,
            listener_fd,
            shared,
            thread: Some(thread),
        })
    }

    /// The socket's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Stop accepting, end every connection, remove the socket file.
    pub fn close(mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        let ours = file_id(&self.path).is_ok_and(|id| id == self.file_id);
        // SAFETY: the descriptor is the listener's, which the accept thread owns and closes
        // only when it ends, after this call (it is joined below); shutting a listening
        // socket down makes its blocked `accept` return.
        unsafe { libc::shutdown(self.listener_fd, libc::SHUT_RDWR) };
        if ours {
            // Also a connection, for a system where the shutdown does not wake `accept`.
            let _ = UnixStream::connect(&self.path);
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        for s in self.shared.open.lock().values() {
            let _ = s.shutdown(Shutdown::Both);
        }
        if ours {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// A file's (device, inode).
fn file_id(path: &Path) -> std::io::Result<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::symlink_metadata(path)?;
    Ok((m.dev(), m.ino()))
}

fn refuse(mut stream: UnixStream, why: &str) {
    let _ = stream.set_write_timeout(Some(Duration::from_secs(1)));
    let _ = stream.write_all(Reply::error(why).to_line().as_bytes());
}

fn accept_loop(listener: UnixListener, shared: Arc<Shared>) {
    for stream in listener.incoming() {
        if shared.stop.load(Ordering::SeqCst) {
            break;
        }
        let Ok(stream) = stream else {
            std::thread::sleep(Duration::from_millis(10));
            continue;
        };
        let cred = match peer_credentials(&stream) {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(error = %e, "control connection without credentials refused");
                continue;
            }
        };
        if !allowed(cred.uid) {
            tracing::warn!(
                uid = cred.uid,
                pid = cred.pid,
                "control connection refused: not the server's user or root"
            );
            refuse(
                stream,
                &format!(
                    "permission denied: uid {} is neither the server's user nor root",
                    cred.uid
                ),
            );
            continue;
        }
        let mut open = shared.open.lock();
        if open.len() >= MAX_CONNECTIONS {
            drop(open);
            tracing::warn!(limit = MAX_CONNECTIONS, "control connection refused: too many");
            refuse(stream, &format!("too many control connections (at most {MAX_CONNECTIONS})"));
            continue;
        }
        let id = shared.next_id.fetch_add(1, Ordering::Relaxed);
        let Ok(handle) = stream.try_clone() else {
            continue;
        };
        open.insert(id, handle);
        drop(open);
        let s = shared.clone();
        let spawned =
            std::thread::Builder::new().name("ember-control-conn".into()).spawn(move || {
                serve_connection(stream, &s);
                s.open.lock().remove(&id);
            });
        if spawned.is_err() {
            shared.open.lock().remove(&id);
        }
    }
}

fn serve_connection(stream: UnixStream, shared: &Shared) {
    let _ = stream.set_read_timeout(Some(IDLE));
    let _ = stream.set_write_timeout(Some(IDLE));
    let Ok(mut writer) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(stream);
    let mut line = Vec::new();
    loop {
        line.clear();
        let limit = MAX_REQUEST as u64 + 1;
        match reader.by_ref().take(limit).read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        let complete = line.last() == Some(&b'\n');
        if complete {
            line.pop();
        } else if line.len() > MAX_REQUEST {
            tracing::warn!(bytes = line.len(), "control request too long");
            let reply = Reply::error(format!("request longer than {MAX_REQUEST} bytes"));
            let _ = writer.write_all(reply.to_line().as_bytes());
            return;
        }
        if line.iter().all(u8::is_ascii_whitespace) {
            if complete {
                continue;
            }
            return;
        }
        let request = match parse_request(&line) {
            Ok(r) => r,
            Err(why) => {
                tracing::warn!(error = %why, "bad control request");
                if writer.write_all(Reply::error(why).to_line().as_bytes()).is_err() {
                    return;
                }
                continue;
            }
        };
        tracing::debug!(cmd = request.command.name(), "control request");
        let mut last = Instant::now();
        let mut progress_out = writer.try_clone().ok();
        let mut progress = |done: u64, total: u64| {
            if last.elapsed() >= PROGRESS_EVERY || done == total {
                last = Instant::now();
                if let Some(w) = progress_out.as_mut() {
                    let _ = w.write_all(Reply::progress(done, total).to_line().as_bytes());
                }
            }
        };
        let reply = match shared.control.handle(&request.command, &mut progress) {
            Ok(v) => Reply::ok(v),
            Err(e) => Reply::error(e),
        };
        let sent = writer.write_all(reply.to_line().as_bytes()).is_ok();
        if request.command == Command::Stop {
            tracing::info!("stop asked on the control socket, shutting down");
            shared.control.stop();
            return;
        }
        if !sent || !complete {
            return;
        }
    }
}
