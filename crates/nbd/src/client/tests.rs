//! Tests of the client against scripted servers: reassembly, chunk checks, errors.

use super::*;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::thread::JoinHandle;

use crate::errno::Errno;
use crate::proto;
use crate::reply;
use crate::request::{Command, Request};
use crate::server::{handshake, ServerConfig};
use crate::stream::Stream;
use crate::{ExportMap, MemExport};

/// A client connected to a scripted server: the real handshake, then `script` drives the
/// transmission phase by hand.
fn scripted(script: impl FnOnce(&mut UnixStream) + Send + 'static) -> (Client, JoinHandle<()>) {
    let (client_end, mut server_end) = UnixStream::pair().unwrap();
    let server = std::thread::spawn(move || {
        let exports = ExportMap::new().with("x", "", Arc::new(MemExport::new(1 << 20)));
        let negotiated =
            handshake::negotiate(&mut server_end, &exports, &ServerConfig::default(), &|| false)
                .unwrap();
        assert!(negotiated.is_some());
        script(&mut server_end);
    });
    let client =
        Client::handshake(Stream::Unix(client_end), &ClientBuilder::new().export("x")).unwrap();
    (client, server)
}

fn read_request(s: &mut UnixStream) -> Request {
    let mut header = [0u8; proto::REQUEST_HEADER_LEN];
    s.read_exact(&mut header).unwrap();
    Request::parse(&header).unwrap()
}

fn data_chunk(cookie: u64, offset: u64, data: &[u8], done: bool) -> Vec<u8> {
    let flags = if done { proto::REPLY_FLAG_DONE } else { 0 };
    let mut out = reply::structured_header(
        flags,
        proto::REPLY_TYPE_OFFSET_DATA,
        cookie,
        8 + data.len() as u32,
    )
    .to_vec();
    out.extend_from_slice(&offset.to_be_bytes());
    out.extend_from_slice(data);
    out
}

#[test]
fn reassembles_fragmented_reads_answered_out_of_order() {
    let (client, server) = scripted(|s| {
        let a = read_request(s);
        let b = read_request(s);
        assert_eq!((a.offset, a.length, b.offset, b.length), (0, 8, 100, 4));
        // b first; a in three chunks, back to front, with a hole in the middle.
        s.write_all(&data_chunk(b.cookie, 100, &[9, 9, 9, 9], true)).unwrap();
        s.write_all(&data_chunk(a.cookie, 6, &[7, 8], false)).unwrap();
        let mut hole =
            reply::structured_header(0, proto::REPLY_TYPE_OFFSET_HOLE, a.cookie, 12).to_vec();
        hole.extend_from_slice(&2u64.to_be_bytes());
        hole.extend_from_slice(&4u32.to_be_bytes());
        s.write_all(&hole).unwrap();
        s.write_all(&data_chunk(a.cookie, 0, &[1, 2], false)).unwrap();
        let none =
            reply::structured_header(proto::REPLY_FLAG_DONE, proto::REPLY_TYPE_NONE, a.cookie, 0);
        s.write_all(&none).unwrap();
        assert_eq!(read_request(s).command, Command::Disc);
    });
    let a = client.start_read(0, 8).unwrap();
    let b = client.start_read(100, 4).unwrap();
    assert_eq!(b.wait().unwrap(), vec![9, 9, 9, 9]);
    assert_eq!(a.wait().unwrap(), vec![1, 2, 0, 0, 0, 0, 7, 8]);
    client.disconnect().unwrap();
    server.join().unwrap();
}

#[test]
fn short_structured_read_fails_only_that_request() {
    let (client, server) = scripted(|s| {
        let a = read_request(s);
        s.write_all(&data_chunk(a.cookie, 0, &[1, 2], true)).unwrap();
        let b = read_request(s);
        s.write_all(&reply::simple_header(0, b.cookie)).unwrap();
        assert_eq!(read_request(s).command, Command::Disc);
    });
    let err = client.start_read(0, 4).unwrap().wait().unwrap_err();
    assert!(matches!(err, ClientError::Protocol(ref m) if m.contains("covered 2 of 4")), "{err}");
    client.flush().unwrap();
    client.disconnect().unwrap();
    server.join().unwrap();
}

fn hole_chunk(cookie: u64, offset: u64, len: u32) -> Vec<u8> {
    let mut out = reply::structured_header(0, proto::REPLY_TYPE_OFFSET_HOLE, cookie, 12).to_vec();
    out.extend_from_slice(&offset.to_be_bytes());
    out.extend_from_slice(&len.to_be_bytes());
    out
}

fn none_done(cookie: u64) -> [u8; proto::STRUCTURED_REPLY_HEADER_LEN] {
    reply::structured_header(proto::REPLY_FLAG_DONE, proto::REPLY_TYPE_NONE, cookie, 0)
}

/// A hostile server describes bytes 0..4 twice and 4..8 never; the byte count alone adds
/// up to the request length. The read must fail (an I/O error to the engine), never hand
/// back zeroes for the gap; the connection stays usable.
#[test]
fn overlapping_chunks_fail_the_read() {
    let (client, server) = scripted(|s| {
        let a = read_request(s);
        s.write_all(&data_chunk(a.cookie, 0, &[1, 2, 3, 4], false)).unwrap();
        s.write_all(&data_chunk(a.cookie, 0, &[5, 6, 7, 8], false)).unwrap();
        s.write_all(&none_done(a.cookie)).unwrap();
        // A hole over data already sent, then the rest: still an overlap.
        let b = read_request(s);
        s.write_all(&data_chunk(b.cookie, 0, &[1, 2, 3, 4, 5, 6], false)).unwrap();
        s.write_all(&hole_chunk(b.cookie, 4, 4)).unwrap();
        s.write_all(&none_done(b.cookie)).unwrap();
        // Data, then a hole that ends inside it: overlap at the front of the hole.
        let c = read_request(s);
        s.write_all(&data_chunk(c.cookie, 4, &[1, 2, 3, 4], false)).unwrap();
        s.write_all(&hole_chunk(c.cookie, 0, 5)).unwrap();
        s.write_all(&none_done(c.cookie)).unwrap();
        // A well-formed reply afterwards is still served.
        let d = read_request(s);
        s.write_all(&data_chunk(d.cookie, 4, &[3, 4, 5, 6], false)).unwrap();
        s.write_all(&data_chunk(d.cookie, 0, &[9, 9, 9, 9], true)).unwrap();
        assert_eq!(read_request(s).command, Command::Disc);
    });
    for _ in 0..3 {
        let err = client.start_read(0, 8).unwrap().wait().unwrap_err();
        assert!(matches!(err, ClientError::Protocol(ref m) if m.contains("overlaps")), "{err}");
    }
    assert_eq!(client.start_read(0, 8).unwrap().wait().unwrap(), vec![9, 9, 9, 9, 3, 4, 5, 6]);
    client.disconnect().unwrap();
    server.join().unwrap();
}

/// `doc/proto.md`: NBD_REPLY_TYPE_NONE "MUST always be used with the
/// NBD_REPLY_FLAG_DONE bit set"; a server that breaks this is disconnected.
#[test]
fn a_none_chunk_without_done_kills_the_connection() {
    let (client, server) = scripted(|s| {
        let a = read_request(s);
        s.write_all(&data_chunk(a.cookie, 0, &[1, 2, 3, 4], false)).unwrap();
        let none = reply::structured_header(0, proto::REPLY_TYPE_NONE, a.cookie, 0);
        s.write_all(&none).unwrap();
        s.write_all(&none_done(a.cookie)).unwrap();
    });
    let err = client.start_read(0, 4).unwrap().wait().unwrap_err();
    assert!(
        matches!(err, ClientError::Protocol(ref m) if m.contains("without NBD_REPLY_FLAG_DONE")),
        "{err}"
    );
    assert!(matches!(client.start_read(0, 4), Err(ClientError::Disconnected(_))));
    server.join().unwrap();
}

#[test]
fn a_chunk_outside_the_request_kills_the_connection() {
    let (client, server) = scripted(|s| {
        let a = read_request(s);
        let _b = read_request(s);
        s.write_all(&data_chunk(a.cookie, 4096, &[1, 2], true)).unwrap();
    });
    let a = client.start_read(0, 4).unwrap();
    let b = client.start_read(8, 4).unwrap();
    let err = a.wait().unwrap_err();
    assert!(
        matches!(err, ClientError::Protocol(ref m) if m.contains("outside the request")),
        "{err}"
    );
    assert!(matches!(b.wait(), Err(ClientError::Disconnected(_))), "pending requests fail");
    assert!(matches!(client.start_read(0, 4), Err(ClientError::Disconnected(_))));
    server.join().unwrap();
}

#[test]
fn server_error_chunks_and_simple_errors_surface() {
    let (client, server) = scripted(|s| {
        let a = read_request(s);
        s.write_all(&reply::error_chunk(a.cookie, 5, "disk on fire", Some(512), true)).unwrap();
        let b = read_request(s);
        let mut payload = vec![0u8; b.length as usize];
        s.read_exact(&mut payload).unwrap();
        assert_eq!(payload, vec![1u8; 16]);
        s.write_all(&reply::simple_header(28, b.cookie)).unwrap();
        let c = read_request(s);
        // An unexpected errno is treated by its value; 0 in an error chunk is EINVAL.
        s.write_all(&reply::error_chunk(c.cookie, 0, "", None, true)).unwrap();
        assert_eq!(read_request(s).command, Command::Disc);
    });
    match client.start_read(0, 1024).unwrap().wait() {
        Err(ClientError::Server { errno, message, offset }) => {
            assert_eq!((errno, message.as_str(), offset), (Errno::Io, "disk on fire", Some(512)));
        }
        other => panic!("{other:?}"),
    }
    let err = client.start_write(0, &[1; 16], false).unwrap().wait().unwrap_err();
    assert!(matches!(err, ClientError::Server { errno: Errno::NoSpc, offset: None, .. }));
    let err = client.start_flush().unwrap().wait().unwrap_err();
    assert!(matches!(err, ClientError::Server { errno: Errno::Inval, .. }));
    client.disconnect().unwrap();
    server.join().unwrap();
}
