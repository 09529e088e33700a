//! Corrupted input never panics: every line or record is a request, a non-request or a
//! counted bad record.

use std::path::{Path, PathBuf};

use ember_trace::{read_trace, Format, ReadOptions};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data").join(name)
}

/// Flip, drop or insert a few bytes.
fn mutate(rng: &mut Xoshiro256PlusPlus, src: &[u8]) -> Vec<u8> {
    let mut b = src.to_vec();
    for _ in 0..rng.gen_range(1..6) {
        if b.is_empty() {
            break;
        }
        let i = rng.gen_range(0..b.len());
        match rng.gen_range(0..4) {
            0 => b[i] = rng.gen(),
            1 => {
                b.remove(i);
            }
            2 => b.insert(i, b"-,x9 +\n"[rng.gen_range(0..7)]),
            _ => b.truncate(i),
        }
    }
    b
}

#[test]
fn mutated_text_traces_account_for_every_line() {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(7);
    let dir = tempfile::tempdir().map_err(|e| e.to_string());
    let dir = dir.as_ref().map(|d| d.path().to_owned()).unwrap_or_else(|e| panic!("{e}"));
    for (name, format) in [
        ("msr_sample.csv", Format::MsrCsv),
        ("spc_sample.spc", Format::SpcCsv),
        ("csv_sample.csv", Format::Csv),
    ] {
        let src = std::fs::read(data(name)).unwrap_or_default();
        assert!(!src.is_empty());
        for round in 0..300 {
            let bytes = mutate(&mut rng, &src);
            let p = dir.join(format!("{round}-{name}"));
            assert!(std::fs::write(&p, &bytes).is_ok());
            let opts =
                ReadOptions { format: Some(format), skip_bad: true, ..ReadOptions::default() };
            match read_trace(&p, &opts) {
                Ok((t, s)) => {
                    let lines = bytes.split(|&b| b == b'\n').count() as u64
                        - u64::from(bytes.ends_with(b"\n"));
                    let lines = if bytes.is_empty() { 0 } else { lines };
                    assert_eq!(
                        t.requests.len() as u64 + s.skipped + s.ignored,
                        lines,
                        "{name} round {round}"
                    );
                }
                Err(e) => panic!("{name} round {round}: skip-bad reading failed: {e}"),
            }
        }
    }
}

#[test]
fn mutated_blkparse_never_panics() {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(8);
    let dir = tempfile::tempdir().map_err(|e| e.to_string());
    let dir = dir.as_ref().map(|d| d.path().to_owned()).unwrap_or_else(|e| panic!("{e}"));
    let src = std::fs::read(data("blkparse_sample.txt")).unwrap_or_default();
    let mut requests = 0;
    for round in 0..300 {
        let p = dir.join(format!("{round}.blkparse"));
        assert!(std::fs::write(&p, mutate(&mut rng, &src)).is_ok());
        let opts = ReadOptions { skip_bad: true, ..ReadOptions::default() };
        match read_trace(&p, &opts) {
            Ok((t, _)) => requests += t.requests.len(),
            Err(e) => panic!("round {round}: {e}"),
        }
    }
    // Most mutations leave most of the three D events intact.
    assert!(requests > 300, "{requests}");
}

#[test]
fn random_binary_files_never_panic() {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(9);
    let dir = tempfile::tempdir().map_err(|e| e.to_string());
    let dir = dir.as_ref().map(|d| d.path().to_owned()).unwrap_or_else(|e| panic!("{e}"));
    for round in 0..60 {
        let len: usize = rng.gen_range(0..400);
        let mut bytes: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
        if round % 2 == 0 && bytes.len() >= 28 {
            bytes[..8].copy_from_slice(b"EMBERTRC");
            bytes[8..12].copy_from_slice(&1u32.to_le_bytes());
            bytes[12..16].copy_from_slice(&24u32.to_le_bytes());
            bytes[24..28].copy_from_slice(&(round as u32 % 3).to_le_bytes());
        }
        if round % 8 != 0 {
            // Keep most oracleGeneral volume ids (obj_id's top 16 bits) small: a random one
            // names up to 65536 volumes, slow to build in an unoptimised test build.
            for i in (10..bytes.len()).step_by(24) {
                bytes[i] = 0;
                if i + 1 < bytes.len() {
                    bytes[i + 1] = 0;
                }
            }
        }
        let p = dir.join(format!("{round}.bin"));
        assert!(std::fs::write(&p, &bytes).is_ok());
        for format in [Format::Vscsi, Format::OracleGeneral, Format::Ember] {
            for skip_bad in [false, true] {
                let opts = ReadOptions { format: Some(format), skip_bad, ..ReadOptions::default() };
                let r = read_trace(&p, &opts);
                if format == Format::OracleGeneral && skip_bad {
                    // Every whole record decodes; a partial tail is the one skipped record.
                    let (t, s) = r.unwrap_or_else(|e| panic!("round {round}: {e}"));
                    assert_eq!(
                        t.requests.len() + s.skipped as usize,
                        len.div_ceil(24),
                        "round {round}"
                    );
                }
            }
        }
    }
}
