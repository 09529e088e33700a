//! Replays the stored fuzz corpora of the NBD targets (`fuzz/corpus/nbd_*`, docs/design/testing.md)
//! through the same entry points the AFL++ targets use. Any panic, in any thread, aborts the
//! test binary with the name of the input. Files named `seed-*` are valid sessions recorded
//! from real peers and must also succeed.
//!
//! `cargo test --release -p ember-nbd --test fuzz_corpus -- --ignored write_seeds` re-records
//! the seeds (with nbdkit, nbdinfo, nbdsh and qemu-io when installed).
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "integration-test helpers")]

use std::io::{Read, Write};
use std::net::Shutdown;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ember_nbd::fuzz_entry::{self, HandshakeOutcome};
use ember_testkit::{fuzz_corpus as corpus, fuzz_inputs as inputs};

static CURRENT: Mutex<String> = Mutex::new(String::new());

/// A panic anywhere (a server or client thread included) ends the process, naming the input.
fn abort_on_panic() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let current = CURRENT.lock().map(|c| c.clone()).unwrap_or_default();
            eprintln!("fuzz corpus input {current} panicked");
            default(info);
            std::process::abort();
        }));
    });
}

fn replay<T>(target: &str, mut run: impl FnMut(&str, &[u8]) -> T) -> usize {
    abort_on_panic();
    let inputs = inputs(target);
    for (name, data) in &inputs {
        *CURRENT.lock().unwrap() = format!("{target}/{name}");
        run(name, data);
    }
    inputs.len()
}

const GREETING_LEN: usize = 18;

#[test]
fn nbd_handshake_corpus() {
    let mut negotiated = 0;
    let n = replay("nbd_handshake", |name, data| {
        let (outcome, sent) = fuzz_entry::server_handshake(data);
        // The server always greets first: NBDMAGIC, IHAVEOPT, its handshake flags.
        assert!(sent.len() >= GREETING_LEN, "{name}: no greeting");
        assert_eq!(&sent[..8], b"NBDMAGIC", "{name}");
        assert_eq!(&sent[8..16], b"IHAVEOPT", "{name}");
        if name.starts_with("seed-") && !name.contains("list") {
            assert!(matches!(outcome, HandshakeOutcome::Negotiated { .. }), "{name}: {outcome:?}");
        }
        negotiated += usize::from(matches!(outcome, HandshakeOutcome::Negotiated { .. }));
    });
    assert!(negotiated > 0, "no input of {n} negotiated an export");
}

#[test]
fn nbd_server_corpus() {
    replay("nbd_server", |name, data| {
        let answer = fuzz_entry::server_session(data);
        assert!(answer.len() >= GREETING_LEN, "{name}: no greeting");
        assert_eq!(&answer[..8], b"NBDMAGIC", "{name}");
        if name.starts_with("seed-") && !name.contains("list") {
            // A whole recorded session: the export was negotiated and requests answered
            // (a simple reply or a structured chunk magic after the handshake).
            let simple = 0x6744_6698u32.to_be_bytes();
            let chunk = 0x668e_33efu32.to_be_bytes();
            let replies = answer.windows(4).filter(|w| *w == simple || *w == chunk).count();
            assert!(replies > 0, "{name}: no request was answered");
        }
    });
}

#[test]
fn nbd_client_corpus() {
    replay("nbd_client", |name, data| {
        let seed = name.starts_with("seed-");
        let outcome = if seed {
            fuzz_entry::client_session_waiting(data, std::time::Duration::from_secs(2))
        } else {
            fuzz_entry::client_session(data)
        };
        if seed {
            // A recorded server answer to the client's script: every request succeeds.
            assert!(outcome.connected, "{name}: {outcome:?}");
            assert_eq!(outcome.ok, fuzz_entry::CLIENT_SCRIPT.len(), "{name}: {outcome:?}");
            assert_eq!(outcome.failed, 0, "{name}: {outcome:?}");
        }
    });
}

// ---- seed recording ----

/// A one-connection proxy from `front` to `upstream` recording both directions.
struct Recorder {
    front: PathBuf,
    to_server: Arc<Mutex<Vec<u8>>>,
    to_client: Arc<Mutex<Vec<u8>>>,
    thread: std::thread::JoinHandle<()>,
}

fn pump(mut from: UnixStream, mut to: UnixStream, log: Arc<Mutex<Vec<u8>>>) {
    let mut buf = [0u8; 65536];
    loop {
        match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                log.lock().unwrap().extend_from_slice(&buf[..n]);
                if to.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
        }
    }
    let _ = to.shutdown(Shutdown::Write);
}

fn record(dir: &Path, upstream: &Path, tag: &str) -> Recorder {
    let front = dir.join(format!("front-{tag}.sock"));
    let listener = UnixListener::bind(&front).expect("bind the recorder");
    let to_server = Arc::new(Mutex::new(Vec::new()));
    let to_client = Arc::new(Mutex::new(Vec::new()));
    let (ts, tc) = (Arc::clone(&to_server), Arc::clone(&to_client));
    let upstream = upstream.to_path_buf();
    let thread = std::thread::spawn(move || {
        let (client, _) = listener.accept().expect("accept");
        let server = UnixStream::connect(&upstream).expect("connect upstream");
        let a = {
            let (c, s) = (client.try_clone().unwrap(), server.try_clone().unwrap());
            std::thread::spawn(move || pump(c, s, ts))
        };
        pump(server, client, tc);
        let _ = a.join();
    });
    Recorder { front, to_server, to_client, thread }
}

impl Recorder {
    fn finish(self) -> (Vec<u8>, Vec<u8>) {
        self.thread.join().expect("recorder");
        let s = std::mem::take(&mut *self.to_server.lock().unwrap());
        let c = std::mem::take(&mut *self.to_client.lock().unwrap());
        (s, c)
    }
}

fn wait_for(path: &Path) {
    let start = Instant::now();
    while !path.exists() {
        assert!(start.elapsed() < Duration::from_secs(10), "{} never appeared", path.display());
        std::thread::sleep(Duration::from_millis(20));
    }
}

struct Kill(Child);
impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Whether `tool --version` runs (nbdsh also needs its Python module).
fn installed(tool: &str) -> bool {
    Command::new(tool)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn save(target: &str, name: &str, bytes: &[u8]) {
    let dir = corpus(target);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(name), bytes).unwrap();
    println!("{target}/{name}: {} bytes", bytes.len());
}

/// Run ember's client script through a recorder in front of `upstream`.
fn record_ember_client(dir: &Path, upstream: &Path, tag: &str) -> (Vec<u8>, Vec<u8>) {
    let rec = record(dir, upstream, tag);
    let client = ember_nbd::ClientBuilder::new()
        .export(fuzz_entry::EXPORT_NAME)
        .connect_unix(&rec.front)
        .expect("connect through the recorder");
    let (ok, failed) = fuzz_entry::run_client_script(&client);
    assert_eq!((ok, failed), (fuzz_entry::CLIENT_SCRIPT.len(), 0), "{tag}");
    drop(client);
    rec.finish()
}

#[test]
#[ignore = "re-records the seed corpora; run by hand"]
fn write_seeds() {
    let dir = tempfile::tempdir().unwrap();
    // ember's own server, serving the fuzzing export.
    let export = Arc::new(ember_nbd::MemExport::new(fuzz_entry::EXPORT_SIZE));
    let exports =
        ember_nbd::ExportMap::new().with(fuzz_entry::EXPORT_NAME, "fuzzing export", export);
    let server = ember_testkit::nbd::serve_with(exports, Default::default());
    let ember_sock = server.unix.clone();

    let (to_server, to_client) = record_ember_client(dir.path(), &ember_sock, "ember");
    save("nbd_server", "seed-ember-client", &to_server);
    save("nbd_handshake", "seed-ember-client", &to_server);
    save("nbd_client", "seed-ember-server", &to_client);

    if installed("nbdkit") {
        for (tag, extra) in [("nbdkit-sr", vec![]), ("nbdkit-simple", vec!["--no-sr"])] {
            let sock = dir.path().join(format!("{tag}.sock"));
            let mut args = vec!["-f", "-U"];
            let sock_str = sock.to_str().unwrap().to_string();
            args.push(&sock_str);
            args.extend(extra.iter().copied());
            args.extend(["memory", "1M"]);
            let _nbdkit = Kill(Command::new("nbdkit").args(&args).spawn().unwrap());
            wait_for(&sock);
            let (_, to_client) = record_ember_client(dir.path(), &sock, tag);
            save("nbd_client", &format!("seed-{tag}"), &to_client);
        }
    }

    // Real clients against ember's server.
    let uri = |front: &Path| {
        format!("nbd+unix:///{}?socket={}", fuzz_entry::EXPORT_NAME, front.display())
    };
    let mut clients: Vec<(&str, Vec<String>)> = Vec::new();
    if installed("nbdinfo") {
        clients.push(("nbdinfo", vec!["nbdinfo".into(), "URI".into()]));
        clients.push(("nbdinfo-list", vec!["nbdinfo".into(), "--list".into(), "URI".into()]));
    }
    if installed("nbdsh") {
        clients.push((
            "nbdsh",
            vec![
                "nbdsh".into(),
                "-u".into(),
                "URI".into(),
                "-c".into(),
                "h.pwrite(b'x'*4096, 8192); h.flush(); h.trim(4096, 0); \
                 h.zero(4096, 12288); print(len(h.pread(16384, 0)))"
                    .into(),
            ],
        ));
    }
    if installed("qemu-io") {
        clients.push((
            "qemu-io",
            vec![
                "qemu-io".into(),
                "-f".into(),
                "raw".into(),
                "-c".into(),
                "write -P 0x5a 0 4k".into(),
                "-c".into(),
                "read -P 0x5a 0 4k".into(),
                "-c".into(),
                "flush".into(),
                "URI".into(),
            ],
        ));
    }
    for (tag, argv) in clients {
        let rec = record(dir.path(), &ember_sock, tag);
        let argv: Vec<String> =
            argv.into_iter().map(|a| if a == "URI" { uri(&rec.front) } else { a }).collect();
        let status = Command::new(&argv[0]).args(&argv[1..]).stdout(Stdio::null()).status();
        assert!(status.is_ok_and(|s| s.success()), "{tag} failed");
        let (to_server, _) = rec.finish();
        save("nbd_server", &format!("seed-{tag}"), &to_server);
        save("nbd_handshake", &format!("seed-{tag}"), &to_server);
    }
}
