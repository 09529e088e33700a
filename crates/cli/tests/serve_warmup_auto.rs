//! `ember serve --warmup auto`: the selector is chosen by simulating the
//! candidates on the warmup log's history with the laboratory's code. A log whose every
//! period rereads a hot set early and then reads one-off blocks must pick Top-K (Last-K
//! would preload the one-offs); a log too short to decide falls back to Last-K with a line
//! that says why.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "integration-test helpers")]

mod serve_support;

use ember_trace::formats::warmup_log::{LogHeader, LogRecord, LogVolume, HEADER_SIZE, RECORD_SIZE};
use ember_trace::Op;
use serve_support::*;
use std::path::Path;

const HOUR: u64 = 3_600_000_000_000;
const VOL_BLOCKS: u64 = 16384;

/// Write a warmup log of volume `disk` (backing identity unknown: 0) with `reqs`
/// ((time, block)), all reads of one block.
fn write_log(path: &Path, reqs: &[(u64, u64)]) {
    let header = LogHeader {
        slots: reqs.len() as u64 + 16,
        log_id: 77,
        block_size: 4096,
        created_ns: reqs[0].0,
        volumes: vec![LogVolume {
            name: "disk".into(),
            size: VOL_BLOCKS * 4096,
            backing_medium: 0,
        }],
    };
    let mut b = header.encode();
    b.resize(header.file_size() as usize, 0);
    for (i, &(time_ns, block)) in reqs.iter().enumerate() {
        let r = LogRecord { seq: i as u64 + 1, time_ns, block, blocks: 1, volume: 0, op: Op::Read };
        let at = HEADER_SIZE + i * RECORD_SIZE;
        r.encode(header.log_id, &mut b[at..at + RECORD_SIZE]);
    }
    std::fs::write(path, b).unwrap();
}

/// Four days: each first reads 300 one-off blocks, then rereads the same 200 hot blocks
/// every 10 minutes for 3 hours, then reads 2,000 more one-off blocks spread over the rest
/// of the day (Top-K carries the hot set into the next day; Last-K and First-K one-offs);
/// 23,601 requests.
fn hot_then_one_offs() -> Vec<(u64, u64)> {
    let t0 = 1_700_000_000_000_000_000u64;
    let mut v = Vec::new();
    let mut one_off = 1000u64;
    for day in 0..4u64 {
        let start = t0 + day * 24 * HOUR;
        for i in 0..300u64 {
            v.push((start + i * 2_000_000_000, one_off));
            one_off += 1;
        }
        for rep in 0..18u64 {
            for b in 0..200u64 {
                v.push((start + HOUR + rep * 600_000_000_000 + b * 2_000_000_000, b));
            }
        }
        for i in 0..2_000u64 {
            v.push((start + 4 * HOUR + i * 35_000_000_000, one_off));
            one_off += 1;
        }
    }
    // The log spans exactly four days (auto cuts the history into four periods).
    v.push((t0 + 4 * 24 * HOUR - 4, one_off));
    v
}

fn serve(backing: &Path, log: &Path) -> Serve {
    Serve::start(&[
        "--cache",
        "mem:32M",
        "--backing",
        &format!("disk={}", backing.display()),
        "--warmup-log",
        log.to_str().unwrap(),
        "--warmup",
        "auto",
        "--warmup-size",
        "1M",
        "--warmup-region",
        "4K",
    ])
}

#[test]
fn auto_picks_top_k_where_it_converges_sooner_and_last_k_on_a_short_log() {
    let dir = tempfile::tempdir().unwrap();
    let backing = dir.path().join("disk.img");
    let log = dir.path().join("w.log");
    patterned_backing(&backing, VOL_BLOCKS * 4096, 31);
    write_log(&log, &hot_then_one_offs());
    let s = serve(&backing, &log);
    let out = s.output();
    let line = out.lines().find(|l| l.contains("warmup auto:")).unwrap_or_else(|| panic!("{out}"));
    assert!(line.contains("auto: Top-K, simulated on the log's 23601 requests"), "{line}");
    assert!(line.contains("cold T_converge") && line.contains("Last-K T_converge"), "{line}");
    assert!(out.contains("preloading 256 blocks") && out.contains("Top-K of 23601"), "{out}");
    s.stop();

    // 300 requests: too short to decide.
    write_log(&log, &hot_then_one_offs()[..300]);
    let s = serve(&backing, &log);
    let out = s.output();
    assert!(
        out.contains(
            "auto: Last-K, because the log is too short to decide (300 requests, at least 1000 \
             needed)"
        ),
        "{out}"
    );
    assert!(out.contains("Last-K of 300"), "{out}");
    s.stop();
}
