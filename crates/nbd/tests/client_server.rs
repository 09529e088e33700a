//! ember's client against ember's server, in process, over TCP and Unix sockets.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "integration-test helpers")]

use std::sync::Arc;

use ember_nbd::server::ServerConfig;
use ember_nbd::{
    proto, Client, ClientBuilder, ClientError, Command, Errno, ExportFlags, ExportMap, MemExport,
};
use ember_testkit::nbd::*;
use ember_testkit::{forward_geometry, forward_writes};

#[test]
fn round_trip_over_tcp_and_unix_with_both_reply_kinds() {
    let (server, export) = serve_mem("disk", 8 << 20);
    for structured in [true, false] {
        let tcp = ClientBuilder::new()
            .export("disk")
            .structured_replies(structured)
            .connect_tcp(server.tcp)
            .unwrap();
        assert_eq!(tcp.info().structured, structured);
        assert_eq!(tcp.size(), 8 << 20);
        assert_eq!(tcp.info().name, "disk");
        assert_eq!(tcp.info().description.as_deref(), Some("a test RAM disk"));
        assert_eq!(tcp.info().max_payload, proto::DEFAULT_MAX_PAYLOAD);
        assert_eq!(tcp.info().min_block, 1);
        assert_eq!(tcp.info().preferred_block, 4096);
        let data = pattern(structured as u64 + 1, 3 << 20);
        tcp.write(12345, &data, false).unwrap();
        let unix = ClientBuilder::new()
            .export("disk")
            .structured_replies(structured)
            .connect_unix(&server.unix)
            .unwrap();
        let mut back = vec![0u8; data.len()];
        unix.read(12345, &mut back).unwrap();
        assert_eq!(back, data);
        tcp.disconnect().unwrap();
        unix.disconnect().unwrap();
    }
    let mut check = vec![0u8; 16];
    ember_nbd::Export::read(export.as_ref(), 12345, &mut check).unwrap();
    assert_eq!(check, pattern(1, 16)[..]);
    server.stop();
}

#[test]
fn flags_follow_the_export() {
    let ro = Arc::new(MemExport::with_flags(
        1 << 20,
        ExportFlags { read_only: true, can_flush: true, ..ExportFlags::default() },
    ));
    let rw = Arc::new(MemExport::new(1 << 20));
    let server =
        serve_with(ExportMap::new().with("ro", "", ro).with("rw", "", rw), ServerConfig::default());
    let client = server.client("ro");
    let flags = client.info().flags;
    assert_eq!(
        flags & !proto::TX_SEND_DF,
        proto::TX_HAS_FLAGS | proto::TX_READ_ONLY | proto::TX_SEND_FLUSH
    );
    assert!(matches!(client.write(0, &[1; 512], false), Err(ClientError::Invalid(_))));
    // Sent anyway, the server answers NBD_EPERM.
    let err = client.submit(Command::Write, 0, 0, 512, &[1; 512]).unwrap().wait().unwrap_err();
    assert!(matches!(err, ClientError::Server { errno: Errno::Perm, .. }), "{err}");
    // TRIM was not advertised: NBD_EINVAL.
    let err = client.submit(Command::Trim, 0, 0, 512, &[]).unwrap().wait().unwrap_err();
    assert!(matches!(err, ClientError::Server { errno: Errno::Inval, .. }), "{err}");
    client.flush().unwrap();

    let rw = server.client("rw");
    assert_eq!(
        rw.info().flags & !proto::TX_SEND_DF,
        proto::TX_HAS_FLAGS
            | proto::TX_SEND_FLUSH
            | proto::TX_SEND_FUA
            | proto::TX_SEND_TRIM
            | proto::TX_SEND_WRITE_ZEROES
            | proto::TX_CAN_MULTI_CONN
    );
    // DF is offered exactly when structured replies are on.
    assert_ne!(rw.info().flags & proto::TX_SEND_DF, 0);
    let simple = ClientBuilder::new()
        .export("rw")
        .structured_replies(false)
        .connect_tcp(server.tcp)
        .unwrap();
    assert_eq!(simple.info().flags & proto::TX_SEND_DF, 0);
    server.stop();
}

#[test]
fn flush_fua_trim_and_zeroes_reach_the_export() {
    let (server, export) = serve_mem("d", 1 << 20);
    let client = server.client("d");
    client.write(0, &[7u8; 65536], true).unwrap();
    assert_eq!(export.fua_requests(), 1);
    client.flush().unwrap();
    client.flush().unwrap();
    assert_eq!(export.flushes(), 2);
    client.trim(0, 4096, false).unwrap();
    client.write_zeroes(8192, 4096, true, true).unwrap();
    assert_eq!(export.fua_requests(), 2);
    let mut back = vec![0xffu8; 65536];
    client.read(0, &mut back).unwrap();
    assert!(back[..4096].iter().all(|&b| b == 0), "trimmed range reads as zero in MemExport");
    assert!(back[4096..8192].iter().all(|&b| b == 7));
    assert!(back[8192..12288].iter().all(|&b| b == 0), "zeroed range");
    assert!(back[12288..].iter().all(|&b| b == 7));
    // Zero-length requests are answered without error.
    assert_eq!(client.submit(Command::Read, 0, 0, 0, &[]).unwrap().wait().unwrap().len(), 0);
    client.submit(Command::Write, 0, 0, 0, &[]).unwrap().wait().unwrap();
    client.disconnect().unwrap();
    server.stop();
}

#[test]
fn errors_past_the_end_follow_the_spec() {
    let (server, _export) = serve_mem("d", 1 << 20);
    for structured in [true, false] {
        let client = ClientBuilder::new()
            .export("d")
            .structured_replies(structured)
            .connect_tcp(server.tcp)
            .unwrap();
        let end = 1u64 << 20;
        let cases = [
            (Command::Read, end - 512, 1024, Errno::Inval),
            (Command::Read, u64::MAX - 10, 512, Errno::Inval),
            (Command::Write, end - 512, 1024, Errno::NoSpc),
            (Command::Trim, end, 1, Errno::Inval),
            (Command::WriteZeroes, end - 1, 2, Errno::NoSpc),
        ];
        for (command, offset, length, expected) in cases {
            let payload =
                if command == Command::Write { vec![1u8; length as usize] } else { Vec::new() };
            let err =
                client.submit(command, 0, offset, length, &payload).unwrap().wait().unwrap_err();
            match err {
                ClientError::Server { errno, message, .. } => {
                    assert_eq!(errno, expected, "{command:?} at {offset}");
                    // Structured errors carry a message.
                    assert_eq!(!message.is_empty(), structured, "{message}");
                }
                other => panic!("{command:?}: unexpected {other}"),
            }
        }
        // Unknown command number, and a flag not valid for the command.
        let err = client.submit(Command::Unknown(77), 0, 0, 0, &[]).unwrap().wait().unwrap_err();
        assert!(matches!(err, ClientError::Server { errno: Errno::Inval, .. }));
        let err = client
            .submit(Command::Read, proto::CMD_FLAG_NO_HOLE, 0, 512, &[])
            .unwrap()
            .wait()
            .unwrap_err();
        assert!(matches!(err, ClientError::Server { errno: Errno::Inval, .. }));
        // The connection is still good.
        assert_works(&client, 3);
        client.disconnect().unwrap();
    }
    server.stop();
}

#[test]
fn many_threads_many_requests_in_flight() {
    let (server, _export) = serve_mem("d", 64 << 20);
    let client = Arc::new(server.client("d"));
    let threads: Vec<_> = (0..8u64)
        .map(|t| {
            let client = Arc::clone(&client);
            std::thread::spawn(move || {
                for round in 0..4u64 {
                    let base = (t * 8 + round * 2) << 20;
                    let data = pattern(t * 100 + round, 1 << 20);
                    let tickets: Vec<_> = data
                        .chunks(64 * 1024)
                        .enumerate()
                        .map(|(i, c)| {
                            client.start_write(base + i as u64 * 65536, c, false).unwrap()
                        })
                        .collect();
                    for t in tickets {
                        t.wait().unwrap();
                    }
                    let reads: Vec<_> = (0..16u64)
                        .map(|i| client.start_read(base + i * 65536, 65536).unwrap())
                        .collect();
                    let mut back = Vec::new();
                    for r in reads {
                        back.extend_from_slice(&r.wait().unwrap());
                    }
                    assert_eq!(back, data);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(client.in_flight(), 0);
    let client = Arc::try_unwrap(client).unwrap();
    client.disconnect().unwrap();
    // The server may count a request after the client has its reply: the counts are final
    // once it has stopped (CI saw 509 of 512 reads counted right after the disconnect).
    let stats = server.stats.clone();
    server.stop();
    let writes = stats.command(Command::Write);
    assert_eq!(writes.count(), 8 * 4 * 16);
    assert_eq!(writes.bytes(), (8 * 4) << 20);
    assert_eq!(writes.latency().count(), 8 * 4 * 16);
    assert_eq!(stats.command(Command::Read).count(), 8 * 4 * 16);
    assert_eq!(stats.command(Command::Read).errors(), 0);
}

#[test]
fn list_info_and_unknown_exports() {
    let server = serve_with(
        ExportMap::new().with("alpha", "first disk", Arc::new(MemExport::new(4096))).with(
            "beta",
            "second disk",
            Arc::new(MemExport::new(8192)),
        ),
        ServerConfig::default(),
    );
    let list =
        Client::list_exports(&ember_nbd::client::Endpoint::Unix(server.unix.clone())).unwrap();
    assert_eq!(
        list,
        vec![
            ("alpha".to_string(), "first disk".to_string()),
            ("beta".to_string(), "second disk".to_string())
        ]
    );
    // The empty name is the default export, and NBD_INFO_NAME gives its canonical name.
    let default = ClientBuilder::new().connect_tcp(server.tcp).unwrap();
    assert_eq!(default.info().name, "alpha");
    assert_eq!(default.size(), 4096);
    let err = ClientBuilder::new().export("gamma").connect_tcp(server.tcp).unwrap_err();
    assert!(
        matches!(err, ClientError::OptionRefused { option: 7, reply, .. } if reply == proto::REP_ERR_UNKNOWN),
        "{err}"
    );
    let uri = Client::connect_uri(&server.unix_uri("beta")).unwrap();
    assert_eq!(uri.size(), 8192);
    server.stop();
}

#[test]
fn structured_read_errors_carry_the_failing_offset() {
    let faulty = Arc::new(FaultyExport { inner: MemExport::new(1 << 20), bad: 3 * 4096 + 100 });
    let server = serve_with(ExportMap::new().with("f", "", faulty), ServerConfig::default());
    let structured = server.client("f");
    let err = structured.start_read(0, 8 * 4096).unwrap().wait().unwrap_err();
    match err {
        ClientError::Server { errno, offset, message } => {
            assert_eq!(errno, Errno::Io);
            assert_eq!(offset, Some(3 * 4096), "first failing block");
            assert!(message.contains("I/O error"), "{message}");
        }
        other => panic!("unexpected {other}"),
    }
    let simple =
        ClientBuilder::new().export("f").structured_replies(false).connect_tcp(server.tcp).unwrap();
    let err = simple.start_read(0, 8 * 4096).unwrap().wait().unwrap_err();
    assert!(matches!(err, ClientError::Server { errno: Errno::Io, offset: None, .. }));
    // Reads avoiding the bad byte succeed on both.
    assert_eq!(structured.start_read(0, 3 * 4096).unwrap().wait().unwrap().len(), 3 * 4096);
    assert_eq!(simple.start_read(4 * 4096, 4096).unwrap().wait().unwrap().len(), 4096);
    assert_eq!(server.stats.command(Command::Read).errors(), 2);
    server.stop();
}

#[test]
fn shutdown_answers_requests_in_flight_then_closes() {
    let gate = Arc::new(GateExport::new(1 << 20));
    let server = serve_with(ExportMap::new().with("g", "", gate.clone()), ServerConfig::default());
    let client = server.client("g");
    client.write(0, &pattern(9, 4096), false).unwrap();
    let tickets: Vec<_> = (0..4).map(|_| client.start_read(0, 4096).unwrap()).collect();
    gate.wait_for_waiters(4);
    let handle = server.running.as_ref().unwrap().shutdown_handle();
    handle.shutdown();
    assert!(handle.is_shutting_down());
    gate.open();
    for t in tickets {
        assert_eq!(t.wait().unwrap(), pattern(9, 4096), "in-flight reads are answered");
    }
    server.stop();
    // The server closed the connection: later requests fail instead of hanging.
    let later = client.submit(Command::Read, 0, 0, 512, &[]).and_then(|t| t.wait());
    assert!(
        matches!(later, Err(ClientError::Disconnected(_)) | Err(ClientError::Io(_))),
        "{later:?}"
    );
}

#[test]
fn stats_count_connections() {
    let (server, _export) = serve_mem("d", 1 << 20);
    let a = server.client("d");
    let b = server.client("d");
    assert_works(&a, 1);
    assert_works(&b, 2);
    a.disconnect().unwrap();
    b.disconnect().unwrap();
    let stats = server.stats.clone();
    server.stop();
    assert_eq!(stats.connections_opened(), 2);
    assert_eq!(stats.connections_open(), 0);
    assert_eq!(stats.command(Command::Disc).count(), 2);
}

#[test]
fn requests_read_after_shutdown_began_get_eshutdown() {
    let gate = Arc::new(GateExport::new(1 << 20));
    let config = ServerConfig { max_in_flight: 1, ..ServerConfig::default() };
    let server = serve_with(ExportMap::new().with("g", "", gate.clone()), config);
    let client = server.client("g");
    let first = client.start_read(0, 4096).unwrap();
    gate.wait_for_waiters(1);
    // The reader holds this one back (the connection has its one request in flight), or it
    // is still in the socket buffer, which stays readable after the server shuts its read
    // side (Linux): either way it is read after shutdown began.
    let second = client.start_read(4096, 4096).unwrap();
    server.running.as_ref().unwrap().shutdown_handle().shutdown();
    gate.open();
    assert_eq!(first.wait().unwrap(), vec![0u8; 4096], "the request in flight is answered");
    let err = second.wait().unwrap_err();
    assert!(matches!(err, ClientError::Server { errno: Errno::Shutdown, .. }), "{err}");
    server.stop();
}

#[test]
fn many_connections_at_once_over_tcp_and_unix() {
    let (server, _export) = serve_mem("d", 32 << 20);
    let tcp = server.tcp;
    let unix = server.unix.clone();
    let threads: Vec<_> = (0..16u64)
        .map(|i| {
            let unix = unix.clone();
            std::thread::spawn(move || {
                let builder = ClientBuilder::new().export("d");
                let client = if i % 2 == 0 {
                    builder.connect_tcp(tcp).unwrap()
                } else {
                    builder.connect_unix(&unix).unwrap()
                };
                let data = pattern(1000 + i, 1 << 20);
                client.write(i << 21, &data, i % 3 == 0).unwrap();
                let mut back = vec![0u8; data.len()];
                client.read(i << 21, &mut back).unwrap();
                assert_eq!(back, data, "connection {i}");
                client.disconnect().unwrap();
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let stats = server.stats.clone();
    server.stop();
    assert_eq!(stats.connections_opened(), 16);
    assert_eq!(stats.command(Command::Write).bytes(), 16 << 20);
}

#[test]
fn client_is_send_and_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Client>();
    assert_send_sync::<ember_nbd::InFlight>();
    assert_send_sync::<ember_nbd::ShutdownHandle>();
}

/// Records the name of the thread each read runs on; says its reads are fast or not.
struct ThreadRecorder {
    inner: MemExport,
    fast: bool,
    threads: std::sync::Mutex<Vec<String>>,
}

impl ember_nbd::Export for ThreadRecorder {
    forward_geometry!();
    fn read_is_fast(&self, _offset: u64, _len: u64) -> bool {
        self.fast
    }
    fn read(&self, offset: u64, buf: &mut [u8]) -> Result<(), ember_nbd::ExportError> {
        let name = std::thread::current().name().unwrap_or("?").to_string();
        self.threads.lock().unwrap().push(name);
        self.inner.read(offset, buf)
    }
    forward_writes!();
}

/// The hit path: a read the export calls fast runs on the connection's own thread
/// (no hand-off to the worker pool), one at a time or pipelined; a read it does not call fast
/// always goes to a worker, so a slow read never holds up the reading of later requests.
#[test]
fn fast_reads_run_on_the_connection_thread() {
    for fast in [true, false] {
        let export = Arc::new(ThreadRecorder {
            inner: MemExport::new(1 << 20),
            fast,
            threads: std::sync::Mutex::new(Vec::new()),
        });
        let server =
            serve_with(ExportMap::new().with("t", "", export.clone()), ServerConfig::default());
        let client = server.client("t");
        client.write(0, &pattern(3, 65536), false).unwrap();
        for i in 0..20u64 {
            let mut back = vec![0u8; 4096];
            client.read(i % 16 * 4096, &mut back).unwrap();
            let want = &pattern(3, 65536)[(i % 16 * 4096) as usize..][..4096];
            assert_eq!(back, want, "read {i} (fast {fast})");
        }
        // Pipelined: 16 reads in flight at once.
        let tickets: Vec<_> =
            (0..16u64).map(|i| client.start_read(i * 4096, 4096).unwrap()).collect();
        let mut back = Vec::new();
        for t in tickets {
            back.extend_from_slice(&t.wait().unwrap());
        }
        assert_eq!(back, pattern(3, 65536), "pipelined reads (fast {fast})");
        client.disconnect().unwrap();
        let threads = export.threads.lock().unwrap().clone();
        assert_eq!(threads.len(), 36);
        let want = if fast { "nbd-conn" } else { "nbd-worker-" };
        for name in &threads {
            assert!(name.starts_with(want), "fast {fast}: a read ran on {name}, not {want}*");
        }
        server.stop();
    }
}
