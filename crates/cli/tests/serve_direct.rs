//! `ember serve --direct` (an O_DIRECT cache file) under a real client at depth: fio's nbd
//! engine, random reads and writes at iodepth 32 with crc32c verification, so the reads of
//! blocks the cache holds arrive in runs that the server reads together
//! (`Volume::read_hits`, io_uring) while writes to the same blocks run beside them; every
//! byte fio reads back must be the last it wrote.

mod serve_support;

use serve_support::*;

#[test]
fn fio_randrw_at_iodepth_32_on_an_o_direct_cache_verifies() {
    let samples = fio_through_serve(&["--direct"], "16M", 32);
    assert_eq!(metric(&samples, "ember_nbd_errors_total"), 0.0);
    // The verification pass reads blocks fio wrote through the cache: hits.
    assert!(metric(&samples, "ember_cache_read_hits_total") > 1000.0);
}
