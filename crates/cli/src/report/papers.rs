//! The papers' published numbers that `ember report` shows beside ember's, quoted from the
//! papers (bench/lib/papers.py holds the same for `make reproduce`).

/// Wong & Wilkes, USENIX ATC 2002.
pub const WONG_WILKES: &str = "Wong & Wilkes, My cache or yours? (USENIX ATC 2002)";

/// Table 2: workload, client hit rate, array hit rates under NONE-LRU, DEMOTE-LRU, DEMOTE (%).
pub const WW_TABLE2: [(&str, u32, [u32; 3]); 3] =
    [("RANDOM", 50, [8, 21, 46]), ("SEQ", 0, [0, 0, 100]), ("ZIPF", 86, [2, 4, 9])];

/// Table 3: workload, mean READ latency (ms) under NONE-LRU, DEMOTE-LRU, DEMOTE, and the
/// speedups of DEMOTE-LRU and DEMOTE over NONE-LRU.
pub const WW_TABLE3: [(&str, [f64; 3], [f64; 2]); 3] = [
    ("RANDOM", [4.77, 3.43, 0.64], [1.39, 7.5]),
    ("SEQ", [1.67, 1.91, 0.48], [0.87, 3.5]),
    ("ZIPF", [1.41, 1.19, 0.85], [1.18, 1.7]),
];

/// SieveStore, ISCA 2010.
pub const SIEVESTORE: &str = "Pritchett & Thottethodi, SieveStore (ISCA 2010), section 5.1";

/// Section 5.1's findings (Figures 5 and 6), on the paper's eight-day ensemble.
pub const SIEVESTORE_5_1: [(&str, &str); 6] = [
    ("SieveStore-D below the ideal (accesses captured, days 2+)", "within 14 % (average)"),
    ("SieveStore-C below the ideal", "within 4 % (average)"),
    ("SieveStore-D over the best of AOD and WMNA", "+35 %"),
    ("SieveStore-C over the best of AOD and WMNA", "+50 %"),
    ("allocation-writes of AOD/WMNA over SieveStore's", "more than 100x"),
    ("allocation-writes of the RandSieve variants over SieveStore's", "about 8.5x"),
];

/// Bonfire, FAST 2013.
pub const BONFIRE: &str = "Zhang et al., Bonfire (FAST 2013), Table 3";

/// Table 3's ranges over its configurations (the best algorithm per trace, medians over the
/// traces): T_converge improvement and server load reduction over cold.
pub const BONFIRE_TABLE3: [(&str, &str); 2] = [
    ("T_converge improvement over cold", "14 % to 100 %"),
    ("server load reduction over cold's", "44 % to 228 % more"),
];
