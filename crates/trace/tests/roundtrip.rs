//! write → read round trips for every writable format, plain, gzip and zstd.

use std::path::{Path, PathBuf};

use ember_trace::{
    block_key, read_oracle_general_records, read_trace, write_trace, Format, Op, ReadOptions,
    Request, Trace, TraceError, TraceWriter, VolumeTable,
};

fn tmp() -> (tempfile::TempDir, PathBuf) {
    match tempfile::tempdir() {
        Ok(d) => {
            let p = d.path().to_owned();
            (d, p)
        }
        Err(e) => panic!("{e}"),
    }
}

/// A trace every writable format can hold exactly: times in whole microseconds after 1970
/// (MSR's filetime has 100 ns ticks), sector-aligned offsets (SPC), numeric volume names
/// (SPC's ASU), MSR-style names elsewhere.
fn sample(names: &[&str]) -> Trace {
    let mut v = VolumeTable::new();
    for n in names {
        v.intern(n);
    }
    let n = names.len() as u32;
    let requests = (0..200u64)
        .map(|i| Request {
            time_ns: 1_172_163_600_000_000_000 + i * 1_000_500,
            volume: (i as u32 * 7) % n,
            op: if i % 3 == 0 { Op::Write } else { Op::Read },
            offset: (i * 37 % 50) * 512 * 3,
            length: ((i % 5) as u32 + 1) * 1024,
        })
        .collect();
    Trace::new(requests, v)
}

fn read(path: &Path, format: Format) -> Trace {
    let opts = ReadOptions { format: Some(format), ..ReadOptions::default() };
    match read_trace(path, &opts) {
        Ok((t, s)) => {
            assert_eq!(s.skipped, 0);
            assert_eq!(s.format, format);
            t
        }
        Err(e) => panic!("{}: {e}", path.display()),
    }
}

/// Compare request lists, reporting the first difference only.
fn assert_same(got: &[Request], want: &[Request], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: request count");
    if let Some(i) = (0..got.len()).find(|&i| got[i] != want[i]) {
        panic!("{what}: request {i} differs: got {:?}, want {:?}", got[i], want[i]);
    }
}

fn round_trip(format: Format, names: &[&str], ext: &str) {
    let (_d, dir) = tmp();
    let t = sample(names);
    for comp in ["", ".gz", ".zst"] {
        let p = dir.join(format!("t.{ext}{comp}"));
        let res = write_trace(&p, format, &t, 4096);
        assert!(res.is_ok(), "{format}{comp}: {res:?}");
        if !comp.is_empty() {
            let raw = std::fs::read(&p).unwrap_or_default();
            let magic: &[u8] =
                if comp == ".gz" { &[0x1f, 0x8b] } else { &[0x28, 0xb5, 0x2f, 0xfd] };
            assert!(raw.starts_with(magic), "{format}{comp} is not compressed");
        }
        // Read back both with the format given and detected.
        let back = read(&p, format);
        assert_same(&back.requests, &t.requests, &format!("{format}{comp}"));
        assert_eq!(back.volumes, t.volumes, "{format}{comp}");
        if format != Format::Csv || ext != "csv" {
            let detected =
                read_trace(&p, &ReadOptions::default()).map(|(t, s)| (t.requests.len(), s.format));
            assert_eq!(detected.ok(), Some((t.requests.len(), format)), "{format}{comp} detection");
        }
    }
}

#[test]
fn msr_round_trip() {
    round_trip(Format::MsrCsv, &["web_0", "prxy_1", "src1_2"], "csv");
}

#[test]
fn spc_round_trip() {
    round_trip(Format::SpcCsv, &["0", "1"], "spc");
}

#[test]
fn csv_round_trip() {
    round_trip(Format::Csv, &["web_0", "vol b"], "csv");
}

#[test]
fn ember_round_trip() {
    round_trip(Format::Ember, &["web_0", "prxy_1", "ünïcode"], "ember");
}

#[test]
fn ember_streaming_writer_patches_the_count() {
    let (_d, dir) = tmp();
    let t = sample(&["a", "b"]);
    for name in ["s.ember", "s.ember.zst"] {
        let p = dir.join(name);
        let mut w = match TraceWriter::create(&p, Format::Ember, &t.volumes) {
            Ok(w) => w,
            Err(e) => panic!("{e}"),
        };
        for r in &t.requests {
            assert!(w.write(r).is_ok());
        }
        assert_eq!(w.written(), 200);
        assert!(w.finish().is_ok());
        assert_same(&read(&p, Format::Ember).requests, &t.requests, name);
    }
    let raw = std::fs::read(dir.join("s.ember")).unwrap_or_default();
    assert_eq!(raw.get(16..24), Some(&200u64.to_le_bytes()[..]), "count patched into the header");
    assert!(TraceWriter::create(&dir.join("x.bin"), Format::OracleGeneral, &t.volumes).is_err());
    assert!(TraceWriter::create(&dir.join("x.vscsi"), Format::Vscsi, &t.volumes).is_err());
}

#[test]
fn oracle_general_round_trip_is_per_block() {
    let (_d, dir) = tmp();
    let mut v = VolumeTable::new();
    v.intern("web_0");
    v.intern("web_1");
    let t = Trace::new(
        vec![
            Request { time_ns: 1_000_000_000, volume: 0, op: Op::Write, offset: 0, length: 8192 },
            Request { time_ns: 2_500_000_000, volume: 1, op: Op::Read, offset: 4096, length: 100 },
            Request { time_ns: 3_000_000_000, volume: 0, op: Op::Read, offset: 4095, length: 2 },
        ],
        v,
    );
    for comp in ["", ".gz", ".zst"] {
        let p = dir.join(format!("t.oracleGeneral.bin{comp}"));
        assert!(write_trace(&p, Format::OracleGeneral, &t, 4096).is_ok());
        let recs = read_oracle_general_records(&p).unwrap_or_default();
        let ids: Vec<u64> = recs.iter().map(|r| r.obj_id).collect();
        assert_eq!(
            ids,
            vec![
                block_key(0, 0),
                block_key(0, 1),
                block_key(1, 1),
                block_key(0, 0),
                block_key(0, 1)
            ]
        );
        let next: Vec<i64> = recs.iter().map(|r| r.next_access_vtime).collect();
        assert_eq!(next, vec![4, 5, -1, -1, -1], "1-based index of the next access");
        let times: Vec<u32> = recs.iter().map(|r| r.clock_time).collect();
        assert_eq!(times, vec![1, 1, 2, 3, 3]);
        assert!(recs.iter().all(|r| r.obj_size == 4096));
        let back = read(&p, Format::OracleGeneral);
        assert_eq!(back.requests.len(), 5);
        assert_eq!(back.volumes.names(), &["0".to_string(), "1".to_string()]);
        assert_eq!(
            back.requests[2],
            Request { time_ns: 2_000_000_000, volume: 1, op: Op::Read, offset: 4096, length: 4096 }
        );
    }
}

#[test]
fn unrepresentable_requests_are_errors_not_garbage() {
    let (_d, dir) = tmp();
    let t = sample(&["web_0"]);
    // SPC names volumes by number.
    let e = write_trace(&dir.join("x.spc"), Format::SpcCsv, &t, 4096);
    assert!(matches!(e, Err(TraceError::Invalid(ref m)) if m.contains("not a number")), "{e:?}");
    let mut v = VolumeTable::new();
    v.intern("0");
    let odd = Trace::new(
        vec![Request { time_ns: 0, volume: 0, op: Op::Read, offset: 100, length: 1 }],
        v,
    );
    let e = write_trace(&dir.join("y.spc"), Format::SpcCsv, &odd, 4096);
    assert!(matches!(e, Err(TraceError::Invalid(ref m)) if m.contains("multiple of 512")), "{e:?}");
    // CSV cannot hold a comma in a volume name.
    let mut v = VolumeTable::new();
    v.intern("a,b");
    let comma =
        Trace::new(vec![Request { time_ns: 0, volume: 0, op: Op::Read, offset: 0, length: 1 }], v);
    assert!(write_trace(&dir.join("z.csv"), Format::Csv, &comma, 4096).is_err());
    // Vscsi and blkparse are read-only.
    assert!(write_trace(&dir.join("w.vscsi"), Format::Vscsi, &t, 4096).is_err());
    assert!(write_trace(&dir.join("w.blkparse"), Format::Blkparse, &t, 4096).is_err());
}

/// An ember trace streamed into a FIFO (`ember trace gen -o fifo`, or a pipe) cannot have its
/// record count patched at the end: the writer must finish without an error (it used to fail
/// with "Illegal seek" after writing everything) and the reader must accept the count left
/// "unknown".
#[test]
fn ember_trace_written_into_a_fifo_finishes_and_reads_back() {
    let (_d, dir) = tmp();
    let fifo = dir.join("t.ember");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status();
    assert!(made.is_ok_and(|s| s.success()), "mkfifo failed");
    let t = sample(&["a", "b"]);
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || read_trace(&fifo, &ReadOptions::default()))
    };
    let mut w = match TraceWriter::create(&fifo, Format::Ember, &t.volumes) {
        Ok(w) => w,
        Err(e) => panic!("create: {e}"),
    };
    for r in &t.requests {
        if let Err(e) = w.write(r) {
            panic!("write: {e}");
        }
    }
    let finished = w.finish();
    assert!(finished.is_ok(), "finish on a FIFO: {:?}", finished.err());
    match reader.join() {
        Ok(Ok((got, _))) => assert_same(&got.requests, &t.requests, "ember through a FIFO"),
        Ok(Err(e)) => panic!("read: {e}"),
        Err(_) => panic!("reader panicked"),
    }
}
