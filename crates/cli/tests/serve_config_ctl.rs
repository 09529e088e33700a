//! `ember serve --config` and `ember ctl` as a user runs them, through the built binary and
//! real clients: the commented example `examples/ember.toml` (its paths pointed at a
//! scratch directory) starts a server; `--print-config` and `--check`; errors naming the
//! file, the line and the key; nbdcopy writes under write-back-persist, `ember ctl` shows
//! and changes the server, `reload` after an edit, a restart, and every byte is intact.
//! `ember ctl flush` and `ember ctl set write-policy` while qemu-io reads have their own
//! test, which needs the engine's live flush and write-policy switch.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "integration-test helpers")]

mod serve_support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serve_support::*;

const SIZE: u64 = 8 << 20;

/// The example config file with its paths in `dir`, a port picked at start, and the
/// control socket `dir/ctl.sock`; written to `dir/web.toml`.
fn example_in(dir: &Path) -> PathBuf {
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/ember.toml");
    let text = std::fs::read_to_string(example).unwrap();
    let d = dir.display().to_string();
    let text = text
        .replace("/var/lib/ember", &d)
        .replace("size = \"4GiB\"", "size = \"64MiB\"")
        .replace("tcp = \"127.0.0.1:10809\"", "tcp = \"127.0.0.1:0\"")
        .replace("# control = \"/run/ember/web.sock\"", &format!("control = \"{d}/ctl.sock\""));
    assert!(text.contains(&format!("control = \"{d}/ctl.sock\"")), "the example changed: {text}");
    sparse_file(&dir.join("web.img"), SIZE);
    let file = dir.join("web.toml");
    std::fs::write(&file, text).unwrap();
    file
}

/// `ember ctl --control DIR/ctl.sock ARGS`: its stdout; panics unless it succeeds.
fn ctl(dir: &Path, args: &[&str]) -> String {
    let sock = dir.join("ctl.sock");
    run(
        Command::new(ember()).arg("ctl").arg("--control").arg(&sock).args(args),
        Duration::from_secs(120),
    )
}

fn ctl_json(dir: &Path, args: &[&str]) -> serde_json::Value {
    let mut all = vec!["--json"];
    all.extend(args);
    serde_json::from_str(&ctl(dir, &all)).unwrap()
}

/// Random non-zero bytes (nbdcopy skips zeros).
fn data_file(path: &Path, seed: u64) -> Vec<u8> {
    let mut rng = Rng::new(seed);
    let data: Vec<u8> = (0..SIZE).map(|_| rng.next_u64() as u8 | 1).collect();
    std::fs::write(path, &data).unwrap();
    data
}

fn read_back(serve: &Serve, dir: &Path) -> Vec<u8> {
    let out = dir.join("out.img");
    let _ = std::fs::remove_file(&out);
    run(Command::new("nbdcopy").arg(serve.uri("web")).arg(&out), Duration::from_secs(120));
    std::fs::read(&out).unwrap()
}

fn tools() -> bool {
    let have = |t: &str| Command::new(t).arg("--version").output().is_ok();
    if have("nbdcopy") && have("qemu-io") {
        return true;
    }
    !skip_or_fail("nbdcopy and qemu-io are needed")
}

#[test]
fn print_config_check_and_errors_naming_file_line_and_key() {
    let dir = tempfile::tempdir().unwrap();
    let file = example_in(dir.path());
    let f = file.to_str().unwrap();
    // --check: the file as it is, then a flag over it.
    let out = run(
        Command::new(ember()).args(["serve", "--config", f, "--check"]),
        Duration::from_secs(60),
    );
    assert!(out.contains(": ok"), "{out}");
    // --print-config: the file with the flags over it, as TOML that starts a server alike.
    let printed = run(
        Command::new(ember()).args([
            "serve",
            "--config",
            f,
            "--write-policy",
            "write-through",
            "--print-config",
        ]),
        Duration::from_secs(60),
    );
    assert!(printed.contains("write-policy = \"write-through\""), "{printed}");
    assert!(printed.contains("[[volume]]") && printed.contains("name = \"web\""), "{printed}");
    let again = dir.path().join("printed.toml");
    std::fs::write(&again, &printed).unwrap();
    let reprinted = run(
        Command::new(ember()).args([
            "serve",
            "--config",
            again.to_str().unwrap(),
            "--print-config",
        ]),
        Duration::from_secs(60),
    );
    assert_eq!(reprinted, printed);
    // A command line alone prints as a file too.
    let flags = run(
        Command::new(ember()).args([
            "serve",
            "--cache",
            "mem:64MiB",
            "--backing",
            "v=/dev/null",
            "--print-config",
        ]),
        Duration::from_secs(60),
    );
    assert!(flags.contains("device = \"mem:64MiB\""), "{flags}");

    let text = std::fs::read_to_string(&file).unwrap();
    let fails = |body: &str| {
        std::fs::write(&file, body).unwrap();
        let o = run_status(
            Command::new(ember()).args(["serve", "--config", f, "--check"]),
            Duration::from_secs(60),
        );
        assert!(!o.status.success(), "{body}");
        o.stderr
    };
    let line = |needle: &str| text.lines().position(|l| l.starts_with(needle)).unwrap() + 1;
    let e = fails(&text.replace("policy = \"lru\"", "colour = \"lru\""));
    assert!(e.contains(&format!("{f}:{}: key live.colour", line("policy = \"lru\""))), "{e}");
    let e = fails(&text.replace("buffer-budget = \"256MiB\"", "buffer-budget = \"lots\""));
    assert!(
        e.contains(&format!("{f}:{}: key live.limits.buffer-budget", line("buffer-budget"))),
        "{e}"
    );
    let e = fails(&text.replace("\"write-back-persist\"", "\"write-sideways\""));
    assert!(e.contains(&format!("{f}:{}: key live.write-policy", line("write-policy"))), "{e}");
    let missing = dir.path().join("missing.toml");
    let o = run_status(
        Command::new(ember()).args(["serve", "--config", missing.to_str().unwrap(), "--check"]),
        Duration::from_secs(60),
    );
    assert!(!o.status.success() && o.stderr.contains(missing.to_str().unwrap()), "{}", o.stderr);
}

#[test]
fn the_example_serves_reloads_and_restarts_with_every_byte_intact() {
    if !tools() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let file = example_in(dir.path());
    let f = file.to_str().unwrap();
    let serve =
        Serve::start_exact(&["--config", f, "--metrics", "127.0.0.1:0", "--log-format", "json"]);
    assert!(serve.output().contains(&format!("control {}", dir.path().join("ctl.sock").display())));
    let data = data_file(&dir.path().join("data.img"), 39);
    run(
        Command::new("nbdcopy").arg(dir.path().join("data.img")).arg(serve.uri("web")),
        Duration::from_secs(120),
    );

    // status: a table, and the JSON behind it.
    let table = ctl(dir.path(), &["status"]);
    assert!(table.contains("write policy write-back-persist"), "{table}");
    assert!(table.contains("VOLUME") && table.lines().any(|l| l.starts_with("web ")), "{table}");
    let status = ctl_json(dir.path(), &["status"]);
    assert_eq!(status["name"], "web");
    assert!(status["cache"]["dirty_blocks"].as_u64().unwrap() > 0, "{status}");
    assert_eq!(ctl(dir.path(), &["get", "max-connections"]), "max-connections = 128\n");

    // A `set` lasts until the file replaces it at a reload.
    let set = ctl(dir.path(), &["set", "max-connections", "32"]);
    assert_eq!(set, "max-connections: 128 -> 32\n");
    let text = std::fs::read_to_string(&file).unwrap();
    std::fs::write(
        &file,
        text.replace("max-connections = 128", "max-connections = 64")
            .replace("block-size = \"4KiB\"", "block-size = \"8KiB\""),
    )
    .unwrap();
    let reload = ctl(dir.path(), &["reload"]);
    assert!(reload.contains("applied: max-connections"), "{reload}");
    assert!(reload.contains("needs a restart: block-size"), "{reload}");
    assert!(reload.contains("the file replaced `set max-connections 32` with 64"), "{reload}");
    assert_eq!(ctl(dir.path(), &["get", "max-connections"]), "max-connections = 64\n");
    // SIGHUP reloads too.
    std::fs::write(&file, text.replace("max-connections = 128", "max-connections = 48")).unwrap();
    signal(serve.pid(), libc::SIGHUP);
    let t = std::time::Instant::now();
    while ctl(dir.path(), &["get", "max-connections"]) != "max-connections = 48\n" {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "SIGHUP did not reload:\n{}",
            serve.output()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // --save writes the file, keeping its comments.
    let saved = ctl(dir.path(), &["set", "--save", "buffer-budget", "128MiB"]);
    assert!(saved.ends_with("(saved)\n"), "{saved}");
    let budget = ctl(dir.path(), &["get", "buffer-budget"]);
    assert!(!budget.contains("256MiB"), "{budget}");
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(
        !text.contains("buffer-budget = \"256MiB\"") && text.contains("# ascending (block order"),
        "{text}"
    );

    assert_eq!(read_back(&serve, dir.path()), data);
    let log = serve.stop();
    // Events are one JSON object a line on stderr.
    let event =
        log.lines().find(|l| l.contains("\"setting changed\"")).unwrap_or_else(|| panic!("{log}"));
    let event: serde_json::Value = serde_json::from_str(event).unwrap();
    assert_eq!(
        (event["level"].clone(), event["key"].clone()),
        ("INFO".into(), "max-connections".into())
    );

    // A restart from the file: every byte written is there.
    let serve = Serve::start_exact(&["--config", f, "--metrics", "127.0.0.1:0"]);
    assert_eq!(read_back(&serve, dir.path()), data);
    assert_eq!(ctl(dir.path(), &["get", "buffer-budget"]), budget);
    // `ember ctl stop` stops it as SIGTERM does.
    assert_eq!(ctl(dir.path(), &["stop"]), "stopping\n");
    let t = std::time::Instant::now();
    while !serve.output().contains("clean shutdown") {
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "ctl stop did not stop:\n{}",
            serve.output()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(!dir.path().join("ctl.sock").exists(), "the control socket is removed at stop");
    let _ = serve.kill();
    // An error reply is an error.
    let o = run_status(
        Command::new(ember())
            .args(["ctl", "--control"])
            .arg(dir.path().join("ctl.sock"))
            .arg("status"),
        Duration::from_secs(30),
    );
    assert!(!o.status.success() && o.stderr.contains("is the server running?"), "{}", o.stderr);
}

/// Needs the engine's live flush and write-policy switch: `ember ctl flush` leaves no dirty
/// block and the backing file holds every byte; `set write-policy write-through` while
/// qemu-io reads succeeds and no read fails.
#[test]
fn flush_and_switch_to_write_through_while_qemu_io_reads() {
    if !tools() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let file = example_in(dir.path());
    let serve =
        Serve::start_exact(&["--config", file.to_str().unwrap(), "--metrics", "127.0.0.1:0"]);
    let data = data_file(&dir.path().join("data.img"), 40);
    run(
        Command::new("nbdcopy").arg(dir.path().join("data.img")).arg(serve.uri("web")),
        Duration::from_secs(120),
    );
    assert!(ctl_json(dir.path(), &["status"])["cache"]["dirty_blocks"].as_u64().unwrap() > 0);

    let flushed = ctl(dir.path(), &["flush"]);
    assert!(flushed.starts_with("flushed ") && flushed.contains(" blocks in "), "{flushed}");
    assert_eq!(ctl_json(dir.path(), &["status"])["cache"]["dirty_blocks"], 0);
    assert_eq!(
        std::fs::read(dir.path().join("web.img")).unwrap(),
        data,
        "flush left the backing behind"
    );

    // Dirty again, then switch while qemu-io reads the whole volume over and over.
    run(
        Command::new("nbdcopy").arg(dir.path().join("data.img")).arg(serve.uri("web")),
        Duration::from_secs(120),
    );
    let uri = serve.uri("web");
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let reader = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut reads = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) || reads == 0 {
                run(
                    Command::new("qemu-io").args([
                        "-f",
                        "raw",
                        "-r",
                        &uri,
                        "-c",
                        &format!("read 0 {SIZE}"),
                    ]),
                    Duration::from_secs(60),
                );
                reads += 1;
            }
            reads
        })
    };
    let switched = ctl(dir.path(), &["set", "write-policy", "write-through"]);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    assert!(reader.join().unwrap() > 0);
    assert_eq!(switched, "write-policy: write-back-persist -> write-through\n");
    let status = ctl_json(dir.path(), &["status"]);
    assert_eq!(
        (status["write_policy"].clone(), status["cache"]["dirty_blocks"].clone()),
        ("write-through".into(), 0.into())
    );
    assert_eq!(std::fs::read(dir.path().join("web.img")).unwrap(), data);
    serve.stop();
}
