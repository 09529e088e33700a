use super::*;
use ember_trace::block_key;

fn read(vol: u32, block: u64) -> Access {
    Access { key: block_key(vol, block), time_ns: 0, op: Op::Read, vtime: 0, next_vtime: 0 }
}

fn write(vol: u32, block: u64) -> Access {
    Access { op: Op::Write, ..read(vol, block) }
}

fn always(read_blocks: u64, write_blocks: u64, streams: usize) -> SeqCutoff {
    SeqCutoff::new(SeqCutoffConfig {
        policy: CutoffPolicy::Always,
        read_blocks,
        write_blocks,
        streams,
    })
}

/// Observe `acc` and ask whether a miss of it is cut (in a full cache).
fn miss(s: &mut SeqCutoff, acc: Access) -> bool {
    s.observe(&acc);
    s.cuts(&acc, 10, 10)
}

#[test]
fn a_stream_is_cut_past_its_threshold() {
    let mut s = always(4, 4, 8);
    let cut: Vec<bool> = (0..6).map(|b| miss(&mut s, read(0, b))).collect();
    assert_eq!(cut, [false, false, false, false, true, true]);
    assert_eq!(s.cut_blocks(0), 2);
}

#[test]
fn interleaved_streams_are_each_followed() {
    let mut s = always(3, 3, 8);
    let mut cut = Vec::new();
    for i in 0..4 {
        cut.push(miss(&mut s, read(0, i)));
        cut.push(miss(&mut s, read(0, 1000 + i)));
        cut.push(miss(&mut s, write(0, 500 + i)));
    }
    let expect = [false; 9].iter().chain(&[true; 3]).copied().collect::<Vec<_>>();
    assert_eq!(cut, expect);
}

#[test]
fn reads_and_writes_are_separate_streams_with_their_own_thresholds() {
    let mut s = always(2, 0, 8);
    assert!(!miss(&mut s, write(0, 0)));
    assert!(!miss(&mut s, read(0, 1)), "a read does not continue a write stream");
    for b in 2..10 {
        assert!(!miss(&mut s, write(0, b + 100)), "write threshold 0: writes are never cut");
    }
    assert!(!miss(&mut s, read(0, 2)));
    assert!(miss(&mut s, read(0, 3)));
}

#[test]
fn the_least_recently_continued_stream_is_forgotten() {
    let mut s = always(2, 2, 2);
    for start in [0u64, 100] {
        miss(&mut s, read(0, start));
        miss(&mut s, read(0, start + 1));
    }
    // Streams at 0 and 100 are tracked; 100 was continued last, so a third replaces 0's.
    miss(&mut s, read(0, 200));
    assert!(!miss(&mut s, read(0, 2)), "the stream at 0 was evicted: a new stream");
    let mut t = StreamTable::new(2);
    assert_eq!(t.access(0, false), 0);
    assert_eq!(t.access(100, false), 0);
    assert_eq!(t.access(1, false), 1, "continues the stream at 0, now the most recent");
    assert_eq!(t.access(200, false), 0, "replaces the stream at 100");
    assert_eq!(t.access(101, false), 0, "the stream at 100 is gone");
    assert_eq!(t.access(2, false), 0, "so is the one at 0, which 200's and 101's replaced");
    assert_eq!(t.streams(), 2);
}

/// A block index past 48 bits is folded as in a key, so no access, however large its
/// block, continues an entry no stream has taken yet.
#[test]
fn blocks_are_taken_modulo_48_bits() {
    let mut t = StreamTable::new(4);
    assert_eq!(t.access(7 | 1 << 50, false), 0);
    assert_eq!(t.access(8, false), 1, "continues the stream of block 7");
    assert_eq!(t.access(1 << 62 | 1, false), 0, "block 1 starts a stream");
    assert_eq!(t.access(2, false), 1, "and block 2 continues it");
    assert_eq!(t.access(u64::MAX, false), 0);
    assert_eq!(t.access(1 << 48, false), 0, "block 0: nothing continues 2^48 - 1");
    assert_eq!(t.streams(), 4);
}

#[test]
fn reverse_and_strided_accesses_are_not_sequential() {
    let mut s = always(2, 2, 8);
    for b in (0..50).rev() {
        assert!(!miss(&mut s, read(0, b)), "reverse at {b}");
    }
    for b in (0..200).step_by(2) {
        assert!(!miss(&mut s, read(0, 1000 + b)), "stride 2 at {b}");
    }
    assert_eq!(s.cut_total(), 0);
}

#[test]
fn volumes_have_their_own_streams() {
    let mut s = always(2, 2, 8);
    assert!(!miss(&mut s, read(0, 0)));
    assert!(!miss(&mut s, read(0, 1)));
    assert!(!miss(&mut s, read(1, 2)), "block 2 of another volume starts a stream");
    assert!(miss(&mut s, read(0, 2)));
    assert_eq!((s.cut_blocks(0), s.cut_blocks(1)), (1, 0));
}

#[test]
fn full_acts_only_in_a_full_cache_and_never_never() {
    let cfg =
        SeqCutoffConfig { policy: CutoffPolicy::Full, read_blocks: 1, write_blocks: 1, streams: 4 };
    let mut s = SeqCutoff::new(cfg);
    for b in 0..3 {
        let acc = read(0, b);
        s.observe(&acc);
        assert!(!s.cuts(&acc, 5, 10), "room left: not cut");
    }
    let acc = read(0, 3);
    s.observe(&acc);
    assert!(s.cuts(&acc, 10, 10));
    s.set_config(SeqCutoffConfig { policy: CutoffPolicy::Never, ..cfg });
    let acc = read(0, 4);
    s.observe(&acc);
    assert!(!s.cuts(&acc, 10, 10));
}

#[test]
fn policies_parse_by_name() {
    for p in [CutoffPolicy::Always, CutoffPolicy::Full, CutoffPolicy::Never] {
        assert_eq!(p.name().parse::<CutoffPolicy>(), Ok(p));
    }
    assert!("sometimes".parse::<CutoffPolicy>().is_err());
    let c = SeqCutoffConfig::from_bytes(CutoffPolicy::Full, 1 << 20, 5000, 4096);
    assert_eq!((c.read_blocks, c.write_blocks), (256, 2));
}

#[test]
fn a_volume_with_settings_of_its_own_is_cut_by_them_and_the_others_by_the_cache_wide_ones() {
    let mut s = always(4, 4, 8);
    // Volume 1 cuts after 2 blocks, volume 2 never.
    s.set_volume_config(1, Some(SeqCutoffConfig { read_blocks: 2, ..s.config() }));
    s.set_volume_config(2, Some(SeqCutoffConfig { policy: CutoffPolicy::Never, ..s.config() }));
    let cut = |s: &mut SeqCutoff, vol: u32| -> Vec<bool> {
        (0..6).map(|b| miss(s, read(vol, b))).collect()
    };
    assert_eq!(cut(&mut s, 0), [false, false, false, false, true, true]);
    assert_eq!(cut(&mut s, 1), [false, false, true, true, true, true]);
    assert_eq!(cut(&mut s, 2), [false; 6]);
    assert_eq!(s.config_of(1).read_blocks, 2);
    assert_eq!(s.config_of(3), s.config(), "a volume without settings takes the cache's");
    // The cache-wide cutoff off, one volume's on: still active.
    s.set_config(SeqCutoffConfig::default());
    assert!(s.is_active());
    assert_eq!(cut(&mut s, 0), [false; 6]);
    s.set_volume_config(1, None);
    assert!(!s.is_active());
    assert_eq!(s.volume_config(1), None);
}

/// The table's index of expected blocks is exact, so answering from it (no scan when a
/// block's slot holds no entry or one) never hides a stream: after every access of a mix of
/// streams, random blocks, reads and writes (with duplicate expectations), each slot's count
/// and entries equal a recount, and each answer equals a plain scan's over the same entries.
#[test]
fn the_stream_index_is_exact_and_hides_no_stream() {
    let mut t = StreamTable::new(8);
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    let mut cursor = [0u64; 5];
    for step in 0..20_000u64 {
        let (block, write) = mixed(&mut x, &mut cursor);
        let tag = block | if write { 1 << 63 } else { 0 };
        let scan_finds = t.next_blocks().any(|b| b == tag);
        let before = t.access(block, write);
        assert_eq!(before > 0, scan_finds, "step {step}: block {block}");
        assert!(t.index_is_exact(), "step {step}");
    }
}

/// The next access of a mix: a random block (a read or a write) one time in four, else the
/// next block of one of five read streams that wrap around 700 blocks (so blocks recur and
/// streams expect blocks others expect too).
fn mixed(x: &mut u64, cursor: &mut [u64; 5]) -> (u64, bool) {
    let r = xorshift(x);
    match r % 4 {
        0 => (r >> 20 & 0xffff, r & 8 != 0),
        _ => {
            let c = (r >> 8) as usize % cursor.len();
            cursor[c] += 1;
            (c as u64 * 1000 + cursor[c] % 700, false)
        }
    }
}

/// The next number of a xorshift generator.
fn xorshift(x: &mut u64) -> u64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    *x
}

/// The stream table as its rules say, with nothing but scans: the most recently continued
/// stream if it expects the block, else the first entry that does; a new stream takes a free
/// entry or the least recently continued one.
struct PlainTable {
    /// Per entry: the expected tag, the blocks held, the access that last continued it.
    entries: Vec<(u64, u64, u64)>,
    cap: usize,
    now: u64,
}

impl PlainTable {
    fn access(&mut self, block: u64, write: bool) -> u64 {
        let tag = block | if write { 1 << 63 } else { 0 };
        self.now += 1;
        let newest = (0..self.entries.len()).max_by_key(|&i| self.entries[i].2);
        let found = newest
            .filter(|&i| self.entries[i].0 == tag)
            .or_else(|| self.entries.iter().position(|e| e.0 == tag));
        match found {
            Some(i) => {
                let before = self.entries[i].1;
                self.entries[i] = (tag + 1, before + 1, self.now);
                before
            }
            None => {
                let e = (tag + 1, 1, self.now);
                if self.entries.len() < self.cap {
                    self.entries.push(e);
                } else if let Some(i) = (0..self.cap).min_by_key(|&i| self.entries[i].2) {
                    self.entries[i] = e;
                }
                0
            }
        }
    }
}

/// Every answer of the table (the blocks the continued stream held) equals the plain
/// table's, so the index picks the very entry the rules pick, duplicates included: over the
/// mix above and over random blocks of a range small enough that two streams often expect
/// one block, for several table sizes.
#[test]
fn the_stream_table_answers_as_a_plain_scan_does() {
    for cap in [1usize, 2, 8, 128] {
        let mut t = StreamTable::new(cap);
        let mut plain = PlainTable { entries: Vec::new(), cap, now: 0 };
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15 ^ cap as u64;
        let mut cursor = [0u64; 5];
        for step in 0..20_000u64 {
            let (block, write) = if step % 2 == 0 {
                mixed(&mut x, &mut cursor)
            } else {
                (xorshift(&mut x) >> 33 & 63, false)
            };
            assert_eq!(
                t.access(block, write),
                plain.access(block, write),
                "{cap} streams, step {step}: block {block}"
            );
        }
        assert!(t.index_is_exact(), "{cap} streams");
    }
}
