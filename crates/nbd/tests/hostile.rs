//! Hostile and broken clients over raw sockets. Each gets the answer `doc/proto.md`
//! prescribes, while another, well-behaved client stays connected and keeps working.

use std::sync::Arc;

use ember_nbd::server::ServerConfig;
use ember_nbd::{proto, Command, ExportMap, MemExport};
use ember_testkit::nbd::*;

const SIZE: u64 = 1 << 20;
const MAX_PAYLOAD: u32 = 64 * 1024;

fn server() -> TestServer {
    let config = ServerConfig {
        max_payload: MAX_PAYLOAD,
        discard_limit: 4 << 20,
        max_in_flight_bytes: 8 << 20,
        ..ServerConfig::default()
    };
    serve_with(
        ExportMap::new().with("d", "hostile target", Arc::new(MemExport::new(SIZE))).with(
            "good",
            "",
            Arc::new(MemExport::new(SIZE)),
        ),
        config,
    )
}

#[test]
fn garbage_during_the_handshake_closes_only_that_connection() {
    let server = server();
    let good = server.client("good");
    assert_works(&good, 1);

    // Unknown client flags.
    let mut raw = Raw::connect(server.tcp);
    raw.greeting();
    raw.send(&0xdead_beefu32.to_be_bytes());
    assert!(raw.closed_by_server(), "unknown client flags end the session");
    assert_works(&good, 2);

    // Garbage instead of an option.
    let mut raw = Raw::connect(server.tcp);
    raw.greeting();
    raw.send(&1u32.to_be_bytes());
    raw.send(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    assert!(raw.closed_by_server(), "bad option magic ends the session");
    assert_works(&good, 3);

    // An option claiming a gigabyte of data.
    let mut raw = Raw::connect(server.tcp);
    raw.greeting();
    raw.send(&1u32.to_be_bytes());
    let mut header = IHAVEOPT.to_be_bytes().to_vec();
    header.extend_from_slice(&99u32.to_be_bytes());
    header.extend_from_slice(&(1u32 << 30).to_be_bytes());
    raw.send(&header);
    assert!(raw.closed_by_server(), "oversized option data ends the session");
    assert_works(&good, 4);

    // Garbage without even reading the greeting, and a client that vanishes at once.
    let mut raw = Raw::connect(server.tcp);
    raw.send(&[0xffu8; 64]);
    assert!(raw.closed_by_server());
    drop(Raw::connect(server.tcp));
    // NBD_OPT_EXPORT_NAME for an export that does not exist: the server must terminate.
    let mut raw = Raw::connect(server.tcp);
    raw.greeting();
    raw.send(&3u32.to_be_bytes());
    raw.option(proto::OPT_EXPORT_NAME, b"nope");
    assert!(raw.closed_by_server());
    assert_works(&good, 5);
    good.disconnect().unwrap();
    server.stop();
}

#[test]
fn option_haggling_answers_every_option() {
    let server = server();
    let good = server.client("good");
    let mut raw = Raw::connect(server.tcp);
    let flags = raw.greeting();
    assert_eq!(flags, proto::FLAG_FIXED_NEWSTYLE | proto::FLAG_NO_ZEROES);
    raw.send(&proto::FLAG_C_FIXED_NEWSTYLE.to_be_bytes()); // no NO_ZEROES

    raw.option(99, b"whatever");
    let (option, kind, _) = raw.option_reply();
    assert_eq!((option, kind), (99, proto::REP_ERR_UNSUP));
    raw.option(proto::OPT_STARTTLS, &[]);
    assert_eq!(raw.option_reply().1, proto::REP_ERR_POLICY, "NOTLS server (as nbdkit --tls=off)");
    raw.option(proto::OPT_SET_META_CONTEXT, &[0; 8]);
    assert_eq!(raw.option_reply().1, proto::REP_ERR_UNSUP);
    raw.option(proto::OPT_LIST, b"x");
    assert_eq!(raw.option_reply().1, proto::REP_ERR_INVALID);
    raw.option(proto::OPT_STRUCTURED_REPLY, b"x");
    assert_eq!(raw.option_reply().1, proto::REP_ERR_INVALID);
    // Name length running past the option data.
    raw.option(proto::OPT_GO, &[0, 0, 0, 50, b'd', 0, 0]);
    assert_eq!(raw.option_reply().1, proto::REP_ERR_INVALID);
    assert_works(&good, 1);

    // NBD_OPT_INFO on an unknown export, then on "d" asking for name, description, sizes.
    raw.option(proto::OPT_INFO, &[0, 0, 0, 1, b'z', 0, 0]);
    assert_eq!(raw.option_reply().1, proto::REP_ERR_UNKNOWN);
    raw.option(proto::OPT_INFO, &[0, 0, 0, 1, b'd', 0, 3, 0, 1, 0, 2, 0, 3]);
    let mut seen = Vec::new();
    loop {
        let (option, kind, data) = raw.option_reply();
        assert_eq!(option, proto::OPT_INFO);
        if kind == proto::REP_ACK {
            break;
        }
        assert_eq!(kind, proto::REP_INFO);
        let item = u16::from_be_bytes([data[0], data[1]]);
        match item {
            0 => {
                assert_eq!(data.len(), 12);
                assert_eq!(u64::from_be_bytes(data[2..10].try_into().unwrap()), SIZE);
            }
            1 => assert_eq!(&data[2..], b"d"),
            2 => assert_eq!(&data[2..], b"hostile target"),
            3 => {
                assert_eq!(data.len(), 14);
                assert_eq!(u32::from_be_bytes(data[2..6].try_into().unwrap()), 1);
                assert_eq!(u32::from_be_bytes(data[6..10].try_into().unwrap()), 4096);
                assert_eq!(u32::from_be_bytes(data[10..14].try_into().unwrap()), MAX_PAYLOAD);
            }
            other => panic!("unexpected info {other}"),
        }
        seen.push(item);
    }
    seen.sort();
    assert_eq!(seen, vec![0, 1, 2, 3]);

    // NBD_OPT_LIST.
    raw.option(proto::OPT_LIST, &[]);
    let mut names = Vec::new();
    loop {
        let (_, kind, data) = raw.option_reply();
        if kind == proto::REP_ACK {
            break;
        }
        assert_eq!(kind, proto::REP_SERVER);
        let len = u32::from_be_bytes(data[0..4].try_into().unwrap()) as usize;
        names.push(String::from_utf8(data[4..4 + len].to_vec()).unwrap());
    }
    assert_eq!(names, vec!["d", "good"]);

    // NBD_OPT_EXPORT_NAME without NO_ZEROES: size, flags, then 124 zero bytes.
    raw.option(proto::OPT_EXPORT_NAME, b"d");
    assert_eq!(raw.u64(), SIZE);
    let tx = raw.u16();
    assert_eq!(tx & proto::TX_HAS_FLAGS, 1);
    assert_eq!(tx & proto::TX_SEND_DF, 0, "no DF without structured replies");
    assert_eq!(raw.bytes(124), vec![0u8; 124]);
    assert_eq!(raw.ask(0, proto::CMD_READ, 5, 0, 512, &[]), (0, 5));
    assert_eq!(raw.bytes(512), vec![0u8; 512]);

    // NBD_OPT_ABORT is acknowledged, then the server closes.
    let mut abort = Raw::connect(server.tcp);
    abort.greeting();
    abort.send(&3u32.to_be_bytes());
    abort.option(proto::OPT_ABORT, &[]);
    assert_eq!(abort.option_reply().1, proto::REP_ACK);
    assert!(abort.closed_by_server());
    assert_works(&good, 2);
    drop(raw);
    good.disconnect().unwrap();
    server.stop();
}

#[test]
fn bad_request_magic_closes_the_connection() {
    let server = server();
    let good = server.client("good");
    let (mut raw, _, _) = Raw::go(server.tcp, "d", false);
    assert_eq!(raw.ask(0, proto::CMD_READ, 1, 0, 512, &[]), (0, 1));
    raw.bytes(512);
    let mut bad = vec![0x12, 0x34, 0x56, 0x78];
    bad.extend_from_slice(&[0u8; 24]);
    raw.send(&bad);
    assert!(raw.closed_by_server(), "bad magic: hard disconnect");
    assert_works(&good, 1);
    good.disconnect().unwrap();
    server.stop();
}

#[test]
fn requests_past_the_end_get_einval_or_enospc() {
    let server = server();
    let good = server.client("good");
    // Simple replies.
    let (mut raw, size, _) = Raw::go(server.tcp, "d", false);
    assert_eq!(size, SIZE);
    assert_eq!(
        raw.ask(0, proto::CMD_READ, 1, SIZE - 100, 512, &[]),
        (22, 1),
        "read past the end: NBD_EINVAL, no payload"
    );
    raw.request(0, proto::CMD_WRITE, 2, SIZE - 100, 512, &[0xaa; 512]);
    assert_eq!(raw.simple_reply(), (28, 2), "write past the end: NBD_ENOSPC");
    assert_eq!(
        raw.ask(0, proto::CMD_TRIM, 3, SIZE, 1, &[]),
        (22, 3),
        "trim past the end: NBD_EINVAL"
    );
    assert_eq!(
        raw.ask(0, proto::CMD_WRITE_ZEROES, 4, u64::MAX - 1, 4096, &[]),
        (28, 4),
        "write-zeroes past the end: NBD_ENOSPC"
    );
    // The payload of the refused write was consumed: the stream is still in step.
    assert_eq!(raw.ask(0, proto::CMD_WRITE, 5, 0, 4, &[1, 2, 3, 4]), (0, 5));
    assert_eq!(raw.ask(0, proto::CMD_READ, 6, 0, 4, &[]), (0, 6));
    assert_eq!(raw.bytes(4), vec![1, 2, 3, 4]);
    assert_works(&good, 1);

    // Structured replies: an NBD_REPLY_TYPE_ERROR chunk with DONE and a message.
    let (mut raw, _, _) = Raw::go(server.tcp, "d", true);
    raw.request(0, proto::CMD_READ, 7, SIZE - 1, 2, &[]);
    let (flags, kind, cookie, payload) = raw.chunk();
    assert_eq!((flags, kind, cookie), (proto::REPLY_FLAG_DONE, proto::REPLY_TYPE_ERROR, 7));
    assert_eq!(u32::from_be_bytes(payload[0..4].try_into().unwrap()), 22);
    let message_len = u16::from_be_bytes([payload[4], payload[5]]) as usize;
    assert_eq!(payload.len(), 6 + message_len);
    assert!(String::from_utf8_lossy(&payload[6..]).contains("beyond export size"));
    raw.request(0, proto::CMD_READ, 8, SIZE - 8, 8, &[]);
    let (flags, kind, cookie, payload) = raw.chunk();
    assert_eq!((flags, kind, cookie), (proto::REPLY_FLAG_DONE, proto::REPLY_TYPE_OFFSET_DATA, 8));
    assert_eq!(payload.len(), 16);
    assert_eq!(u64::from_be_bytes(payload[0..8].try_into().unwrap()), SIZE - 8);
    assert_works(&good, 2);
    good.disconnect().unwrap();
    server.stop();
}

#[test]
fn oversized_lengths_are_refused_and_huge_writes_disconnect() {
    let server = server();
    let good = server.client("good");
    let (mut raw, _, _) = Raw::go(server.tcp, "d", false);
    assert_eq!(
        raw.ask(0, proto::CMD_READ, 1, 0, MAX_PAYLOAD + 1, &[]),
        (22, 1),
        "oversized read, simple reply: NBD_EINVAL"
    );
    // An oversized write within the discard limit: payload skipped, NBD_EINVAL, in step.
    let big = vec![0x5au8; MAX_PAYLOAD as usize + 4096];
    assert_eq!(
        raw.ask(0, proto::CMD_WRITE, 2, 0, big.len() as u32, &big),
        (22, 2),
        "oversized write: NBD_EINVAL"
    );
    assert_eq!(raw.ask(0, proto::CMD_READ, 3, 0, 16, &[]), (0, 3));
    assert_eq!(raw.bytes(16), vec![0u8; 16], "the oversized write wrote nothing");
    // TRIM and WRITE_ZEROES carry no payload: any length within the export is fine.
    assert_eq!(raw.ask(0, proto::CMD_WRITE_ZEROES, 4, 0, SIZE as u32, &[]), (0, 4));
    assert_works(&good, 1);

    let (mut structured, _, _) = Raw::go(server.tcp, "d", true);
    structured.request(0, proto::CMD_READ, 9, 0, MAX_PAYLOAD + 1, &[]);
    let (flags, kind, cookie, payload) = structured.chunk();
    assert_eq!((flags, kind, cookie), (proto::REPLY_FLAG_DONE, proto::REPLY_TYPE_ERROR, 9));
    assert_eq!(u32::from_be_bytes(payload[0..4].try_into().unwrap()), 75, "NBD_EOVERFLOW");

    // A write whose payload is too large even to skip: the server hangs up.
    raw.request(0, proto::CMD_WRITE, 5, 0, u32::MAX, &[]);
    assert!(raw.closed_by_server(), "a 4 GiB write payload is a denial of service");
    assert_works(&good, 2);
    good.disconnect().unwrap();
    server.stop();
}

#[test]
fn unknown_commands_and_flags_get_einval() {
    let server = server();
    let good = server.client("good");
    let (mut raw, _, _) = Raw::go(server.tcp, "d", false);
    for (cookie, command) in
        [(1u64, 42u16), (2, proto::CMD_CACHE), (3, proto::CMD_BLOCK_STATUS), (4, 0xffff)]
    {
        assert_eq!(raw.ask(0, command, cookie, 0, 512, &[]), (22, cookie), "command {command}");
    }
    assert_eq!(raw.ask(1 << 9, proto::CMD_FLUSH, 5, 0, 0, &[]), (22, 5), "unknown command flag");
    assert_eq!(
        raw.ask(proto::CMD_FLAG_FUA, proto::CMD_FLUSH, 6, 0, 0, &[]),
        (0, 6),
        "FUA is accepted on any command once advertised"
    );
    assert_works(&good, 1);
    good.disconnect().unwrap();
    let stats = server.stats.clone();
    server.stop();
    assert_eq!(stats.command(Command::Unknown(0)).errors(), 2);
    assert_eq!(stats.command(Command::Cache).errors(), 1);
}

#[test]
fn disconnecting_with_requests_in_flight_costs_nothing_else() {
    let gate = Arc::new(GateExport::new(SIZE));
    let server = serve_with(
        ExportMap::new().with("gate", "", gate.clone()).with(
            "good",
            "",
            Arc::new(MemExport::new(SIZE)),
        ),
        ServerConfig::default(),
    );
    let good = server.client("good");
    assert_works(&good, 1);
    let (mut raw, _, _) = Raw::go(server.tcp, "gate", false);
    for cookie in 0..32u64 {
        raw.request(0, proto::CMD_READ, cookie, cookie * 4096, 65536, &[]);
    }
    gate.wait_for_waiters(1);
    drop(raw);
    gate.open();
    assert_works(&good, 2);

    // A client that stops reading its replies only blocks itself. Its 150 requests leave in
    // one write, so they reach the server together: when it vanishes with replies unread (a
    // TCP reset, which discards what the server had not yet read), the server has them all.
    let (mut stalled, _, _) = Raw::go(server.tcp, "good", false);
    let mut burst = Vec::new();
    for cookie in 0..150u64 {
        burst.extend_from_slice(&0x2560_9513u32.to_be_bytes());
        burst.extend_from_slice(&0u16.to_be_bytes());
        burst.extend_from_slice(&proto::CMD_READ.to_be_bytes());
        burst.extend_from_slice(&cookie.to_be_bytes());
        burst.extend_from_slice(&0u64.to_be_bytes());
        burst.extend_from_slice(&(1u32 << 20).to_be_bytes());
    }
    stalled.send(&burst);
    assert_works(&good, 3);
    // And a client that disappears in the middle of a write payload.
    let (mut partial, _, _) = Raw::go(server.tcp, "good", false);
    partial.request(0, proto::CMD_WRITE, 1, 0, 65536, &[7u8; 100]);
    drop(partial);
    assert_works(&good, 4);
    drop(stalled);
    good.disconnect().unwrap();

    let stats = server.stats.clone();
    server.stop();
    assert_eq!(stats.connections_open(), 0, "every connection closed");
    assert_eq!(stats.connections_opened(), 4);
    // 32 abandoned reads, 150 stalled ones and 4 by the good client were all answered
    // (or their replies dropped) by the time the server stopped.
    assert_eq!(stats.command(Command::Read).count(), 32 + 150 + 4);
    assert_eq!(
        stats.command(Command::Write).count(),
        4,
        "the partial write never reached a worker"
    );
}

#[test]
fn idle_handshakes_time_out_but_idle_transmissions_do_not() {
    let config = ServerConfig {
        // Long enough for the good client's handshake on a loaded machine.
        handshake_deadline: Some(std::time::Duration::from_secs(1)),
        ..ServerConfig::default()
    };
    let server =
        serve_with(ExportMap::new().with("good", "", Arc::new(MemExport::new(SIZE))), config);
    let good = server.client("good");
    let mut idle = Raw::connect(server.tcp);
    idle.greeting();
    assert!(idle.closed_by_server(), "a client silent during the handshake is dropped");
    // Long past the handshake timeout, the negotiated connection still works.
    std::thread::sleep(std::time::Duration::from_millis(1500));
    assert_works(&good, 1);
    good.disconnect().unwrap();
    server.stop();
}

/// `doc/proto.md`, NBD_CMD_FLUSH: "*length* and *offset* are reserved, and MUST be set to
/// all-zero". nbdkit answers such a FLUSH with EINVAL and flushes nothing; so does ember,
/// over simple and structured replies.
#[test]
fn flush_with_an_offset_or_length_is_refused() {
    let server = server();
    let good = server.client("good");
    for structured in [false, true] {
        let (mut raw, _, flags) = Raw::go(server.tcp, "d", structured);
        assert_ne!(flags & proto::TX_SEND_FLUSH, 0);
        for (cookie, offset, length) in [(1u64, 4096u64, 0u32), (2, 0, 512), (3, 1, 1)] {
            raw.request(0, proto::CMD_FLUSH, cookie, offset, length, &[]);
            if structured {
                let (flags, kind, got, payload) = raw.chunk();
                assert_eq!(
                    (flags, kind, got),
                    (proto::REPLY_FLAG_DONE, proto::REPLY_TYPE_ERROR, cookie)
                );
                assert_eq!(u32::from_be_bytes(payload[0..4].try_into().unwrap()), 22);
            } else {
                assert_eq!(raw.simple_reply(), (22, cookie), "flush {offset}+{length}");
            }
        }
        assert_eq!(
            raw.ask(0, proto::CMD_FLUSH, 4, 0, 0, &[]),
            (0, 4),
            "a well-formed flush still succeeds"
        );
    }
    assert_works(&good, 3);
    good.disconnect().unwrap();
    let stats = server.stats.clone();
    server.stop();
    assert_eq!(stats.command(Command::Flush).errors(), 6);
}

/// The handshake's MUST-rejects: a string with a NUL (`doc/proto.md`, "Conventions": strings
/// MUST NOT contain NUL) is NBD_REP_ERR_INVALID for NBD_OPT_GO / NBD_OPT_INFO and ends the
/// session for NBD_OPT_EXPORT_NAME; NBD_OPT_STARTTLS on a server without TLS is
/// NBD_REP_ERR_POLICY (NOTLS mode: never NBD_REP_ERR_TLS_REQD), and with data
/// NBD_REP_ERR_INVALID; NBD_OPT_ABORT is acknowledged.
#[test]
fn handshake_must_rejects() {
    let server = server();
    let mut raw = Raw::connect(server.tcp);
    raw.greeting();
    raw.send(&3u32.to_be_bytes());
    for option in [proto::OPT_GO, proto::OPT_INFO] {
        let name = b"d\0x";
        let mut data = (name.len() as u32).to_be_bytes().to_vec();
        data.extend_from_slice(name);
        data.extend_from_slice(&0u16.to_be_bytes());
        raw.option(option, &data);
        let (got, kind, _) = raw.option_reply();
        assert_eq!((got, kind), (option, proto::REP_ERR_INVALID), "NUL in an export name");
    }
    raw.option(proto::OPT_STARTTLS, &[]);
    assert_eq!(raw.option_reply().1, proto::REP_ERR_POLICY, "TLS is off");
    raw.option(proto::OPT_STARTTLS, &[1, 2, 3]);
    assert_eq!(raw.option_reply().1, proto::REP_ERR_INVALID, "STARTTLS takes no data");
    raw.option(proto::OPT_EXPORT_NAME, b"d\0");
    assert!(raw.closed_by_server(), "NUL in NBD_OPT_EXPORT_NAME ends the session");

    let mut raw = Raw::connect(server.tcp);
    raw.greeting();
    raw.send(&3u32.to_be_bytes());
    raw.option(proto::OPT_ABORT, &[]);
    assert_eq!(raw.option_reply().1, proto::REP_ACK);
    assert!(raw.closed_by_server());
    server.stop();
}
