//! Real NBD clients run against a server under test: qemu-io, nbdsh, fio's nbd engine, and
//! `sha256sum` to compare what they copied.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::process::{run, MIN};

/// `PATH` with Debian's `/usr/bin` first: nbdsh is a Python program that needs Debian's
/// python, not another one earlier on `PATH`.
pub fn debian_path() -> String {
    format!("/usr/bin:{}", std::env::var("PATH").unwrap_or_default())
}

/// `nbdsh` as a command, with Debian's `PATH`.
pub fn nbdsh() -> Command {
    let mut command = Command::new("nbdsh");
    command.env("PATH", debian_path());
    command
}

/// Whether `/usr/bin/nbdsh` (libnbd-bin) runs here.
pub fn have_nbdsh() -> bool {
    Command::new("/usr/bin/nbdsh")
        .env("PATH", debian_path())
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// `qemu-io -f raw URI -c CMD…` for the `;`-separated commands of `script` (a minute at
/// most); panics unless it succeeds or if a pattern did not verify. Returns what it printed.
pub fn qemu_io(uri: &str, script: &str) -> String {
    let mut c = Command::new("qemu-io");
    c.args(["-f", "raw", uri]);
    for cmd in script.split(';').map(str::trim).filter(|c| !c.is_empty()) {
        c.args(["-c", cmd]);
    }
    let out = run(&mut c, MIN);
    assert!(!out.contains("Pattern verification failed"), "{out}");
    out
}

/// fio's nbd engine on `uri`: random reads and writes of 4 KiB over `size` (`32M`) at
/// `iodepth`, every read verified by crc32c, run in `dir` (at most `timeout`). Its JSON
/// report, checked free of errors, with bytes both read and written.
pub fn fio_randrw_verify(
    dir: &Path,
    uri: &str,
    size: &str,
    iodepth: u32,
    timeout: Duration,
) -> serde_json::Value {
    let out = run(
        Command::new("fio")
            .current_dir(dir)
            .args(["--name=randrw", "--ioengine=nbd", "--rw=randrw", "--bs=4k"])
            .args([format!("--size={size}"), format!("--iodepth={iodepth}")])
            .args(["--verify=crc32c", "--verify_fatal=1", "--output-format=json"])
            // No verify-state file left in the working directory.
            .arg("--verify_state_save=0")
            .arg(format!("--uri={uri}")),
        timeout,
    );
    let json = &out[out.find('{').unwrap_or(0)..];
    let report: serde_json::Value =
        serde_json::from_str(json).unwrap_or_else(|e| panic!("{e}: {out}"));
    let job = &report["jobs"][0];
    assert_eq!(job["error"], 0, "{out}");
    assert!(job["write"]["io_bytes"].as_u64().unwrap_or(0) > 0, "{out}");
    assert!(job["read"]["io_bytes"].as_u64().unwrap_or(0) > 0, "{out}");
    report
}

/// `sha256sum` of a file.
pub fn sha256(path: &Path) -> String {
    let out = run(Command::new("sha256sum").arg(path), MIN);
    out.split_whitespace().next().unwrap_or_default().to_string()
}
