//! NBD_CMD_CACHE through `ember serve` with a real client: nbdsh (libnbd) sees
//! NBD_FLAG_SEND_CACHE, a CACHE longer than `--max-payload` succeeds (its reply comes before
//! the load ends), the `cache_loads` counter grows by the blocks loaded (not the hits or
//! misses), and a READ of the range once loaded hits every block; a CACHE of a range already
//! cached loads nothing, and a write after the load is read back, not the loaded bytes.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "integration-test helpers")]

mod serve_support;

use serve_support::*;

#[test]
fn nbdsh_cache_loads_the_range_and_a_later_read_hits() {
    if !have_nbdsh() && skip_or_fail("nbdsh (libnbd-bin) is not installed") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let backing = dir.path().join("disk.img");
    patterned_backing(&backing, 4 << 20, 3);
    let cache = dir.path().join("cache.img");
    let spec = format!("disk={}", backing.display());
    let serve = Serve::start(&[
        "--cache",
        cache.to_str().unwrap(),
        "--cache-size",
        "8M",
        "--format-if-needed",
        "--max-payload",
        "64K",
        "--backing",
        &spec,
    ]);
    let uri = serve.uri("disk");
    // 1 MiB at 1 MiB: 256 blocks in one CACHE, sixteen times the maximum payload; then
    // again (nothing to load). The replies come before the loads end: wait for the counter.
    let script = "assert h.can_cache()\n\
                  h.cache(1 << 20, 1 << 20)\n\
                  h.cache(1 << 20, 1 << 20)\n";
    run(nbdsh().args(["-u", &uri, "-c", script]), MIN);
    let loads = || metric(&scrape(&serve.metrics), "ember_cache_cache_loads_total") as u64;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while loads() < 256 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // A read of the range (in reads of the maximum payload), a write inside it, a third
    // CACHE and a read of the written block.
    let script = "before = b''.join(h.pread(65536, (1 << 20) + i * 65536) for i in range(16))\n\
                  h.pwrite(b'\\x5a' * 4096, (1 << 20) + 8192)\n\
                  h.cache(1 << 20, 1 << 20)\n\
                  got = h.pread(4096, (1 << 20) + 8192)\n\
                  assert got == b'\\x5a' * 4096, 'the write is read back'\n\
                  print(len(before))\n";
    let out = run(nbdsh().args(["-u", &uri, "-c", script]), MIN);
    assert_eq!(out.trim(), "1048576", "{out}");
    let s = scrape(&serve.metrics);
    let loads = metric(&s, "ember_cache_cache_loads_total") as u64;
    let hits = metric(&s, "ember_cache_read_hits_total") as u64;
    let misses = metric(&s, "ember_cache_read_misses_total") as u64;
    serve.stop();
    assert_eq!(loads, 256, "the first CACHE loads the 256 blocks, the others nothing");
    assert_eq!((hits, misses), (257, 0), "every read after the load hits");
}
