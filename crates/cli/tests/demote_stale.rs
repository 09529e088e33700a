//! DEMOTE never stale, with several clients (docs/design/architecture.md, "The stale rule"):
//! client A
//! reads a block, client B writes it, then A DEMOTEs its old copy. The array tier (a real
//! `ember serve --array-scheme`) must refuse that DEMOTE, or it would serve A's old data to
//! everyone; a DEMOTE of a copy no write followed is still stored and hit.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "integration-test helpers")]

mod serve_support;

use ember_nbd::ClientBuilder;
use serve_support::*;

const BS: usize = 4096;

fn client(serve: &Serve, demote: bool) -> ember_nbd::Client {
    let c = ClientBuilder::new().export("disk").demote(demote).connect_tcp(serve.nbd.as_str());
    let c = c.expect("connect to the array tier");
    assert_eq!(c.info().demote, demote, "the array tier grants DEMOTE when asked");
    c
}

fn read_block(c: &ember_nbd::Client, b: u64) -> Vec<u8> {
    let mut buf = vec![0u8; BS];
    c.read(b * BS as u64, &mut buf).expect("read");
    buf
}

#[test]
fn a_demote_of_a_copy_older_than_another_clients_write_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let backing = dir.path().join("disk.img");
    sparse_file(&backing, 64 << 20);
    // DEMOTE-LRU: plain LRU for read and demoted blocks, so B's reads push A's blocks out.
    // Write-around: B's write of a block the array does not hold goes to backing only.
    let array = array_tier(&backing, "16M", "demote-lru", &["--write-policy", "write-around"]);
    let a = client(&array, true);
    let b = client(&array, true);
    let c = client(&array, false);
    let old7 = read_block(&a, 7);
    let old9 = read_block(&a, 9);
    assert!(old7.iter().all(|&x| x == 0));
    // B reads 3200 other blocks (more than the array's 3044): 7 and 9 leave the array.
    let mut big = vec![0u8; 256 * BS];
    for i in 0..(3200 / 256 + 1) {
        b.read((100 + i * 256) * BS as u64, &mut big).unwrap();
    }
    // B writes block 7: the array acknowledges it.
    let new7 = vec![0xAB; BS];
    b.write(7 * BS as u64, &new7, false).unwrap();
    // A evicts both blocks and DEMOTEs its copies: 7's is older than B's write.
    a.demote(7 * BS as u64, &old7).unwrap();
    a.demote(9 * BS as u64, &old9).unwrap();
    // Every reader sees B's write, and the fresh demoted block 9 is a hit.
    assert!(read_block(&c, 7) == new7, "the array served A's stale copy of block 7");
    let s0 = scrape(&array.metrics);
    assert_eq!(metric(&s0, "ember_cache_demotes_refused_stale_total"), 1.0);
    assert_eq!(metric(&s0, "ember_cache_demotes_stored_total"), 1.0);
    assert_eq!(read_block(&a, 7), new7);
    let hits = metric(&scrape(&array.metrics), "ember_cache_read_hits_demoted_total");
    assert_eq!(read_block(&c, 9), old9);
    let s1 = scrape(&array.metrics);
    assert_eq!(metric(&s1, "ember_cache_read_hits_demoted_total"), hits + 1.0);
    // A writer's own copy may go down: B wrote block 20 and DEMOTEs it.
    let new20 = vec![0x5C; BS];
    b.write(20 * BS as u64, &new20, false).unwrap();
    b.demote(20 * BS as u64, &new20).unwrap();
    assert_eq!(metric(&scrape(&array.metrics), "ember_cache_demotes_stored_total"), 2.0);
    assert_eq!(read_block(&c, 20), new20);
    // A DEMOTE of a block this connection never read is refused too (no copy known).
    c.disconnect().unwrap();
    let c = client(&array, true);
    c.demote(30 * BS as u64, &vec![0xEE; BS]).unwrap();
    assert_eq!(metric(&scrape(&array.metrics), "ember_cache_demotes_refused_stale_total"), 2.0);
    assert!(read_block(&c, 30).iter().all(|&x| x == 0));
    drop((a, b, c));
    array.stop();
}
