//! Caches written in layout version 1 (`tests/data/layout-v1/`, made by its `make.sh` and kept
//! as that code wrote them) open with this code: never reformatted, never misread. The
//! write-through image's cached blocks are served and kept; the write-back-persist image, left
//! by a SIGKILL with 164 dirty blocks, serves their bytes (newer than its backing's) and writes
//! them back on `ember ctl flush`. The first open upgrades each to layout version 2 in place
//! (docs/reference/layout.md), and SIGKILL trials during that first open find, after a
//! restart, every byte right and the cache at version 1 or 2, never reformatted.
//!
//! `EMBER_UPGRADE_TRIALS=N` sets the trials per image (default 3; `make crash-long` runs 200).

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "integration-test helpers")]

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ember_testkit::clients::{have_nbdsh, nbdsh};
use ember_testkit::ember::{ember, ember_stdout};
use ember_testkit::nbdkit::Nbdkit;
use ember_testkit::process::run;
use ember_testkit::serve::ServeArgs;
use ember_testkit::tools::skip_or_fail;
use ember_testkit::Rng;

/// The tests of one image share the nbdkit socket its backing's identity names, so they run
/// one at a time. The test runner may run them in separate processes (cargo-nextest runs
/// every test in its own), hence a lock on a file, not a mutex: `flock` on a file opened
/// anew excludes other threads and other processes alike, and ends when the file closes.
struct SocketLock(#[allow(dead_code, reason = "held for its lock")] std::fs::File);

impl SocketLock {
    /// Wait until no other test uses `kind`'s socket.
    fn take(kind: &str) -> Self {
        use std::os::fd::AsRawFd;
        let path = format!("/tmp/ember-layout-v1-{kind}.lock");
        let f = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .unwrap_or_else(|e| panic!("{path}: {e}"));
        // SAFETY: flock on a descriptor this File owns; no memory is passed.
        let rc = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) };
        assert_eq!(rc, 0, "flock {path}: {}", std::io::Error::last_os_error());
        SocketLock(f)
    }
}

const BLOCK: usize = 4096;
const BLOCKS: usize = 2048;

/// The fixtures' folder.
fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/layout-v1")
}

/// Block `i` at generation `gen`, as `make.sh` writes it.
fn block(i: usize, gen: usize) -> Vec<u8> {
    let mut b = format!("ember-fixture blk{i:06} gen{gen}\n").into_bytes();
    b.resize(BLOCK, ((i + gen) & 0xff) as u8);
    b
}

/// The generation each block of the volume holds once every write is current.
fn current_gen(kind: &str, i: usize) -> usize {
    match i {
        100..=199 => 2,
        300..=363 if kind == "write-back-persist" => 3,
        _ => 1,
    }
}

/// Decompress `NAME.zst` of the fixtures into `dir/NAME`.
fn unpack(name: &str, dir: &Path) -> PathBuf {
    let src = fixtures().join(format!("{name}.zst"));
    let file = std::fs::File::open(&src).unwrap_or_else(|e| panic!("{}: {e}", src.display()));
    let mut bytes = Vec::new();
    zstd::Decoder::new(file).and_then(|mut d| d.read_to_end(&mut bytes)).unwrap();
    let out = dir.join(name);
    std::fs::write(&out, bytes).unwrap();
    out
}

/// `ember cache inspect --json` of `cache`.
fn inspect(cache: &Path) -> serde_json::Value {
    let text =
        ember_stdout(&["cache", "inspect", "--json", "--cache", &cache.display().to_string()]);
    serde_json::from_str(&text).unwrap()
}

/// Every byte of `uri`'s export, read through nbdsh.
fn read_export(uri: &str, dir: &Path) -> Vec<u8> {
    let out = dir.join("read.bin");
    let script = format!(
        "open({:?}, 'wb').write(h.pread({}, 0))",
        out.display().to_string(),
        BLOCK * BLOCKS
    );
    run(nbdsh().args(["-u", uri, "-c", &script]), Duration::from_secs(120));
    std::fs::read(out).unwrap()
}

/// The blocks of `bytes` that differ from the volume's current content, at most ten.
fn wrong_blocks(kind: &str, bytes: &[u8]) -> Vec<usize> {
    assert_eq!(bytes.len(), BLOCK * BLOCKS);
    (0..BLOCKS)
        .filter(|&i| bytes[i * BLOCK..(i + 1) * BLOCK] != block(i, current_gen(kind, i))[..])
        .take(10)
        .collect()
}

/// `ember ctl --json status` of the server on `sock`.
fn status(sock: &Path) -> serde_json::Value {
    let text = run(
        Command::new(ember()).args(["ctl", "--json", "--control"]).arg(sock).arg("status"),
        Duration::from_secs(60),
    );
    serde_json::from_str(&text).unwrap()
}

/// What serving `kind`'s image showed.
struct Served {
    /// `ember cache inspect` before the start.
    before: serde_json::Value,
    /// `ember cache inspect` after the stop.
    after: serde_json::Value,
    /// `ember ctl status` right after the start, before any request.
    at_start: serde_json::Value,
    /// Every byte read through the server.
    read: Vec<u8>,
    /// The backing file after the stop.
    backing: Vec<u8>,
}

/// Open `kind`'s image with this code, read every block (then `ctl flush` under write-back),
/// stop. The backing is its file behind nbdkit on the socket the image recorded.
fn serve_image(kind: &str) -> Option<Served> {
    if !have_nbdsh() && skip_or_fail("nbdsh (libnbd-bin) is not installed") {
        return None;
    }
    let _one = SocketLock::take(kind);
    let dir = tempfile::tempdir().unwrap();
    let cache = unpack(&format!("{kind}.cache.img"), dir.path());
    let backing = unpack(&format!("{kind}.backing.img"), dir.path());
    let before = inspect(&cache);
    // The socket path is part of the backing's recorded identity (make.sh).
    let nbd_dir = PathBuf::from(format!("/tmp/ember-layout-v1-{kind}"));
    let _ = std::fs::remove_dir_all(&nbd_dir);
    std::fs::create_dir_all(&nbd_dir).unwrap();
    let mut nbdkit = Nbdkit::start(&nbd_dir, &["file", &backing.display().to_string()]);
    let sock = dir.path().join("ctl.sock");
    let serve = ServeArgs::default()
        .args(["--cache", &cache.display().to_string(), "--write-policy", kind])
        .args(["--control", &sock.display().to_string(), "--trust-nbd-backing"])
        .backing("vol", nbdkit.uri())
        // The flusher idles, as when the image was made, so the dirty blocks the image holds
        // are still dirty when the status is read.
        .args(["--min-dirty", "100%", "--max-dirty", "100%"])
        .start();
    let at_start = status(&sock);
    let read = read_export(&serve.uri("vol"), dir.path());
    if kind == "write-back-persist" {
        let mut flush = Command::new(ember());
        run(flush.args(["ctl", "--control"]).arg(&sock).arg("flush"), Duration::from_secs(60));
    }
    serve.stop();
    nbdkit.stop();
    let _ = std::fs::remove_dir_all(&nbd_dir);
    let after = inspect(&cache);
    Some(Served { before, after, at_start, read, backing: std::fs::read(&backing).unwrap() })
}

#[test]
fn a_write_through_cache_of_layout_1_serves_its_cached_blocks_and_keeps_them() {
    let Some(s) = serve_image("write-through") else { return };
    let (before, after) = (&s.before, &s.after);
    assert_eq!(before["version"], 1);
    assert_eq!(before["occupancy"]["resident_blocks"], 512, "{before}");
    // Its cached blocks kept (a backing trusted unchanged), not dropped or reformatted.
    assert_eq!(s.at_start["cache"]["resident_blocks"], 512, "{}", s.at_start);
    assert_eq!(
        wrong_blocks("write-through", &s.read),
        Vec::<usize>::new(),
        "read through the server"
    );
    assert_eq!(wrong_blocks("write-through", &s.backing), Vec::<usize>::new(), "the backing file");
    // The same cache, not a new format: its identity and format time kept, its blocks still
    // resident (and more, from the whole-volume read).
    assert_eq!(after["cache_uuid"], before["cache_uuid"]);
    assert_eq!(after["format_time"], before["format_time"]);
    assert_eq!(after["version"], 2, "upgraded in place: {after}");
    assert_eq!(after["geometry"]["records_len"], 128 << 10, "{after}");
    assert_eq!(after["volumes"][0]["backing"], before_backing(&s.at_start), "{after}");
    let resident = after["occupancy"]["resident_blocks"].as_u64().unwrap_or(0);
    assert!(resident >= 512, "{after}");
}

#[test]
fn a_killed_write_back_persist_cache_of_layout_1_serves_its_dirty_blocks_and_flushes_them() {
    let Some(s) = serve_image("write-back-persist") else { return };
    let (before, after) = (&s.before, &s.after);
    assert_eq!(before["version"], 1);
    assert_eq!(before["clean_shutdown"], false);
    assert_eq!(before["dirty_epochs"], serde_json::json!([[1, 100], [2, 64]]), "{before}");
    assert_eq!(s.at_start["cache"]["dirty_blocks"], 164, "{}", s.at_start);
    let (read, backing) = (&s.read, &s.backing);
    // The 164 dirty blocks exist only in the cache image: the backing file holds generation 1
    // there until the flush, so a misread cache or a reformat shows here.
    assert_eq!(
        wrong_blocks("write-back-persist", read),
        Vec::<usize>::new(),
        "read through the server"
    );
    assert_eq!(
        wrong_blocks("write-back-persist", backing),
        Vec::<usize>::new(),
        "the backing after ctl flush"
    );
    assert_eq!(after["cache_uuid"], before["cache_uuid"]);
    assert_eq!(after["format_time"], before["format_time"]);
    assert_eq!(after["occupancy"]["dirty_blocks"], 0, "{after}");
    assert_eq!(after["version"], 2, "upgraded in place: {after}");
}

/// The backing `ember ctl status` shows for the volume (what the cache device records).
fn before_backing(status: &serde_json::Value) -> serde_json::Value {
    status["volumes"][0]["backing"].clone()
}

/// Trials per image: `EMBER_UPGRADE_TRIALS`, default 3.
fn upgrade_trials() -> u64 {
    std::env::var("EMBER_UPGRADE_TRIALS").ok().and_then(|s| s.parse().ok()).unwrap_or(3)
}

/// The `ember serve` arguments of `kind`'s image in `dir` over the backing at `uri`.
fn serve_args(kind: &str, cache: &Path, uri: &str) -> ServeArgs {
    ServeArgs::default()
        .args(["--cache", &cache.display().to_string(), "--write-policy", kind])
        .args(["--trust-nbd-backing", "--min-dirty", "100%", "--max-dirty", "100%"])
        .backing("vol", uri)
}

/// One trial on a fresh copy of `kind`'s image: `ember serve` killed with SIGKILL `delay`
/// after it was started (during its first open, which upgrades the layout, or after); then
/// a restart must serve every byte as the image's writes left it. Returns the layout version
/// the kill left.
fn upgrade_trial(kind: &str, delay: Duration) -> u64 {
    let dir = tempfile::tempdir().unwrap();
    let cache = unpack(&format!("{kind}.cache.img"), dir.path());
    let backing = unpack(&format!("{kind}.backing.img"), dir.path());
    let nbd_dir = PathBuf::from(format!("/tmp/ember-layout-v1-{kind}"));
    let _ = std::fs::remove_dir_all(&nbd_dir);
    std::fs::create_dir_all(&nbd_dir).unwrap();
    let mut nbdkit = Nbdkit::start(&nbd_dir, &["file", &backing.display().to_string()]);
    let args = serve_args(kind, &cache, &nbdkit.uri()).args(["--listen", "127.0.0.1:0"]);
    let mut child = Command::new(ember())
        .arg("serve")
        .args(args.strs())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(delay);
    let _ = child.kill();
    let _ = child.wait();
    let left = inspect(&cache);
    let version = left["version"].as_u64().unwrap();
    assert!(version == 1 || version == 2, "{left}");
    assert_eq!(left["cache_uuid"], inspect_uuid(kind), "never reformatted");
    let serve = serve_args(kind, &cache, &nbdkit.uri()).start();
    let read = read_export(&serve.uri("vol"), dir.path());
    assert_eq!(
        wrong_blocks(kind, &read),
        Vec::<usize>::new(),
        "killed {delay:?} into the first open (left version {version}):\n{}",
        serve.output()
    );
    serve.stop();
    nbdkit.stop();
    let _ = std::fs::remove_dir_all(&nbd_dir);
    assert_eq!(inspect(&cache)["version"], 2, "the restart upgraded it");
    version
}

/// The cache UUID `kind`'s image was made with.
fn inspect_uuid(kind: &str) -> serde_json::Value {
    let text = std::fs::read_to_string(fixtures().join(format!("{kind}.inspect.json"))).unwrap();
    serde_json::from_str::<serde_json::Value>(&text).unwrap()["cache_uuid"].clone()
}

/// SIGKILL trials during the first open of copies of `kind`'s image: the kill lands at a
/// random time up to a little past the time a first open took to become ready.
fn upgrade_survives_sigkill(kind: &str, seed: u64) {
    if !have_nbdsh() && skip_or_fail("nbdsh (libnbd-bin) is not installed") {
        return;
    }
    let _one = SocketLock::take(kind);
    // How long a first open takes, on a copy that is not killed.
    let t0 = Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let cache = unpack(&format!("{kind}.cache.img"), dir.path());
    let backing = unpack(&format!("{kind}.backing.img"), dir.path());
    let nbd_dir = PathBuf::from(format!("/tmp/ember-layout-v1-{kind}"));
    let _ = std::fs::remove_dir_all(&nbd_dir);
    std::fs::create_dir_all(&nbd_dir).unwrap();
    let mut nbdkit = Nbdkit::start(&nbd_dir, &["file", &backing.display().to_string()]);
    let t1 = Instant::now();
    let serve = serve_args(kind, &cache, &nbdkit.uri()).start();
    let open = t1.elapsed();
    serve.stop();
    nbdkit.stop();
    let _ = std::fs::remove_dir_all(&nbd_dir);
    let mut r = Rng::new(seed);
    let span = open.as_micros() as u64 * 5 / 4 + 1;
    let (mut v1, mut v2) = (0, 0);
    let n = upgrade_trials();
    for _ in 0..n {
        match upgrade_trial(kind, Duration::from_micros(r.below(span))) {
            1 => v1 += 1,
            _ => v2 += 1,
        }
    }
    println!(
        "{kind}: {n} SIGKILL trials within {span} us of the start (a first open took {open:?}; \
         {:?} in all): {v1} left version 1, {v2} version 2; every byte right after each restart",
        t0.elapsed()
    );
}

#[test]
fn sigkill_during_the_upgrade_of_a_write_through_cache_loses_nothing() {
    upgrade_survives_sigkill("write-through", 40_300_000);
}

#[test]
fn sigkill_during_the_upgrade_of_a_killed_write_back_persist_cache_loses_nothing() {
    upgrade_survives_sigkill("write-back-persist", 40_400_000);
}

#[test]
fn the_fixtures_backings_are_older_than_their_caches() {
    // Guards the fixtures themselves: the write-back-persist backing must not hold the dirty
    // blocks' bytes, or the test above would pass on a cache that lost them.
    let dir = tempfile::tempdir().unwrap();
    let backing = std::fs::read(unpack("write-back-persist.backing.img", dir.path())).unwrap();
    for i in [100, 199, 300, 363] {
        assert_eq!(backing[i * BLOCK..(i + 1) * BLOCK], block(i, 1)[..], "block {i}");
    }
}
