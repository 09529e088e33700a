//! `ember serve --cache mem:SIZE`: a cache in memory, formatted at every
//! start. qemu-io writes and reads patterns through it (a second read hits, the backing file
//! holds every written byte once the server stops), a restart starts cold, and the write
//! policies a memory cache cannot keep safe are refused with a reason.

mod serve_support;

use serve_support::*;

/// qemu-io's `;`-separated commands on `uri`, which must print no error.
fn qemu_io_clean(uri: &str, script: &str) -> String {
    let out = qemu_io(uri, script);
    assert!(!out.contains("error"), "{out}");
    out
}

#[test]
fn memory_cache_round_trip_with_qemu_io() {
    let dir = tempfile::tempdir().unwrap();
    let backing = dir.path().join("disk.img");
    sparse_file(&backing, 32 << 20);
    for policy in ["write-through", "write-around", "write-back-flush"] {
        let serve = ServeArgs::mem_cache("32M")
            .args(["--write-policy", policy])
            .backing("disk", backing.display())
            .start();
        let log = serve.output();
        assert!(log.contains("memory cache of 33554432 bytes"), "{log}");
        assert!(log.contains("start Fresh"), "{log}");
        let uri = serve.uri("disk");
        let p = match policy {
            "write-through" => 0x5a,
            "write-around" => 0x6b,
            _ => 0x7c,
        };
        let read = format!("read -P {p:#x} 1M 2M");
        qemu_io_clean(
            &uri,
            &format!("write -P {p:#x} 1M 2M; flush; {read}; {read}; read -P 0 0 1M"),
        );
        let samples = scrape(&serve.metrics);
        // The second read of the 2 MiB hits under every policy (write-around's first read
        // fills the cache).
        assert!(metric(&samples, "ember_cache_read_hits_total") >= 512.0, "{policy}");
        serve.stop();
        let bytes = std::fs::read(&backing).unwrap();
        assert!(
            bytes[1 << 20..3 << 20].iter().all(|&b| b == p),
            "{policy}: backing lacks the written pattern"
        );
        assert!(bytes[..1 << 20].iter().all(|&b| b == 0), "{policy}: backing changed elsewhere");
        // A restart is empty again (memory), and still serves what backing holds.
        let serve = ServeArgs::mem_cache("32M").backing("disk", backing.display()).start();
        assert!(serve.output().contains("start Fresh"), "{}", serve.output());
        qemu_io_clean(&serve.uri("disk"), &read);
        let samples = scrape(&serve.metrics);
        assert_eq!(
            metric(&samples, "ember_cache_read_hits_total"),
            0.0,
            "a restarted memory cache is cold"
        );
        serve.stop();
    }
}

#[test]
fn memory_cache_refuses_unsafe_policies_and_bad_sizes() {
    let dir = tempfile::tempdir().unwrap();
    let backing = dir.path().join("disk.img");
    sparse_file(&backing, 32 << 20);
    let b = format!("disk={}", backing.display());
    for (args, want) in [
        (
            vec!["--cache", "mem:32M", "--write-policy", "write-back-persist"],
            "loses them at every stop",
        ),
        (vec!["--cache", "mem:32M", "--write-policy", "unsafe-write-back"], "ignores FLUSH"),
        (vec!["--cache", "mem:1M"], "at least 16M"),
        (vec!["--cache", "mem:big"], "size \"big\": not a number"),
        (vec!["--cache", "mem:32M", "--cache-size", "32M"], "drop --cache-size"),
        (vec!["--cache", "mem:32M", "--direct"], "drop --cache-size and --direct"),
    ] {
        let stderr = serve_fails(&[&args[..], &["--backing", &b]].concat());
        assert!(stderr.contains(want), "{args:?}: {stderr}");
    }
}
