//! Limits a client cannot exceed (connections, handshake options, the
//! whole-handshake deadline, the payload ceiling) and owner-only Unix sockets.

use std::os::unix::fs::PermissionsExt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ember_nbd::server::{ServerConfig, MAX_PAYLOAD_CEILING};
use ember_nbd::{proto, ExportMap, MemExport, Server, ServerError};
use ember_testkit::nbd::*;

fn exports() -> ExportMap {
    ExportMap::new().with("d", "", Arc::new(MemExport::new(1 << 20)))
}

/// 1000 NBD_OPT_LISTs, each sent once the previous one is answered: the server answers
/// `max_handshake_options` of them and hangs up (nbdkit's rule), instead of answering
/// forever.
#[test]
fn a_thousand_option_lists_are_cut_off() {
    let server = serve_with(exports(), ServerConfig::default());
    let mut raw = Raw::connect(server.tcp);
    raw.greeting();
    raw.send(&proto::FLAG_C_FIXED_NEWSTYLE.to_be_bytes());
    let mut acks = 0;
    'options: for _ in 0..1000 {
        let mut option = IHAVEOPT.to_be_bytes().to_vec();
        option.extend_from_slice(&proto::OPT_LIST.to_be_bytes());
        option.extend_from_slice(&0u32.to_be_bytes());
        if std::io::Write::write_all(&mut raw.s, &option).is_err() {
            break;
        }
        loop {
            let mut magic = [0u8; 8];
            if std::io::Read::read_exact(&mut raw.s, &mut magic).is_err() {
                break 'options;
            }
            assert_eq!(u64::from_be_bytes(magic), REPLY_MAGIC);
            let (_, kind, len) = (raw.u32(), raw.u32(), raw.u32());
            raw.bytes(len as usize);
            match kind {
                k if k == proto::REP_ACK => {
                    acks += 1;
                    break;
                }
                k if k == proto::REP_SERVER => {}
                other => panic!("unexpected reply {other:#x}"),
            }
        }
    }
    assert_eq!(acks, ServerConfig::default().max_handshake_options, "answered, then cut off");
    let good = server.client("d");
    assert_works(&good, 1);
    good.disconnect().unwrap();
    server.stop();
}

/// A client that keeps the handshake alive by trickling option bytes is dropped at the
/// whole-handshake deadline, although no single read waits long.
#[test]
fn a_trickled_handshake_hits_the_deadline() {
    let config = ServerConfig {
        handshake_deadline: Some(Duration::from_secs(1)),
        ..ServerConfig::default()
    };
    let server = serve_with(exports(), config);
    let mut raw = Raw::connect(server.tcp);
    raw.greeting();
    raw.send(&proto::FLAG_C_FIXED_NEWSTYLE.to_be_bytes());
    let mut option = IHAVEOPT.to_be_bytes().to_vec();
    option.extend_from_slice(&proto::OPT_INFO.to_be_bytes());
    option.extend_from_slice(&60_000u32.to_be_bytes());
    raw.send(&option);
    let started = Instant::now();
    let mut closed = false;
    // Without the deadline, one byte every 100 ms would take 100 minutes to finish the
    // option and keep the connection for all that time.
    while started.elapsed() < Duration::from_secs(60) {
        if std::io::Write::write_all(&mut raw.s, &[0]).is_err() {
            closed = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
        let handle = server.running.as_ref().unwrap().shutdown_handle();
        if handle.connections() == 0 {
            closed = true;
            break;
        }
    }
    assert!(closed, "the trickling client was never dropped");
    server.stop();
}

/// One connection more than `max_connections` is accepted and closed at once; when one
/// goes, a new one is served.
#[test]
fn connections_beyond_the_limit_are_closed() {
    let config = ServerConfig { max_connections: 2, ..ServerConfig::default() };
    let server = serve_with(exports(), config);
    let handle = server.running.as_ref().unwrap().shutdown_handle();
    let a = server.client("d");
    let b = server.client("d");
    let mut third = Raw::connect(server.tcp);
    assert!(third.closed_by_server(), "a third connection is refused");
    assert_works(&a, 1);
    a.disconnect().unwrap();
    let started = Instant::now();
    while handle.connections() > 1 {
        assert!(started.elapsed() < Duration::from_secs(30));
        std::thread::sleep(Duration::from_millis(20));
    }
    let c = server.client("d");
    assert_works(&c, 2);
    assert_works(&b, 3);
    c.disconnect().unwrap();
    b.disconnect().unwrap();
    server.stop();
}

/// The advertised maximum payload cannot be configured above 32 MiB, and is what clients see.
#[test]
fn the_payload_ceiling_holds() {
    let dir = tempfile::tempdir().unwrap();
    let too_big = Server::builder(Arc::new(exports()))
        .config(ServerConfig { max_payload: MAX_PAYLOAD_CEILING + 1, ..ServerConfig::default() })
        .listen_unix(dir.path().join("s"))
        .unwrap()
        .build();
    assert!(matches!(too_big, Err(ServerError::Config(ref m)) if m.contains("ceiling")));
    let server = serve_with(exports(), ServerConfig::default());
    let client = server.client("d");
    assert_eq!(client.info().max_payload, MAX_PAYLOAD_CEILING);
    client.disconnect().unwrap();
    server.stop();
}

/// Unix sockets are created owner-only unless another mode is asked for, and a live socket
/// is never replaced.
#[test]
fn unix_sockets_are_owner_only() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nbd.sock");
    let server = Server::builder(Arc::new(exports())).listen_unix(&path).unwrap().build().unwrap();
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let running = server.spawn().unwrap();
    let uri = format!("nbd+unix:///d?socket={}", path.display());
    let client = ember_nbd::Client::connect_uri(&uri).unwrap();
    assert_works(&client, 1);
    assert!(
        Server::builder(Arc::new(exports())).listen_unix(&path).is_err(),
        "a live socket is not replaced"
    );
    client.disconnect().unwrap();
    running.shutdown().unwrap();

    let group = dir.path().join("group.sock");
    let server = Server::builder(Arc::new(exports()))
        .listen_unix_mode(&group, 0o660)
        .unwrap()
        .build()
        .unwrap();
    assert_eq!(std::fs::metadata(&group).unwrap().permissions().mode() & 0o777, 0o660);
    drop(server);
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "staging directories removed: {leftovers:?}");
}
