//! The control socket of a running server, through the protocol `ember ctl` speaks: mode
//! 0600; status, get, set and reload of settings a running server changes; a malformed, an
//! oversized or a surplus request gets an error reply and the server lives on; a peer of
//! another user is refused (SO_PEERCRED); `stop` stops; systemd is told READY, RELOADING,
//! STATUS and STOPPING through a `NOTIFY_SOCKET` the test binds.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "integration-test helpers")]

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixDatagram, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use ember_serve::config::ServeConfig;
use ember_serve::console::Console;
use ember_serve::control::{request, Command, Reply, MAX_CONNECTIONS, MAX_REQUEST};
use ember_serve::ConfigSource;
use ember_serve::{Options, Server};
use serde_json::Value;

const MIB: u64 = 1 << 20;

/// A console that keeps nothing.
struct Quiet;

impl Console for Quiet {
    fn say(&self, _: &str) {}
    fn warn(&self, _: &str) {}
}

/// A config file for a server in `dir` whose control socket is `dir/ctl.sock`.
fn config_text(dir: &Path, max_connections: u64, block_size: u64) -> String {
    let backing = dir.join("disk.img");
    if !backing.exists() {
        std::fs::File::create(&backing).unwrap().set_len(4 * MIB).unwrap();
    }
    format!(
        r#"# the test's server
control = "{ctl}"
workers = 2

[cache]
device = "{cache}"
size = "8MiB"
format-if-needed = true
block-size = {block_size}

[[volume]]
name = "disk"
backing = "{backing}"

[listen]
tcp = "127.0.0.1:0"

[live]
write-policy = "write-through"

[live.limits]
# connections at once
max-connections = {max_connections}
"#,
        ctl = dir.join("ctl.sock").display(),
        cache = dir.join("cache.img").display(),
        backing = backing.display(),
    )
}

fn start(dir: &Path, notify: bool) -> (ember_serve::Running, PathBuf) {
    let file = dir.join("test.toml");
    std::fs::write(&file, config_text(dir, 100, 4096)).unwrap();
    let flags = ServeConfig::new("", vec![]);
    let source = ConfigSource::new(Some(file.clone()), flags, &[]).unwrap();
    let config = source.load().unwrap();
    let options =
        Options { console: Arc::new(Quiet), source: Some(source), notify, ..Options::default() };
    (Server::start_with(config, options).unwrap(), file)
}

fn ask(sock: &Path, command: Command) -> Reply {
    request(sock, command, &mut |_| {}).unwrap()
}

fn ok(sock: &Path, command: Command) -> Value {
    let reply = ask(sock, command.clone());
    assert_eq!(reply.ok, Some(true), "{command:?}: {reply:?}");
    reply.result.unwrap()
}

fn err(sock: &Path, command: Command) -> String {
    let reply = ask(sock, command.clone());
    assert_eq!(reply.ok, Some(false), "{command:?}: {reply:?}");
    reply.error.unwrap()
}

/// One line sent, one reply line read, on an open connection.
fn exchange(reader: &mut BufReader<UnixStream>, line: &[u8]) -> Reply {
    reader.get_mut().write_all(line).unwrap();
    let mut text = String::new();
    reader.read_line(&mut text).unwrap();
    serde_json::from_str(text.trim()).unwrap_or_else(|e| panic!("{e}: {text:?}"))
}

#[test]
fn status_get_set_reload_and_stop() {
    let dir = tempfile::tempdir().unwrap();
    let (running, file) = start(dir.path(), false);
    let sock = dir.path().join("ctl.sock");
    assert_eq!(running.control_socket(), Some(sock.as_path()));
    let mode = std::fs::metadata(&sock).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);

    let status = ok(&sock, Command::Status);
    assert_eq!(status["write_policy"], "write-through");
    assert_eq!(status["volumes"][0]["name"], "disk");
    assert_eq!(status["max_connections"], 100);
    assert_eq!(status["config_file"], file.display().to_string());

    let got = ok(&sock, Command::Get { key: "max-connections".into(), volume: None });
    assert_eq!((got["value"].clone(), got["live"].clone()), (Value::from(100), Value::from(true)));
    let set = ok(
        &sock,
        Command::Set {
            key: "max-connections".into(),
            value: "7".into(),
            save: false,
            volume: None,
        },
    );
    assert_eq!((set["old"].clone(), set["value"].clone()), (Value::from(100), Value::from(7)));
    let got = ok(&sock, Command::Get { key: "live.limits.max-connections".into(), volume: None });
    assert_eq!((got["value"].clone(), got["from"].clone()), (Value::from(7), Value::from("set")));
    assert_eq!(ok(&sock, Command::Status)["max_connections"], 7);

    // A bad value, an unknown key, a setting that needs a restart: refused, nothing changed.
    let e = err(
        &sock,
        Command::Set {
            key: "max-connections".into(),
            value: "many".into(),
            save: false,
            volume: None,
        },
    );
    assert!(e.contains("max-connections"), "{e}");
    let e = err(&sock, Command::Get { key: "colour".into(), volume: None });
    assert!(e.contains("no setting"), "{e}");
    let e = err(
        &sock,
        Command::Set { key: "block-size".into(), value: "8192".into(), save: false, volume: None },
    );
    assert!(e.contains("restart"), "{e}");
    assert_eq!(ok(&sock, Command::Status)["max_connections"], 7);

    // --save rewrites the file, keeping its comments.
    ok(
        &sock,
        Command::Set {
            key: "buffer-budget".into(),
            value: "128MiB".into(),
            save: true,
            volume: None,
        },
    );
    let saved = std::fs::read_to_string(&file).unwrap();
    assert!(saved.contains("# the test's server") && saved.contains("# connections at once"));
    assert!(saved.contains("buffer-budget = "), "{saved}");
    assert_eq!(ok(&sock, Command::Status)["buffer_budget"], 128 * MIB);

    // Reload: the file's value replaces the earlier `set`; a fixed setting needs a restart.
    std::fs::write(&file, config_text(dir.path(), 9, 8192)).unwrap();
    let report = ok(&sock, Command::Reload);
    assert_eq!(
        report["applied"],
        serde_json::json!(["max-connections", "buffer-budget"]),
        "{report}"
    );
    assert_eq!(report["restart"], serde_json::json!(["block-size"]), "{report}");
    let replaced = report["replaced_sets"].as_array().unwrap();
    let mc = replaced.iter().find(|r| r["key"] == "max-connections").expect("max-connections");
    assert_eq!((mc["set"].clone(), mc["file"].clone()), (Value::from(7), Value::from(9)));
    let status = ok(&sock, Command::Status);
    assert_eq!(status["max_connections"], 9);
    assert_eq!(status["cache"]["block_size"], 4096, "a fixed setting keeps its value");
    // A file that does not parse is refused with its line; the server keeps its settings.
    std::fs::write(&file, "[live]\ncolour = 1\n").unwrap();
    let e = err(&sock, Command::Reload);
    assert!(e.contains(":2") && e.contains("colour"), "{e}");
    assert_eq!(ok(&sock, Command::Status)["max_connections"], 9);

    assert_eq!(ok(&sock, Command::Stop)["stopping"], true);
    running.wait().unwrap();
    assert!(!sock.exists(), "the socket file is removed at stop");
}

#[test]
fn bad_requests_get_error_replies_and_the_server_lives_on() {
    let dir = tempfile::tempdir().unwrap();
    let (running, _) = start(dir.path(), false);
    let sock = dir.path().join("ctl.sock");
    let mut conn = BufReader::new(UnixStream::connect(&sock).unwrap());
    for (line, why) in [
        (&b"{\n"[..], "not JSON"),
        (b"\xff\xfe\n", "UTF-8"),
        (b"{\"cmd\":\"status\"}\n", "no version"),
        (b"{\"v\":9,\"cmd\":\"status\"}\n", "version 9"),
        (b"{\"v\":1,\"cmd\":\"format-everything\"}\n", "format-everything"),
    ] {
        let reply = exchange(&mut conn, line);
        assert_eq!(reply.ok, Some(false));
        assert!(reply.error.as_deref().unwrap().contains(why), "{reply:?}");
    }
    // The same connection still works.
    let reply = exchange(&mut conn, b"{\"v\":1,\"cmd\":\"status\"}\n");
    assert_eq!(reply.ok, Some(true), "{reply:?}");
    // An oversized line: an error reply, then the connection ends.
    let mut big = vec![b'x'; MAX_REQUEST + 10];
    big.push(b'\n');
    let _ = conn.get_mut().write_all(&big);
    let mut text = String::new();
    conn.read_line(&mut text).unwrap();
    let reply: Reply = serde_json::from_str(text.trim()).unwrap();
    assert!(reply.error.as_deref().unwrap().contains("longer"), "{reply:?}");
    drop(conn);
    // Connections beyond the bound get an error reply; the open ones keep working. The
    // server counts a connection out on that connection's own thread, so the one just ended
    // may still count for a moment: then the extra one is served (and waits for a request,
    // hence its read timeout) and the round is tried again.
    let t0 = std::time::Instant::now();
    let held = loop {
        let held: Vec<_> =
            (0..MAX_CONNECTIONS).map(|_| UnixStream::connect(&sock).unwrap()).collect();
        let extra = UnixStream::connect(&sock).unwrap();
        extra.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let mut text = String::new();
        match BufReader::new(extra).read_line(&mut text) {
            Ok(_) if text.contains("too many") => break held,
            Ok(_) => panic!("the extra connection: {text:?}"),
            Err(e) => assert!(t0.elapsed() < Duration::from_secs(30), "never refused: {e}"),
        }
    };
    let mut first = BufReader::new(held[0].try_clone().unwrap());
    assert_eq!(exchange(&mut first, b"{\"v\":1,\"cmd\":\"status\"}\n").ok, Some(true));
    drop((held, first));
    // Once the held connections have left, a new one is served.
    let t0 = std::time::Instant::now();
    while request(&sock, Command::Status, &mut |_| {}).ok().and_then(|r| r.ok) != Some(true) {
        assert!(t0.elapsed() < Duration::from_secs(10), "the server never took a connection again");
        std::thread::sleep(Duration::from_millis(20));
    }
    running.shutdown().unwrap();
}

/// With `EMBER_PEER_SOCKET` set (by the test below, in a child process that became
/// `nobody`), connect and print the server's reply; otherwise nothing.
#[test]
fn peer_of_another_user() {
    let Some(sock) = std::env::var_os("EMBER_PEER_SOCKET") else {
        return;
    };
    let mut conn = BufReader::new(UnixStream::connect(sock).unwrap());
    // A refused peer may find the connection closed before it writes; the reply is there.
    let _ = conn.get_mut().write_all(b"{\"v\":1,\"cmd\":\"status\"}\n");
    let mut text = String::new();
    conn.read_line(&mut text).unwrap();
    println!("PEER REPLY {}", text.trim());
}

#[test]
fn a_peer_of_another_user_is_refused() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("*** a_peer_of_another_user_is_refused needs root (to become nobody): skipped");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (running, _) = start(dir.path(), false);
    let sock = dir.path().join("ctl.sock");
    // Open the way so that only SO_PEERCRED stands between nobody and the server.
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&sock, std::fs::Permissions::from_mode(0o666)).unwrap();
    let mut child = std::process::Command::new(std::env::current_exe().unwrap());
    child.args(["--exact", "peer_of_another_user", "--nocapture", "--test-threads=1"]);
    child.env("EMBER_PEER_SOCKET", &sock);
    use std::os::unix::process::CommandExt;
    // SAFETY: setgroups, setgid and setuid are async-signal-safe; nothing else runs in the
    // child before exec.
    unsafe {
        child.pre_exec(|| {
            if libc::setgroups(0, std::ptr::null()) != 0
                || libc::setgid(65534) != 0
                || libc::setuid(65534) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let out = child.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    // The harness prints the test's name on the same line before it.
    let line = stdout
        .split("PEER REPLY ")
        .nth(1)
        .and_then(|rest| rest.lines().next())
        .unwrap_or_else(|| panic!("{stdout}"));
    let reply: Reply = serde_json::from_str(line).unwrap();
    assert_eq!(reply.ok, Some(false));
    assert!(reply.error.as_deref().unwrap().contains("permission denied: uid 65534"), "{line}");
    // The server's own user is still served.
    assert_eq!(ask(&sock, Command::Status).ok, Some(true));
    running.shutdown().unwrap();
}

fn recv(notify: &UnixDatagram) -> String {
    let mut buf = [0u8; 4096];
    let len = notify.recv(&mut buf).expect("a notification within 10 s");
    String::from_utf8_lossy(&buf[..len]).into_owned()
}

/// The next notification that is not the status line's periodic refresh (every 5 s: a slow
/// machine can send one between the others).
fn recv_not_status(notify: &UnixDatagram) -> String {
    loop {
        let n = recv(notify);
        if !n.starts_with("STATUS=") {
            return n;
        }
    }
}

#[test]
fn systemd_is_notified_through_notify_socket() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("notify");
    let notify = UnixDatagram::bind(&path).unwrap();
    notify.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    // Only this test of the binary starts a server that notifies.
    // SAFETY: no other thread of this binary reads NOTIFY_SOCKET.
    unsafe { std::env::set_var("NOTIFY_SOCKET", &path) };
    let (running, _) = start(dir.path(), true);
    let sock = dir.path().join("ctl.sock");
    assert_eq!(recv(&notify), "READY=1");
    let status = recv(&notify);
    assert!(
        status.starts_with("STATUS=hit ratio ") && status.contains("dirty blocks, warmup"),
        "{status}"
    );
    ok(&sock, Command::Reload);
    let reloading = recv_not_status(&notify);
    assert!(reloading.starts_with("RELOADING=1\nMONOTONIC_USEC="), "{reloading}");
    let usec: u64 = reloading.rsplit('=').next().unwrap().parse().unwrap();
    assert!(usec > 0);
    assert_eq!(recv(&notify), "READY=1");
    assert!(recv(&notify).starts_with("STATUS="));
    ok(&sock, Command::Stop);
    assert_eq!(recv_not_status(&notify), "STOPPING=1");
    running.wait().unwrap();
}

/// Cleaning control changes while serving and shows in `status`; a value the cache cannot
/// take is refused with nothing changed.
#[test]
fn cleaning_control_is_set_live_and_shown_in_status() {
    let dir = tempfile::tempdir().unwrap();
    let (running, _file) = start(dir.path(), false);
    let sock = dir.path().join("ctl.sock");
    let cleaning = |sock: &Path| ok(sock, Command::Status)["cleaning"].clone();
    let c = cleaning(&sock);
    assert_eq!((c["flush_rate"].clone(), c["flush_idle_ms"].clone()), (0.into(), 0.into()), "{c}");
    let set = |key: &str, value: &str| Command::Set {
        key: key.into(),
        value: value.into(),
        save: false,
        volume: None,
    };
    ok(&sock, set("flush-rate", "64M"));
    ok(&sock, set("flush-idle", "100"));
    ok(&sock, set("dirty-target", "20%"));
    ok(&sock, set("flush-min-rate", "1M"));
    let c = cleaning(&sock);
    assert_eq!(c["flush_rate"], 64 * MIB, "{c}");
    assert_eq!(c["flush_idle_ms"], 100, "{c}");
    assert_eq!(c["min_rate"], MIB, "{c}");
    let target = c["dirty_target_blocks"].as_u64().unwrap();
    assert!(target > 0, "{c}");
    let got = ok(&sock, Command::Get { key: "live.cleaning.flush-rate".into(), volume: None });
    assert_eq!(got["from"], "set", "{got}");
    // A minimum above the cap, a target above the cache: refused, nothing changed.
    let e = err(&sock, set("flush-min-rate", "128M"));
    assert!(e.contains("above --flush-rate"), "{e}");
    let e = err(&sock, set("dirty-target", "1000000"));
    assert!(e.contains("--dirty-target"), "{e}");
    let now = cleaning(&sock);
    for k in ["flush_rate", "flush_idle_ms", "dirty_target_blocks", "min_rate"] {
        assert_eq!(now[k], c[k], "{k}: {now}");
    }
    assert_eq!(ok(&sock, Command::Stop)["stopping"], true);
    running.wait().unwrap();
}

/// `get --volume` and `set --volume`: a volume's own write policy, sieve, cutoff and their
/// fallback to the cache-wide value, the refusals, the status, `--save` into the volume's
/// table and a reload that changes a volume's table.
#[test]
fn a_volumes_own_settings_are_got_set_saved_and_reloaded() {
    let dir = tempfile::tempdir().unwrap();
    let (running, file) = start(dir.path(), false);
    let sock = dir.path().join("ctl.sock");
    let get = |key: &str| Command::Get { key: key.into(), volume: Some("disk".into()) };
    let set = |key: &str, value: &str, save: bool| Command::Set {
        key: key.into(),
        value: value.into(),
        save,
        volume: Some("disk".into()),
    };
    let got = ok(&sock, get("write-policy"));
    assert_eq!(
        (got["value"].clone(), got["from"].clone()),
        (Value::from("write-through"), Value::from("cache-wide"))
    );
    let r = ok(&sock, set("write-policy", "write-around", false));
    assert_eq!((r["old"].clone(), r["value"].clone()), (Value::Null, Value::from("write-around")));
    let got = ok(&sock, get("write-policy"));
    assert_eq!(
        (got["value"].clone(), got["from"].clone()),
        (Value::from("write-around"), Value::from("volume"))
    );
    let status = ok(&sock, Command::Status);
    assert_eq!(status["volumes"][0]["own_write_policy"], "write-around", "{status}");
    ok(&sock, set("seq-cutoff-read", "1MiB", true));
    ok(&sock, set("admission", "wmna", false));
    let status = ok(&sock, Command::Status);
    assert_eq!(status["volumes"][0]["own_admission"], "wmna", "{status}");
    assert_eq!(status["volumes"][0]["own_seq_cutoff"]["read_bytes"], 1 << 20, "{status}");
    // Refused: a write-back policy of its own, a discrete sieve, a share that would reserve
    // the whole cache, an unknown volume or key.
    let e = err(&sock, set("write-policy", "write-back-flush", false));
    assert!(e.contains("cache's"), "{e}");
    let e = err(&sock, set("admission", "sievestore-d", false));
    assert!(e.contains("discrete"), "{e}");
    let e = err(&sock, set("min-share", "100%", false));
    assert!(e.contains("min shares add up to"), "{e}");
    assert!(ok(&sock, get("min-share"))["value"].is_null(), "nothing changed");
    let e = err(&sock, Command::Get { key: "write-policy".into(), volume: Some("nope".into()) });
    assert!(e.contains("no volume"), "{e}");
    assert!(err(&sock, get("max-dirty")).contains("not a volume's own setting"));
    // Back to the cache-wide value.
    ok(&sock, set("write-policy", "default", false));
    assert_eq!(ok(&sock, get("write-policy"))["from"], "cache-wide");
    // Saved into the volume's table, the comments kept.
    let saved = std::fs::read_to_string(&file).unwrap();
    assert!(saved.contains("# connections at once"), "{saved}");
    let t: toml::Table = saved.parse().unwrap();
    assert_eq!(t["volume"][0]["seq-cutoff"]["read"].as_str(), Some("1MiB"), "{saved}");
    // A reload applies a changed [[volume]] table live.
    let text = saved.replace("name = \"disk\"", "name = \"disk\"\nwrite-policy = \"write-around\"");
    std::fs::write(&file, text).unwrap();
    let r = ok(&sock, Command::Reload);
    assert_eq!(r["applied"], serde_json::json!(["volume.disk"]), "{r}");
    assert_eq!(r["restart"], serde_json::json!([]), "{r}");
    assert_eq!(ok(&sock, get("write-policy"))["value"], "write-around");
    running.shutdown().unwrap();
}

/// A socket file replaced behind the server's back (a second server that found it stale
/// while this one was starting, both after a SIGKILL) neither holds up the stop nor is
/// removed by it: the stop wakes its own listener, and removes the file only if it is still
/// the one it bound.
#[test]
fn a_replaced_socket_file_neither_hangs_the_stop_nor_is_removed() {
    let dir = tempfile::tempdir().unwrap();
    let (running, _) = start(dir.path(), false);
    let sock = dir.path().join("ctl.sock");
    std::fs::remove_file(&sock).unwrap();
    let other = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(running.shutdown().is_ok());
    });
    let stopped = rx.recv_timeout(std::time::Duration::from_secs(20));
    assert_eq!(stopped, Ok(true), "the server stops within 20 s");
    assert!(sock.exists(), "the other listener's socket file is left where it is");
    drop(other);
}
