//! One cache device, one ember: a second `ember serve` (or `ember cache format`) on a cache
//! device that a running `ember serve` holds is refused with a clear error, and the running
//! server is untouched. Without this, two servers would allocate the same cache blocks and
//! overwrite each other's superblocks: wrong data for both.

mod serve_support;

use serve_support::*;
use std::process::Command;
use std::time::Duration;

#[test]
fn a_cache_device_in_use_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache.img");
    let backing = dir.path().join("backing.img");
    patterned_backing(&backing, 4 << 20, 3);
    let (c, b) = (cache.to_str().unwrap(), backing.to_str().unwrap());
    let disk = format!("disk={b}");
    let first = ServeArgs::file_cache(c, "16M").args(["--backing", &disk]).start();
    let before = sha256(&cache);

    for (what, args) in [
        (
            "a second ember serve",
            vec!["serve", "--cache", c, "--backing", &disk, "--listen", "127.0.0.1:0"],
        ),
        (
            "ember cache format --force",
            vec!["cache", "format", "--cache", c, "--volume", &disk, "--force"],
        ),
    ] {
        let out = run_status(Command::new(ember()).args(&args), Duration::from_secs(30));
        let text = format!("{}{}", out.stdout, out.stderr);
        assert!(!out.status.success(), "{what} on a cache in use must fail:\n{text}");
        assert!(text.contains("in use by another process"), "{what}: the error says why:\n{text}");
    }
    assert_eq!(sha256(&cache), before, "the refused commands wrote nothing to the cache");

    // The first server still serves correct data.
    let mut back = vec![0u8; 4096];
    let client =
        ember_nbd::ClientBuilder::new().export("disk").connect_tcp(first.nbd.as_str()).unwrap();
    client.read(4096, &mut back).unwrap();
    assert_eq!(back, std::fs::read(&backing).unwrap()[4096..8192]);
    client.disconnect().unwrap();
    first.stop();

    // Once it stopped, the cache opens again (warm).
    let again = Serve::start(&["--cache", c, "--backing", &disk]);
    assert!(again.output().contains("start Warm"), "{}", again.output());
    again.stop();
}
