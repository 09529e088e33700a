//! End-to-end tests of the trace readers on small files written by hand from each format's
//! definition: values, malformed lines (with file:line), skip-bad counts, detection.

use std::io::Write;
use std::path::{Path, PathBuf};

use ember_trace::formats::vscsi;
use ember_trace::{
    detect_format, open, read_trace, BlkAction, Format, Op, ReadOptions, Request, TraceError,
};

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data").join(name)
}

fn read(path: &Path, opts: &ReadOptions) -> (Vec<Request>, Vec<String>, u64, u64) {
    match read_trace(path, opts) {
        Ok((t, s)) => (t.requests, t.volumes.names().to_vec(), s.skipped, s.ignored),
        Err(e) => panic!("{}: {e}", path.display()),
    }
}

fn read_err(path: &Path, opts: &ReadOptions) -> String {
    match read_trace(path, opts) {
        Ok(_) => panic!("{} read without error", path.display()),
        Err(e) => e.to_string(),
    }
}

fn skip_bad() -> ReadOptions {
    ReadOptions { skip_bad: true, ..ReadOptions::default() }
}

#[test]
fn msr_cambridge() {
    let p = data("msr_sample.csv");
    assert_eq!(detect_format(&p).ok(), Some(Format::MsrCsv));
    let (r, vols, skipped, _) = read(&p, &ReadOptions::default());
    assert_eq!(vols, vec!["web_0".to_string(), "prxy_1".to_string()]);
    assert_eq!(r.len(), 4);
    assert_eq!(r[0].time_ns, (128_166_372_003_061_629u64 - 116_444_736_000_000_000) * 100);
    assert_eq!(
        r[1],
        Request { time_ns: r[1].time_ns, volume: 0, op: Op::Write, offset: 3_649_536, length: 512 }
    );
    assert_eq!((r[2].volume, r[2].length), (1, 8192));
    assert_eq!(r[3].time_ns - r[1].time_ns, 1_000_000_000);
    assert_eq!(skipped, 0);
}

#[test]
fn msr_malformed_lines_name_file_and_line() {
    let p = data("msr_bad.csv");
    let e = read_err(&p, &ReadOptions::default());
    assert!(e.contains("msr_bad.csv:2: Type \"Trim\" is neither Read nor Write"), "{e}");
    let (r, _, skipped, _) = read(&p, &skip_bad());
    assert_eq!((r.len(), skipped), (2, 2));
    // The streaming reader reports the same error as a value.
    let mut rd = match open(&p, &ReadOptions::default()) {
        Ok(r) => r,
        Err(e) => panic!("{e}"),
    };
    assert!(matches!(rd.next(), Some(Ok(_))));
    match rd.next() {
        Some(Err(TraceError::Malformed { line, path, .. })) => {
            assert_eq!(line, 2);
            assert_eq!(path, p);
        }
        other => panic!("unexpected {other:?}"),
    }
    assert!(rd.next().is_none(), "the reader stops after an error without --skip-bad");
}

#[test]
fn spc() {
    let p = data("spc_sample.spc");
    assert_eq!(detect_format(&p).ok(), Some(Format::SpcCsv));
    let (r, vols, _, _) = read(&p, &ReadOptions::default());
    assert_eq!(vols, vec!["0".to_string(), "1".to_string()]);
    assert_eq!(
        r[0],
        Request { time_ns: 0, volume: 0, op: Op::Write, offset: 303_567 * 512, length: 3584 }
    );
    assert_eq!(
        r[1],
        Request {
            time_ns: 551_080_000,
            volume: 1,
            op: Op::Read,
            offset: 55_590 * 512,
            length: 3072
        }
    );
    assert_eq!(r[2].time_ns, 1_250_000_000);

    let bad = data("spc_bad.spc");
    let e = read_err(&bad, &ReadOptions::default());
    assert!(e.contains("spc_bad.spc:2: negative Size \"-512\""), "{e}");
    let (r, _, skipped, _) = read(&bad, &skip_bad());
    assert_eq!((r.len(), skipped), (3, 2));
}

#[test]
fn blkparse_keeps_one_action_and_ignores_the_summary() {
    let p = data("blkparse_sample.txt");
    assert_eq!(detect_format(&p).ok(), Some(Format::Blkparse));
    let (d, vols, skipped, ignored) = read(&p, &ReadOptions::default());
    assert_eq!(d.len(), 3, "{d:?}");
    assert_eq!(vols, vec!["8,0".to_string(), "8,16".to_string()]);
    assert_eq!(
        d[0],
        Request { time_ns: 3_000, volume: 0, op: Op::Read, offset: 1234 * 512, length: 4096 }
    );
    assert_eq!(
        d[1],
        Request { time_ns: 1_100_000, volume: 0, op: Op::Write, offset: 2048 * 512, length: 8192 }
    );
    assert_eq!(
        d[2],
        Request { time_ns: 2_100_000, volume: 1, op: Op::Read, offset: 0, length: 131_072 }
    );
    // 13 event lines, 3 kept: the other 10 (other actions, the FN flush, the DS discard) are
    // not requests; the summary is never read.
    assert_eq!((skipped, ignored), (0, 10));
    let q = ReadOptions { blkparse_action: BlkAction::Q, ..ReadOptions::default() };
    let (r, _, _, _) = read(&p, &q);
    assert_eq!(r.iter().map(|r| r.time_ns).collect::<Vec<_>>(), vec![0, 1_000_000, 2_000_000]);
    let c = ReadOptions { blkparse_action: BlkAction::C, ..ReadOptions::default() };
    let (r, _, _, _) = read(&p, &c);
    assert_eq!(
        r.iter().map(|r| r.time_ns).collect::<Vec<_>>(),
        vec![200_000, 1_300_000, 2_900_000]
    );

    let bad = data("blkparse_bad.txt");
    let e = read_err(&bad, &ReadOptions::default());
    assert!(e.contains("blkparse_bad.txt:3: time \"0.0000x0000\" is not a number"), "{e}");
    let (r, _, skipped, _) = read(&bad, &skip_bad());
    assert_eq!((r.len(), skipped), (2, 2));
}

#[test]
fn csv_with_column_mapping() {
    let p = data("csv_sample.csv");
    assert_eq!(detect_format(&p).ok(), Some(Format::Csv));
    let (r, vols, _, ignored) = read(&p, &ReadOptions::default());
    assert_eq!(vols, vec!["vol_a".to_string(), "vol_b".to_string()]);
    assert_eq!(ignored, 1, "the header");
    assert_eq!(
        r[1],
        Request { time_ns: 1000, volume: 1, op: Op::Write, offset: 4096, length: 8192 }
    );
    assert_eq!(r[2].op, Op::Read);

    let bad = data("csv_bad.csv");
    let e = read_err(&bad, &ReadOptions::default());
    assert!(e.contains("csv_bad.csv:3: op \"trim\""), "{e}");
    let (r, _, skipped, _) = read(&bad, &skip_bad());
    assert_eq!((r.len(), skipped), (2, 3));
    let e = read_err(&bad, &ReadOptions { format: Some(Format::Csv), ..ReadOptions::default() });
    assert!(e.starts_with(&format!("{}:3:", bad.display())), "{e}");
}

fn write_file(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let p = dir.join(name);
    let res = std::fs::File::create(&p).and_then(|mut f| f.write_all(bytes));
    assert!(res.is_ok(), "{res:?}");
    p
}

#[test]
fn vscsi_versions_and_truncation() {
    let dir = tempfile::tempdir().map_err(|e| e.to_string());
    let dir = dir.as_ref().map(|d| d.path().to_owned()).unwrap_or_else(|e| panic!("{e}"));
    let mut v1 = Vec::new();
    v1.extend_from_slice(&vscsi::encode_v1(1, 4096, 40, 100, 1_000_000));
    v1.extend_from_slice(&vscsi::encode_v1(2, 512, 42, 8, 2_500_000));
    v1.extend_from_slice(&vscsi::encode_v1(3, 0, 0x35, 0, 2_600_000)); // SYNCHRONIZE CACHE
    v1.extend_from_slice(&vscsi::encode_v1(4, 8192, 168, 16, 3_000_000));
    let p = write_file(&dir, "t.vscsi", &v1);
    let (r, vols, skipped, ignored) = read(&p, &ReadOptions::default());
    assert_eq!(vols, vec!["0".to_string()]);
    assert_eq!((r.len(), skipped, ignored), (3, 0, 1));
    assert_eq!(
        r[0],
        Request { time_ns: 1_000_000_000, volume: 0, op: Op::Read, offset: 51_200, length: 4096 }
    );
    assert_eq!(
        r[1],
        Request { time_ns: 2_500_000_000, volume: 0, op: Op::Write, offset: 4096, length: 512 }
    );
    assert_eq!(r[2].op, Op::Read);
    // Content detection (no extension).
    let q = write_file(&dir, "trace.bin", &v1);
    assert_eq!(detect_format(&q).ok(), Some(Format::Vscsi));
    // Through gzip: the version is detected on the decompressed stream.
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    assert!(gz.write_all(&v1).is_ok());
    let gz = gz.finish().unwrap_or_default();
    let g = write_file(&dir, "t.vscsi.gz", &gz);
    let (rg, _, _, _) = read(&g, &ReadOptions::default());
    assert_eq!(rg, r);
    let g = write_file(&dir, "noext", &gz);
    assert_eq!(detect_format(&g).ok(), Some(Format::Vscsi));

    let mut v2 = Vec::new();
    v2.extend_from_slice(&vscsi::encode_v2(1, 4096, 42, 100, 10, 1));
    v2.extend_from_slice(&vscsi::encode_v2(2, 4096, 40, 200, 20, 1));
    v2.extend_from_slice(&vscsi::encode_v2(3, 4096, 40, 300, 30, 1)[..17]);
    let p = write_file(&dir, "t2.vscsi", &v2);
    let e = read_err(&p, &ReadOptions::default());
    assert!(e.contains("t2.vscsi:3: truncated record: 17 of 40 bytes"), "{e}");
    let (r, _, skipped, _) = read(&p, &skip_bad());
    assert_eq!((r.len(), skipped), (2, 1));
    assert_eq!(r[1].offset, 200 * 512);

    let p = write_file(&dir, "junk.vscsi", &[0u8; 100]);
    assert!(matches!(open(&p, &ReadOptions::default()), Err(TraceError::Format { .. })));
}

#[test]
fn oracle_general_truncated_records() {
    let dir = tempfile::tempdir().map_err(|e| e.to_string());
    let dir = dir.as_ref().map(|d| d.path().to_owned()).unwrap_or_else(|e| panic!("{e}"));
    use ember_trace::OracleGeneralRecord as R;
    let mut b = Vec::new();
    b.extend_from_slice(
        &R { clock_time: 1, obj_id: 5, obj_size: 512, next_access_vtime: 2 }.encode(),
    );
    b.extend_from_slice(
        &R { clock_time: 2, obj_id: 5, obj_size: 512, next_access_vtime: -1 }.encode(),
    );
    b.extend_from_slice(&[1, 2, 3]);
    let p = write_file(&dir, "t.oracleGeneral.bin", &b);
    let e = read_err(&p, &ReadOptions::default());
    assert!(e.contains("t.oracleGeneral.bin:3: truncated record: 3 of 24 bytes"), "{e}");
    let (r, _, skipped, _) = read(&p, &skip_bad());
    assert_eq!((r.len(), skipped), (2, 1));
    assert_eq!(
        r[1],
        Request { time_ns: 2_000_000_000, volume: 0, op: Op::Read, offset: 5 * 4096, length: 4096 }
    );
    let k = ember_trace::read_oracle_general_keys(&p).map_err(|e| e.to_string());
    assert!(k.is_err_and(|e| e.contains(":3: truncated")));
}

#[test]
fn ember_truncation_and_bad_headers() {
    let dir = tempfile::tempdir().map_err(|e| e.to_string());
    let dir = dir.as_ref().map(|d| d.path().to_owned()).unwrap_or_else(|e| panic!("{e}"));
    let mut vols = ember_trace::VolumeTable::new();
    vols.intern("a");
    let reqs: Vec<Request> = (0..5)
        .map(|i| Request { time_ns: i, volume: 0, op: Op::Read, offset: i * 4096, length: 4096 })
        .collect();
    let p = dir.join("t.ember");
    let res =
        ember_trace::write_trace(&p, Format::Ember, &ember_trace::Trace::new(reqs, vols), 4096);
    assert!(res.is_ok(), "{res:?}");
    let full = std::fs::read(&p).unwrap_or_default();
    // Cut in the middle of record 4.
    let cut = write_file(&dir, "cut.ember", &full[..full.len() - 24 - 10]);
    let e = read_err(&cut, &ReadOptions::default());
    assert!(e.contains("cut.ember:4: truncated record: 14 of 24 bytes"), "{e}");
    // Cut at a record boundary: the header's count catches it.
    let short = write_file(&dir, "short.ember", &full[..full.len() - 24]);
    let e = read_err(&short, &ReadOptions::default());
    assert!(
        e.contains("short.ember:5: file ends after 4 records but its header promises 5"),
        "{e}"
    );
    // A request reaching past 2^64 bytes is malformed, not a wrapped block index.
    let mut v = ember_trace::VolumeTable::new();
    v.intern("a");
    let far = Request { time_ns: 0, volume: 0, op: Op::Write, offset: u64::MAX - 10, length: 4096 };
    let p = dir.join("far.ember");
    assert!(ember_trace::write_trace(
        &p,
        Format::Ember,
        &ember_trace::Trace::new(vec![far], v),
        4096
    )
    .is_ok());
    let e = read_err(&p, &ReadOptions::default());
    assert!(
        e.contains("far.ember:1: offset 18446744073709551605 + length 4096 overflows 64 bits"),
        "{e}"
    );
    let bad = write_file(&dir, "bad.ember", b"EMBERTRC\x07\0\0\0");
    let e = read_err(&bad, &ReadOptions::default());
    assert!(e.contains("version 7"), "{e}");
}

#[test]
fn detection_by_name_and_content() {
    assert_eq!(detect_format(Path::new("x/y.ember.zst")).ok(), Some(Format::Ember));
    assert_eq!(
        detect_format(Path::new("trace.oracleGeneral.bin.gz")).ok(),
        Some(Format::OracleGeneral)
    );
    assert_eq!(detect_format(Path::new("a.vscsi")).ok(), Some(Format::Vscsi));
    assert!(matches!(detect_format(Path::new("/nonexistent/a.csv")), Err(TraceError::Io { .. })));
    let dir = tempfile::tempdir().map_err(|e| e.to_string());
    let dir = dir.as_ref().map(|d| d.path().to_owned()).unwrap_or_else(|e| panic!("{e}"));
    let p = write_file(&dir, "words.txt", b"hello world\nthis is not a trace\n");
    assert!(matches!(detect_format(&p), Err(TraceError::Format { .. })));
    let p = write_file(&dir, "blob", &[0u8, 1, 2, 3, 4, 5]);
    assert!(matches!(detect_format(&p), Err(TraceError::Format { .. })));
    let mut bad_cols = ReadOptions::default();
    bad_cols.csv.size = Some(4);
    assert!(
        matches!(open(&data("csv_sample.csv"), &bad_cols), Err(TraceError::Invalid(m)) if m.contains("column 4"))
    );
    let bad_bs = ReadOptions { block_size: 0, ..ReadOptions::default() };
    assert!(matches!(open(&data("csv_sample.csv"), &bad_bs), Err(TraceError::Invalid(_))));
}
