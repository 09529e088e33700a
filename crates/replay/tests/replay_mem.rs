//! The replayer against ember's NBD server over an in-memory export, in process: a pipelined
//! replay with a prefill verifies every read; bytes changed behind the replay's back are
//! reported with the offset and what was found.

use std::sync::Arc;

use ember_nbd::client::Endpoint;
use ember_nbd::{Export, ExportMap, MemExport};
use ember_replay::pattern::{fill_sector, Stamp};
use ember_replay::{plan, replay, ExportTarget, ReplayConfig, Session};
use ember_testkit::nbd::serve_with;
use ember_trace::{Op, Request, Trace, VolumeTable};

fn trace(n: u64) -> Trace {
    let mut volumes = VolumeTable::new();
    volumes.intern("v");
    let requests = (0..n)
        .map(|i| Request {
            time_ns: i * 1000,
            volume: 0,
            op: if i % 3 == 0 { Op::Write } else { Op::Read },
            offset: (i * 7919 % 256) * 4096,
            length: 4096 * (1 + (i % 4) as u32),
        })
        .collect();
    Trace::new(requests, volumes)
}

#[test]
fn pipelined_replay_verifies_then_catches_corruption() {
    let export = Arc::new(MemExport::new(1 << 20));
    let server = serve_with(ExportMap::new().with("m", "test", export.clone()), Default::default());
    let endpoint = Endpoint::Tcp(server.tcp.to_string());
    let session = Session::connect(&endpoint, &["m".to_string()], 3).unwrap();
    assert_eq!(session.targets(), &[ExportTarget { name: "m".into(), size: 1 << 20 }]);
    let p = plan(&trace(600), &[Some(0)], session.targets().to_vec()).unwrap();
    let config = ReplayConfig { queue_depth: 6, prefill: true, seed: 5, ..ReplayConfig::default() };
    let r = replay(&p, &session, &config).unwrap();
    assert_eq!(r.ops[0].count, 400);
    assert_eq!(r.ops[1].count, 200);
    assert_eq!(r.verification.reads_verified, 400, "{r}");
    assert_eq!(r.verification.reads_failed, 0);
    assert!(!r.failed());

    // A read-only plan over blocks 128..192, prefilled again (the writes above left other
    // generations there), then replayed as if prefilled.
    let mut volumes = VolumeTable::new();
    volumes.intern("v");
    let reads: Vec<Request> = (0..64)
        .map(|i| Request {
            time_ns: 0,
            volume: 0,
            op: Op::Read,
            offset: (128 + i) * 4096,
            length: 4096,
        })
        .collect();
    let reads = Trace::new(reads, volumes);
    let p = plan(&reads, &[Some(0)], session.targets().to_vec()).unwrap();
    let r = replay(&p, &session, &ReplayConfig { prefill: true, ..config.clone() }).unwrap();
    assert_eq!(r.verification.reads_verified, 64);
    // Change one sector to foreign bytes and another to a stale stamp of its neighbour.
    export.write(130 * 4096 + 512, &[0x5a; 512], false).unwrap();
    let mut stale = [0u8; 512];
    fill_sector(&mut stale, &Stamp { sector: 140 * 8 + 1, generation: 0, export: 0, seed: 5 });
    export.write(140 * 4096, &stale, false).unwrap();
    let assume = ReplayConfig { prefill: false, assume_prefilled: true, ..config };
    let r = replay(&p, &session, &assume).unwrap();
    assert!(r.failed());
    assert_eq!(r.verification.reads_failed, 2, "{r}");
    assert_eq!(r.verification.sectors_failed, 2);
    assert_eq!(r.verification.reads_verified, 62);
    let f = &r.verification.first_failures;
    assert_eq!(f[0].offset, 130 * 4096 + 512);
    assert_eq!(f[0].found, "bytes that are not a replay stamp");
    assert_eq!(f[1].offset, 140 * 4096);
    assert!(f[1].found.starts_with("sector 1121 generation 0"), "{}", f[1].found);
    session.close().unwrap();
    server.stop();
}

#[test]
fn several_connections_need_multi_conn() {
    let single = MemExport::with_flags(1 << 20, ember_nbd::ExportFlags::default());
    let server =
        serve_with(ExportMap::new().with("s", "test", Arc::new(single)), Default::default());
    let endpoint = Endpoint::Tcp(server.tcp.to_string());
    let err = Session::connect(&endpoint, &["s".to_string()], 2).err().map(|e| e.to_string());
    assert!(err.as_deref().unwrap_or("").contains("MULTI_CONN"), "{err:?}");
    let one = Session::connect(&endpoint, &["s".to_string()], 1).unwrap();
    one.close().unwrap();
    server.stop();
}
