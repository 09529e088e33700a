//! ember's readers on libCacheSim's shipped sample trace cloudPhysicsIO, in its vscsi, csv and
//! oracleGeneral renditions (fetched into `.cache/peer/` by `make setup`).

use std::path::{Path, PathBuf};

use ember_trace::{
    read_oracle_general_keys, read_oracle_general_records, read_trace, write_trace, CsvColumns,
    Format, OffsetUnit, ReadOptions, TimeUnit, Trace,
};

/// A file of `.cache/peer/`; fails (never skips) when `make setup` has not fetched it.
fn peer(name: &str) -> PathBuf {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.cache/peer").join(name);
    assert!(
        p.is_file(),
        "{} is missing: run `make setup` (it fetches libCacheSim's sample traces into .cache/peer/)",
        p.display()
    );
    p
}

fn read(path: &Path, opts: &ReadOptions) -> Trace {
    match read_trace(path, opts) {
        Ok((t, s)) => {
            assert_eq!(s.skipped, 0, "{}", path.display());
            t
        }
        Err(e) => panic!("{e}"),
    }
}

/// Requests in cloudPhysicsIO as libCacheSim 0.3.5 counts them
/// (`libcachesim.TraceReader(path, TraceType.VSCSI_TRACE).get_num_of_req()`, also for
/// ORACLE_GENERAL_TRACE).
const CLOUDPHYSICS_REQUESTS: usize = 113_872;

#[test]
fn oracle_general_record_count_is_what_the_file_implies() {
    let p = peer("cloudPhysicsIO.oracleGeneral.bin");
    let size = std::fs::metadata(&p).map(|m| m.len()).unwrap_or(0);
    assert_eq!(size % 24, 0);
    let t = read(&p, &ReadOptions::default());
    assert_eq!(t.requests.len() as u64, size / 24);
    assert_eq!(t.requests.len(), CLOUDPHYSICS_REQUESTS);
    let keys = read_oracle_general_keys(&p).unwrap_or_default();
    assert_eq!(keys.len(), CLOUDPHYSICS_REQUESTS);
    // The first record, decoded here from the raw bytes (libCacheSim's oracleGeneral record:
    // u32 clock, u64 obj_id, u32 size, i64 next access vtime, little-endian) and from the first
    // data line of libCacheSim's own csv rendition (`version,time,op,size,lbn`), not from
    // ember's readers: both must agree with each other and with what ember read.
    let raw = std::fs::read(&p).unwrap_or_default();
    let le = |r: std::ops::Range<usize>| {
        raw[r].iter().rev().fold(0u64, |acc, &b| (acc << 8) | u64::from(b))
    };
    let (clock, obj_id) = (le(0..4), le(4..12));
    let csv = std::fs::read_to_string(peer("cloudPhysicsIO.csv")).unwrap_or_default();
    let first: Vec<&str> = csv.lines().nth(1).unwrap_or_default().split(',').collect();
    assert_eq!(first.get(1).and_then(|x| x.parse().ok()), Some(clock), "csv time vs oracleGeneral");
    assert_eq!(first.get(4).and_then(|x| x.parse().ok()), Some(obj_id), "csv lbn vs obj_id");
    assert_eq!(keys[0], obj_id);
    assert_eq!(t.requests[0].offset, obj_id * 4096);
    assert_eq!(t.requests[0].time_ns, clock * 1_000_000_000);
}

#[test]
fn oracle_general_writer_reproduces_libcachesim_next_access_times() {
    // libCacheSim's converter wrote this file from the vscsi trace (obj_id = lbn). Reading it
    // as one block per record and writing it back must give the same clock times, object ids
    // and next-access vtimes: ember's writer follows the converter's convention.
    let p = peer("cloudPhysicsIO.oracleGeneral.bin");
    let theirs = read_oracle_general_records(&p).unwrap_or_default();
    let t = read(&p, &ReadOptions::default());
    let dir = tempfile::tempdir().map_err(|e| e.to_string());
    let out = dir
        .as_ref()
        .map(|d| d.path().join("ours.oracleGeneral.bin"))
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(write_trace(&out, Format::OracleGeneral, &t, 4096).is_ok());
    let ours = read_oracle_general_records(&out).unwrap_or_default();
    assert_eq!(ours.len(), theirs.len());
    let never = theirs.iter().filter(|r| r.next_access_vtime == -1).count();
    assert!(never > 0 && never < theirs.len());
    for (i, (a, b)) in ours.iter().zip(&theirs).enumerate() {
        assert_eq!(
            (a.clock_time, a.obj_id, a.next_access_vtime),
            (b.clock_time, b.obj_id, b.next_access_vtime),
            "record {}",
            i + 1
        );
    }
}

#[test]
fn vscsi_matches_libcachesim_and_the_csv_rendition() {
    let p = peer("cloudPhysicsIO.vscsi");
    let size = std::fs::metadata(&p).map(|m| m.len()).unwrap_or(0);
    let v = read(&p, &ReadOptions::default());
    assert_eq!(v.requests.len(), CLOUDPHYSICS_REQUESTS);
    assert_eq!(v.requests.len() as u64, size / 32, "version 1 records are 32 bytes");
    // cloudPhysicsIO.csv is the same trace: version,time(s),op(hex SCSI),size,lbn.
    let mut cols = CsvColumns { offset: 5, volume: None, ..CsvColumns::default() };
    (cols.time, cols.op, cols.size) = (Some(2), Some(3), Some(4));
    (cols.time_unit, cols.offset_unit) = (TimeUnit::S, OffsetUnit::Sectors);
    (cols.read_values, cols.write_values) = (vec!["28".into()], vec!["2a".into()]);
    let opts = ReadOptions { format: Some(Format::Csv), csv: cols, ..ReadOptions::default() };
    let c = read(&peer("cloudPhysicsIO.csv"), &opts);
    assert_eq!(c.requests.len(), v.requests.len());
    for (i, (a, b)) in v.requests.iter().zip(&c.requests).enumerate() {
        assert_eq!((a.op, a.offset, a.length), (b.op, b.offset, b.length), "request {}", i + 1);
        assert_eq!(a.time_ns / 1_000_000_000 * 1_000_000_000, b.time_ns, "request {}", i + 1);
    }
}
