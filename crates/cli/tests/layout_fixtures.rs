//! Caches written in layout version 1 (`tests/data/layout-v1/`, made by its `make.sh` and kept
//! as that code wrote them) open with this code: never reformatted, never misread. The
//! write-through image's cached blocks are served and kept; the write-back-persist image, left
//! by a SIGKILL with 164 dirty blocks, serves their bytes (newer than its backing's) and writes
//! them back on `ember ctl flush`. A layout change must keep these passing (by upgrading in
//! place) or refuse the images with a clear error, never serve them wrong.

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "integration-test helpers")]

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use ember_testkit::clients::{have_nbdsh, nbdsh};
use ember_testkit::ember::{ember, ember_stdout};
use ember_testkit::nbdkit::Nbdkit;
use ember_testkit::process::run;
use ember_testkit::serve::ServeArgs;
use ember_testkit::tools::skip_or_fail;

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
