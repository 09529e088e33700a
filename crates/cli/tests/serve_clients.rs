//! Real NBD clients against the built `ember serve` (a file cache over file backings):
//! qemu-io patterns, qemu-img convert + compare, nbdcopy 256 MiB in and out with checksums,
//! nbdinfo flags and export list, fio's nbd engine with crc32c verification. Write-through
//! means the backing file itself must hold what was written once the server stops.

mod serve_support;

use std::process::Command;
use std::time::Duration;

use serve_support::*;

#[test]
fn qemu_io_patterns_reach_the_backing_file() {
    let dir = tempfile::tempdir().unwrap();
    let (cache, backing) = (dir.path().join("cache.img"), dir.path().join("disk.img"));
    sparse_file(&backing, 16 << 20);
    let serve = ServeArgs::file_cache(&cache, "8M").backing("disk", backing.display()).start();
    let uri = serve.uri("disk");
    let out = qemu_io(
        &uri,
        "write -P 0xab 0 1M; read -P 0xab 0 1M; write -P 0x11 1000 3000; flush; \
         write -z 2M 64k; read -P 0x11 1000 3000; read -P 0 2M 64k; read -P 0xab 4000 4096; \
         read -P 0xab 1000000 48576",
    );
    assert!(out.contains("read 1048576/1048576 bytes at offset 0"), "{out}");
    assert!(out.contains("read 65536/65536 bytes at offset 2097152"), "{out}");
    // Read again: now from the cache (the first 1 MiB was allocated by the writes).
    qemu_io(&uri, "read -P 0xab 8192 1040384");
    let samples = scrape(&serve.metrics);
    assert!(metric(&samples, "ember_cache_read_hits_total") > 0.0);
    let log = serve.stop();
    let bytes = std::fs::read(&backing).unwrap();
    assert!(bytes[..1000].iter().all(|&b| b == 0xab), "{log}");
    assert!(bytes[1000..4000].iter().all(|&b| b == 0x11));
    assert!(bytes[4000..1 << 20].iter().all(|&b| b == 0xab));
    assert!(bytes[2 << 20..(2 << 20) + 65536].iter().all(|&b| b == 0));
}

#[test]
fn qemu_img_convert_and_compare() {
    let dir = tempfile::tempdir().unwrap();
    let (cache, backing) = (dir.path().join("cache.img"), dir.path().join("img.img"));
    let (src, dst) = (dir.path().join("src.img"), dir.path().join("dst.img"));
    sparse_file(&backing, 8 << 20);
    let mut rng = Rng::new(42);
    let data: Vec<u8> = (0..8 << 20).map(|_| rng.next_u64() as u8).collect();
    std::fs::write(&src, &data).unwrap();
    let serve = ServeArgs::file_cache(&cache, "8M").backing("img", backing.display()).start();
    let uri = serve.uri("img");
    run(
        Command::new("qemu-img")
            .args(["convert", "-n", "-f", "raw", "-O", "raw"])
            .arg(&src)
            .arg(&uri),
        MIN,
    );
    let out = run(
        Command::new("qemu-img").args(["compare", "-f", "raw", "-F", "raw"]).arg(&src).arg(&uri),
        MIN,
    );
    assert!(out.contains("Images are identical"), "{out}");
    run(
        Command::new("qemu-img").args(["convert", "-f", "raw", "-O", "raw"]).arg(&uri).arg(&dst),
        MIN,
    );
    assert!(std::fs::read(&dst).unwrap() == data, "qemu-img convert out differs");
    // One changed byte in the source is noticed through the cache.
    let mut changed = data.clone();
    changed[5 << 20] ^= 0xff;
    std::fs::write(&src, &changed).unwrap();
    let o = run_status(
        Command::new("qemu-img").args(["compare", "-f", "raw", "-F", "raw"]).arg(&src).arg(&uri),
        MIN,
    );
    assert_eq!(o.status.code(), Some(1), "{}{}", o.stdout, o.stderr);
    serve.stop();
    assert!(std::fs::read(&backing).unwrap() == data, "write-through left the backing file behind");
}

#[test]
fn nbdcopy_256_mib_in_and_out_with_checksums() {
    const SIZE: u64 = 256 << 20;
    let dir = tempfile::tempdir().unwrap();
    let (cache, backing) = (dir.path().join("cache.img"), dir.path().join("big.img"));
    let (src, dst) = (dir.path().join("src.img"), dir.path().join("dst.img"));
    sparse_file(&backing, SIZE);
    // Non-zero everywhere (nbdcopy skips zeros), different in every 4 KiB block.
    {
        use std::io::Write;
        let mut f = std::io::BufWriter::new(std::fs::File::create(&src).unwrap());
        let mut rng = Rng::new(7);
        let body: Vec<u8> = (0..4096).map(|_| rng.next_u64() as u8 | 1).collect();
        for block in 0..SIZE / 4096 {
            f.write_all(&block.to_le_bytes()).unwrap();
            f.write_all(&body[8..]).unwrap();
        }
        f.flush().unwrap();
    }
    // A 96 MiB cache: the copy evicts most of what it allocates.
    let serve = ServeArgs::file_cache(&cache, "96M").backing("big", backing.display()).start();
    let uri = serve.uri("big");
    run(Command::new("nbdcopy").arg(&src).arg(&uri), Duration::from_secs(300));
    run(Command::new("nbdcopy").arg(&uri).arg(&dst), Duration::from_secs(300));
    let want = sha256(&src);
    assert_eq!(std::fs::metadata(&dst).unwrap().len(), SIZE);
    assert_eq!(sha256(&dst), want, "nbdcopy out differs from what nbdcopy wrote in");
    let samples = scrape(&serve.metrics);
    assert!(metric(&samples, "ember_cache_evictions_total") > 0.0, "a 96 MiB cache must evict");
    let write_bytes = samples
        .iter()
        .find(|s| s.name == "ember_nbd_bytes_total" && s.label("command") == Some("write"))
        .map(|s| s.value);
    assert_eq!(write_bytes, Some(SIZE as f64));
    serve.stop();
    assert_eq!(sha256(&backing), want, "the backing file holds the copy (write-through)");
}

#[test]
fn nbdinfo_flags_and_list() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache.img");
    let (a, b) = (dir.path().join("a.img"), dir.path().join("b.img"));
    sparse_file(&a, 4 << 20);
    sparse_file(&b, (3 << 20) + 512);
    let serve = ServeArgs::file_cache(&cache, "8M")
        .backing("alpha", a.display())
        .backing("beta", b.display())
        .start();
    let out = run(Command::new("nbdinfo").arg("--json").arg(serve.uri("beta")), MIN);
    let info: serde_json::Value =
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    let export = &info["exports"][0];
    assert_eq!(export["export-name"], "beta", "{out}");
    assert_eq!(export["export-size"], (3u64 << 20) + 512, "{out}");
    assert_eq!(export["is_read_only"], false, "{out}");
    assert_eq!(export["can_flush"], true, "{out}");
    assert_eq!(export["can_fua"], true, "{out}");
    assert_eq!(export["can_trim"], true, "{out}");
    assert_eq!(export["can_zero"], true, "{out}");
    assert_eq!(export["can_multi_conn"], true, "{out}");
    let list = run(Command::new("nbdinfo").arg("--list").arg(format!("nbd://{}", serve.nbd)), MIN);
    assert!(list.contains("export=\"alpha\"") || list.contains("alpha"), "{list}");
    assert!(list.contains("beta"), "{list}");
    serve.stop();
}

#[test]
fn fio_nbd_randrw_with_crc32c_verify() {
    // The cache holds the 32 MiB working set, so fio's verification reads hit.
    let samples = fio_through_serve(&[], "32M", 16);
    assert_eq!(metric(&samples, "ember_nbd_errors_total"), 0.0);
    assert!(metric(&samples, "ember_cache_read_hits_total") > 0.0);
}
