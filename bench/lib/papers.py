"""The papers' published numbers that ember's experiments reproduce, as the papers print them.

Used by bench/reproduce (beside ember's numbers) and so by docs/reproductions.md. Each value is
quoted from the paper's text; where the paper gives a statement rather than a number, the
statement is kept as text.
"""

WONG_WILKES = "Wong & Wilkes, My cache or yours? (USENIX ATC 2002)"
# Table 2: client hit rate and array hit rates (%) for NONE-LRU, DEMOTE-LRU, DEMOTE.
WW_TABLE2 = {
    "ww-random": (50, {"none-lru": 8, "demote-lru": 21, "demote": 46}),
    "ww-seq": (0, {"none-lru": 0, "demote-lru": 0, "demote": 100}),
    "ww-zipf": (86, {"none-lru": 2, "demote-lru": 4, "demote": 9}),
}
# Table 3: mean READ latency (ms) and speedup over NONE-LRU.
WW_TABLE3 = {
    "ww-random": {"none-lru": (4.77, 1.0), "demote-lru": (3.43, 1.39), "demote": (0.64, 7.5)},
    "ww-seq": {"none-lru": (1.67, 1.0), "demote-lru": (1.91, 0.87), "demote": (0.48, 3.5)},
    "ww-zipf": {"none-lru": (1.41, 1.0), "demote-lru": (1.19, 1.18), "demote": (0.85, 1.7)},
}

SIEVESTORE = "Pritchett & Thottethodi, SieveStore (ISCA 2010)"
# Section 5.1 (Figures 5 and 6), on the paper's eight-day ensemble trace.
SIEVESTORE_5_1 = {
    "d_vs_ideal": "within 14 % of the ideal (average, days 2+)",
    "c_vs_ideal": "within 4 % of the ideal (average)",
    "d_vs_unsieved": "35 % more accesses than the best of AOD and WMNA",
    "c_vs_unsieved": "50 % more accesses than the best of AOD and WMNA",
    "alloc_writes": "more than two orders of magnitude fewer than AOD and WMNA",
    "random_sieves": "RandSieve variants about 8.5x more allocation-writes than SieveStore",
}

BONFIRE = "Zhang et al., Warming up Storage-Level Caches with Bonfire (FAST 2013)"
# Table 3 (section 4.3), median over the traces of the best algorithm per trace.
BONFIRE_TABLE3 = {
    "t_converge": "14 % to 100 % (column 8)",
    "load": "44 % to 228 % more server load reduction than cold (column 12)",
}
