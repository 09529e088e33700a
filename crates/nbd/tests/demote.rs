//! ember's DEMOTE extension on the wire (docs/reference/nbd.md, "Extension: x-ember:demote"):
//! negotiated
//! before NBD_OPT_GO, used only when both sides agreed; a malformed or un-negotiated DEMOTE gets
//! NBD_EINVAL and the connection lives; standard peers (nbdkit, nbdinfo) never see it.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "integration-test helpers")]

use std::process::{Child, Command as Process};
use std::sync::{Arc, Mutex};

use ember_nbd::server::ServerConfig;
use ember_nbd::{
    ClientBuilder, ClientError, Command, Errno, Export, ExportError, ExportMap, MemExport,
};
use ember_testkit::nbd::*;
use ember_testkit::{forward_geometry, forward_writes};

/// An export that takes DEMOTEs and records them.
struct Array {
    inner: MemExport,
    demoted: Mutex<Vec<(u64, Vec<u8>)>>,
}

impl Export for Array {
    forward_geometry!();
    fn accepts_demote(&self) -> bool {
        true
    }
    fn demote(&self, offset: u64, data: &[u8]) -> Result<(), ExportError> {
        self.demoted.lock().unwrap().push((offset, data.to_vec()));
        Ok(())
    }
    fn read(&self, offset: u64, buf: &mut [u8]) -> Result<(), ExportError> {
        self.inner.read(offset, buf)
    }
    forward_writes!();
}

fn array_server() -> (TestServer, Arc<Array>) {
    let array = Arc::new(Array { inner: MemExport::new(1 << 20), demoted: Mutex::new(Vec::new()) });
    let exports = ExportMap::new().with("array", "takes DEMOTE", array.clone()).with(
        "plain",
        "",
        Arc::new(MemExport::new(1 << 20)),
    );
    (serve_with(exports, ServerConfig::default()), array)
}

fn errno_of(result: Result<Vec<u8>, ClientError>) -> Option<Errno> {
    match result {
        Err(ClientError::Server { errno, .. }) => Some(errno),
        Err(other) => panic!("expected a server error, got {other}"),
        Ok(_) => None,
    }
}

#[test]
fn a_negotiated_demote_reaches_the_export() {
    let (server, array) = array_server();
    let client =
        ClientBuilder::new().export("array").demote(true).connect_unix(&server.unix).unwrap();
    assert!(client.info().demote, "the array export acknowledged x-ember:demote");
    let block = pattern(5, 4096);
    client.demote(8192, &block).unwrap();
    client.demote(0, &block[..512]).unwrap();
    let seen = array.demoted.lock().unwrap().clone();
    assert_eq!(seen, vec![(8192, block.clone()), (0, block[..512].to_vec())]);
    // A DEMOTE is a hint, never a write: the export's data is unchanged.
    let mut back = vec![1u8; 4096];
    client.read(8192, &mut back).unwrap();
    assert_eq!(back, vec![0u8; 4096]);
    assert_eq!(server.stats.command(Command::Demote).count(), 2);
    assert_eq!(server.stats.command(Command::Demote).bytes(), 4096 + 512);
    assert_works(&client, 1);
    client.disconnect().unwrap();
}

#[test]
fn an_export_without_demote_refuses_the_option_and_the_client_goes_on() {
    let (server, _array) = array_server();
    let client =
        ClientBuilder::new().export("plain").demote(true).connect_unix(&server.unix).unwrap();
    assert!(!client.info().demote, "a plain export does not take DEMOTE");
    assert!(matches!(client.demote(0, &[0u8; 512]), Err(ClientError::Invalid(_))));
    assert_works(&client, 2);
    client.disconnect().unwrap();
    // Not asked for: not negotiated either, even on the array.
    let client = ClientBuilder::new().export("array").connect_unix(&server.unix).unwrap();
    assert!(!client.info().demote);
    client.disconnect().unwrap();
}

#[test]
fn malformed_and_unnegotiated_demotes_get_einval_and_the_connection_lives() {
    let (server, array) = array_server();
    let einval = Some(Errno::Inval);
    // Not negotiated: the server still reads the payload, answers EINVAL, and carries on.
    let plain = ClientBuilder::new().export("array").connect_unix(&server.unix).unwrap();
    let r = plain.submit(Command::Demote, 0, 0, 4096, &[7u8; 4096]).unwrap().wait();
    assert_eq!(errno_of(r), einval, "un-negotiated DEMOTE");
    assert_works(&plain, 3);
    plain.disconnect().unwrap();
    // Negotiated, but malformed: flags, zero length, beyond the end.
    let client =
        ClientBuilder::new().export("array").demote(true).connect_unix(&server.unix).unwrap();
    let size = client.size();
    for (flags, offset, data, what) in [
        (1u16, 0u64, vec![1u8; 512], "with a flag"),
        (0, 0, vec![], "of zero bytes"),
        (0, size - 512, vec![2u8; 1024], "past the end"),
    ] {
        let r = client.submit(Command::Demote, flags, offset, data.len() as u32, &data).unwrap();
        assert_eq!(errno_of(r.wait()), einval, "a DEMOTE {what}");
    }
    assert!(array.demoted.lock().unwrap().is_empty(), "no malformed DEMOTE reached the export");
    client.demote(0, &[9u8; 512]).unwrap();
    assert_eq!(array.demoted.lock().unwrap().len(), 1);
    assert_works(&client, 4);
    client.disconnect().unwrap();
}

struct Kill(Child);
impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A standard server (nbdkit) answers the unknown option NBD_REP_ERR_UNSUP, so ember's client
/// goes on without DEMOTE; a standard client (nbdinfo) sees an ember array as a plain export.
#[test]
fn standard_peers_never_see_demote() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("nbdkit.sock");
    let _nbdkit = Kill(
        Process::new("nbdkit")
            .args(["--foreground", "--exit-with-parent", "-U"])
            .arg(&sock)
            .args(["memory", "1M"])
            .spawn()
            .expect("nbdkit (installed by make setup)"),
    );
    let mut client = None;
    for _ in 0..200 {
        match ClientBuilder::new().demote(true).connect_unix(&sock) {
            Ok(c) => {
                client = Some(c);
                break;
            }
            Err(_) => std::thread::sleep(std::time::Duration::from_millis(25)),
        }
    }
    let client = client.expect("connect to nbdkit");
    assert!(!client.info().demote, "nbdkit does not know x-ember:demote");
    assert_eq!(client.size(), 1 << 20);
    assert_works(&client, 5);
    client.disconnect().unwrap();

    let (server, _array) = array_server();
    let out = Process::new("nbdinfo")
        .arg("--json")
        .arg(server.unix_uri("array"))
        .output()
        .expect("nbdinfo (installed by make setup)");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("\"export-size\": 1048576"), "{text}");
}

fn demote_option(export: &str, queries: &[&str]) -> Vec<u8> {
    let mut data = Vec::new();
    data.extend_from_slice(&(export.len() as u32).to_be_bytes());
    data.extend_from_slice(export.as_bytes());
    data.extend_from_slice(&(queries.len() as u32).to_be_bytes());
    for q in queries {
        data.extend_from_slice(&(q.len() as u32).to_be_bytes());
        data.extend_from_slice(q.as_bytes());
    }
    data
}

/// The option's answers, byte by byte, and the rule that a grant holds only for the export
/// the client then enters: granted for "array", entered "plain", so a DEMOTE gets EINVAL.
#[test]
fn the_option_is_answered_per_export_and_binds_to_it() {
    use ember_nbd::proto;
    let (server, array) = array_server();
    let mut raw = Raw::connect(server.tcp);
    raw.greeting();
    raw.send(&3u32.to_be_bytes());
    let opt = proto::OPT_EMBER_DEMOTE;
    for (data, want, what) in [
        (demote_option("array", &["x-ember:demote"]), proto::REP_ACK, "granted"),
        (demote_option("plain", &["x-ember:demote"]), proto::REP_ERR_UNSUP, "no DEMOTE there"),
        (demote_option("nope", &["x-ember:demote"]), proto::REP_ERR_UNKNOWN, "no such export"),
        (demote_option("array", &["x-ember:other"]), proto::REP_ERR_INVALID, "unknown query"),
        (demote_option("array", &[]), proto::REP_ERR_INVALID, "no query"),
        (demote_option("array", &["x-ember:demote", "x"]), proto::REP_ERR_INVALID, "two"),
        (vec![0, 0, 0, 9, b'a'], proto::REP_ERR_INVALID, "name overruns the data"),
    ] {
        raw.option(opt, &data);
        let (echo, kind, _) = raw.option_reply();
        assert_eq!((echo, kind), (opt, want), "{what}");
    }
    // Enter "plain": the grant was for "array".
    let mut go = Vec::new();
    go.extend_from_slice(&5u32.to_be_bytes());
    go.extend_from_slice(b"plain");
    go.extend_from_slice(&0u16.to_be_bytes());
    raw.option(proto::OPT_GO, &go);
    loop {
        match raw.option_reply().1 {
            proto::REP_ACK => break,
            proto::REP_INFO => {}
            other => panic!("NBD_OPT_GO failed with {other:#x}"),
        }
    }
    raw.request(0, proto::CMD_EMBER_DEMOTE, 7, 0, 512, &[3u8; 512]);
    assert_eq!(raw.simple_reply(), (Errno::Inval.code(), 7));
    // The payload was consumed: the next request is parsed correctly.
    assert_eq!(raw.ask(0, proto::CMD_READ, 8, 0, 512, &[]), (0, 8));
    assert_eq!(raw.bytes(512), vec![0u8; 512]);
    assert!(array.demoted.lock().unwrap().is_empty());
}
