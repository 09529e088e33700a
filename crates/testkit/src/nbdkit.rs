//! nbdkit run as a daemon on a Unix socket, stopped by the pid in its pidfile.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::process::{alive, run_status, signal};

/// A running nbdkit; stopped on drop.
pub struct Nbdkit {
    pid: Option<u32>,
    /// The socket.
    pub socket: PathBuf,
}

impl Nbdkit {
    /// `nbdkit -P PIDFILE -U SOCKET ARGS…` in `dir`; returns when the pidfile holds a pid.
    pub fn start(dir: &Path, args: &[&str]) -> Nbdkit {
        let socket = dir.join("nbdkit.sock");
        let pidfile = dir.join("nbdkit.pid");
        let out = run_status(
            Command::new("nbdkit").arg("-P").arg(&pidfile).arg("-U").arg(&socket).args(args),
            Duration::from_secs(30),
        );
        assert!(out.status.success(), "nbdkit failed: {}\n{}", out.stdout, out.stderr);
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let pid = std::fs::read_to_string(&pidfile).ok().and_then(|s| s.trim().parse().ok());
            if let Some(pid) = pid {
                if socket.exists() {
                    return Nbdkit { pid: Some(pid), socket };
                }
            }
            assert!(Instant::now() < deadline, "nbdkit wrote no pidfile");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// `nbd+unix:///?socket=…`.
    pub fn uri(&self) -> String {
        format!("nbd+unix:///?socket={}", self.socket.display())
    }

    /// SIGTERM, wait until the process is gone (SIGKILL after 10 s).
    pub fn stop(&mut self) {
        let Some(pid) = self.pid.take() else { return };
        signal(pid, libc::SIGTERM);
        let deadline = Instant::now() + Duration::from_secs(10);
        while alive(pid) {
            if Instant::now() > deadline {
                signal(pid, libc::SIGKILL);
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Nbdkit {
    fn drop(&mut self) {
        self.stop();
    }
}
