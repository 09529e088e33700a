//! NBD over TLS (STARTTLS) with real clients: nbdinfo and nbdcopy over
//! `nbds://` (libnbd's `tls-certificates=` query parameter), qemu-img with
//! `--object tls-creds-x509`; plaintext clients refused under `require`; client certificates
//! verified with `verify_peer`. The certificates are made here with rcgen, under the file
//! names qemu and nbdkit use.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "integration-test helpers")]

use std::io::Write;
use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;

use ember_nbd::server::{ServerConfig, TlsMode, TlsSettings};
use ember_nbd::{proto, Export, ExportMap, MemExport};
use ember_testkit::nbd::*;
use rcgen::{
    BasicConstraints, Certificate, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose, SanType,
};

/// A certificate authority made for a test.
struct Ca {
    cert: Certificate,
    key: KeyPair,
}

impl Ca {
    fn new(name: &str) -> Ca {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name.push(DnType::CommonName, name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let key = KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        Ca { cert, key }
    }

    /// A leaf certificate and its key, issued by this CA.
    fn issue(&self, name: &str, server: bool) -> (String, String) {
        let mut params = CertificateParams::new(vec!["localhost".to_string()]).unwrap();
        params.subject_alt_names.push(SanType::IpAddress(IpAddr::V4(Ipv4Addr::LOCALHOST)));
        params.distinguished_name.push(DnType::CommonName, name);
        params.key_usages =
            vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
        params.extended_key_usages = vec![if server {
            ExtendedKeyUsagePurpose::ServerAuth
        } else {
            ExtendedKeyUsagePurpose::ClientAuth
        }];
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.cert, &self.key).unwrap();
        (cert.pem(), key.serialize_pem())
    }
}

fn write(dir: &Path, name: &str, text: &str) {
    let mut f = std::fs::File::create(dir.join(name)).unwrap();
    f.write_all(text.as_bytes()).unwrap();
}

/// Directories of PEM files for one test: the server's, a trusted client's, a client
/// holding a certificate from another CA, and a client with no certificate.
struct Pki {
    _root: tempfile::TempDir,
    server: PathBuf,
    client: PathBuf,
    stranger: PathBuf,
    anonymous: PathBuf,
}

fn pki() -> Pki {
    let root = tempfile::tempdir().unwrap();
    let ca = Ca::new("ember test CA");
    let other = Ca::new("someone else's CA");
    let dirs: Vec<PathBuf> = ["server", "client", "stranger", "anonymous"]
        .iter()
        .map(|d| {
            let p = root.path().join(d);
            std::fs::create_dir(&p).unwrap();
            write(&p, "ca-cert.pem", &ca.cert.pem());
            p
        })
        .collect();
    let (cert, key) = ca.issue("ember server", true);
    write(&dirs[0], "server-cert.pem", &cert);
    write(&dirs[0], "server-key.pem", &key);
    let (cert, key) = ca.issue("trusted client", false);
    write(&dirs[1], "client-cert.pem", &cert);
    write(&dirs[1], "client-key.pem", &key);
    let (cert, key) = other.issue("untrusted client", false);
    write(&dirs[2], "client-cert.pem", &cert);
    write(&dirs[2], "client-key.pem", &key);
    Pki {
        server: dirs[0].clone(),
        client: dirs[1].clone(),
        stranger: dirs[2].clone(),
        anonymous: dirs[3].clone(),
        _root: root,
    }
}

fn serve_tls(pki: &Pki, mode: TlsMode, verify_peer: bool) -> (TestServer, Arc<MemExport>) {
    let export = Arc::new(MemExport::new(8 << 20));
    let tls = TlsSettings::from_dir(&pki.server, mode, verify_peer).expect("TLS credentials");
    let config = ServerConfig { tls: Some(tls), ..ServerConfig::default() };
    (serve_with(ExportMap::new().with("d", "over TLS", export.clone()), config), export)
}

fn output(command: &mut Command) -> Output {
    let program = command.get_program().to_string_lossy().into_owned();
    command.output().unwrap_or_else(|e| panic!("cannot run {program} (scripts/setup.sh): {e}"))
}

fn run(command: &mut Command) -> String {
    let out = output(command);
    assert!(
        out.status.success(),
        "{:?} failed ({}):\n{}\n{}",
        command,
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn nbds(server: &TestServer, certs: &Path) -> String {
    format!("nbds://127.0.0.1:{}/d?tls-certificates={}", server.tcp.port(), certs.display())
}

#[test]
fn nbdinfo_and_nbdcopy_over_nbds() {
    let pki = pki();
    let (server, export) = serve_tls(&pki, TlsMode::Require, false);
    let info = run(Command::new("nbdinfo").args(["--json", &nbds(&server, &pki.client)]));
    let json: serde_json::Value = serde_json::from_str(&info).expect("nbdinfo --json");
    assert_eq!(json["exports"][0]["export-size"], 8 << 20, "{info}");
    assert_eq!(json["exports"][0]["description"], "over TLS", "{info}");

    // nbdcopy a pattern in and back out through TLS; the export holds the exact bytes.
    let dir = tempfile::tempdir().unwrap();
    let data = pattern(11, 8 << 20);
    let src = dir.path().join("in.raw");
    std::fs::write(&src, &data).unwrap();
    run(Command::new("nbdcopy").arg(&src).arg(nbds(&server, &pki.client)));
    let mut held = vec![0u8; data.len()];
    export.read(0, &mut held).unwrap();
    assert!(held == data, "the export holds what nbdcopy sent over TLS");
    let back = dir.path().join("out.raw");
    run(Command::new("nbdcopy").arg(nbds(&server, &pki.client)).arg(&back));
    assert!(std::fs::read(&back).unwrap() == data, "nbdcopy read the same bytes back");
    // The anonymous directory has the CA: without verify_peer no client certificate is
    // needed.
    run(Command::new("nbdinfo").arg(nbds(&server, &pki.anonymous)));
    server.stop();
}

#[test]
fn qemu_img_with_tls_creds_x509() {
    let pki = pki();
    let (server, export) = serve_tls(&pki, TlsMode::Require, true);
    let data = pattern(5, 4 << 20);
    export.write(0, &data, false).unwrap();
    let object = format!("tls-creds-x509,id=tls0,dir={},endpoint=client", pki.client.display());
    let image =
        format!("driver=nbd,host=127.0.0.1,port={},export=d,tls-creds=tls0", server.tcp.port());
    let info = run(Command::new("qemu-img").args([
        "info",
        "--output=json",
        "--object",
        &object,
        "--image-opts",
        &image,
    ]));
    let json: serde_json::Value = serde_json::from_str(&info).expect("qemu-img info json");
    assert_eq!(json["virtual-size"], 8 << 20, "{info}");
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("copy.raw");
    run(Command::new("qemu-img")
        .args(["convert", "-O", "raw", "--object", &object, "--image-opts", &image])
        .arg(&copy));
    let copied = std::fs::read(&copy).unwrap();
    assert!(copied[..data.len()] == data[..], "qemu-img read the pattern over TLS");
    assert!(copied[data.len()..].iter().all(|&b| b == 0));
    server.stop();
}

#[test]
fn plaintext_is_refused_under_require() {
    let pki = pki();
    let (server, _export) = serve_tls(&pki, TlsMode::Require, false);
    let out = output(Command::new("nbdinfo").arg(server.uri("d")));
    assert!(!out.status.success(), "a plaintext nbdinfo must not get in");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("opt_go"), "refused at NBD_OPT_GO: {stderr}");

    // On the wire: every option but STARTTLS and ABORT gets NBD_REP_ERR_TLS_REQD, and
    // NBD_OPT_EXPORT_NAME (which cannot be refused) ends the session.
    let mut raw = Raw::connect(server.tcp);
    raw.greeting();
    raw.send(&proto::FLAG_C_FIXED_NEWSTYLE.to_be_bytes());
    for option in [proto::OPT_LIST, proto::OPT_STRUCTURED_REPLY, proto::OPT_INFO, proto::OPT_GO] {
        raw.option(option, &[]);
        let (got, kind, _) = raw.option_reply();
        assert_eq!((got, kind), (option, proto::REP_ERR_TLS_REQD));
    }
    raw.option(proto::OPT_STARTTLS, b"x");
    assert_eq!(raw.option_reply().1, proto::REP_ERR_INVALID, "STARTTLS takes no data");
    raw.option(proto::OPT_EXPORT_NAME, b"d");
    assert!(raw.closed_by_server());
    // A client without fixed newstyle cannot do TLS: dropped at once.
    let mut raw = Raw::connect(server.tcp);
    raw.greeting();
    raw.send(&0u32.to_be_bytes());
    assert!(raw.closed_by_server());
    server.stop();
}

#[test]
fn tls_on_serves_both_kinds_of_client() {
    let pki = pki();
    let (server, _export) = serve_tls(&pki, TlsMode::On, false);
    run(Command::new("nbdinfo").arg(server.uri("d")));
    run(Command::new("nbdinfo").arg(nbds(&server, &pki.anonymous)));
    let client = server.client("d");
    assert_works(&client, 4);
    client.disconnect().unwrap();
    server.stop();
}

#[test]
fn untrusted_client_certificates_are_refused() {
    let pki = pki();
    let (server, export) = serve_tls(&pki, TlsMode::Require, true);
    run(Command::new("nbdinfo").arg(nbds(&server, &pki.client)));
    for (who, dir) in [("untrusted", &pki.stranger), ("certificate-less", &pki.anonymous)] {
        let out = output(
            Command::new("nbdcopy")
                .arg("/dev/zero")
                .arg(nbds(&server, dir))
                .args(["--synchronous"]),
        );
        assert!(!out.status.success(), "a {who} client must be refused");
        let out = output(Command::new("nbdinfo").arg(nbds(&server, dir)));
        assert!(!out.status.success(), "a {who} client must be refused");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("gnutls"), "refused in the TLS handshake: {stderr}");
    }
    // Nothing was written by the refused clients.
    let mut head = vec![1u8; 4096];
    export.read(0, &mut head).unwrap();
    assert!(head.iter().all(|&b| b == 0));
    server.stop();
}

#[test]
fn missing_credentials_are_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let err = TlsSettings::from_dir(dir.path(), TlsMode::Require, false).unwrap_err();
    assert!(err.to_string().contains("server-cert.pem"), "{err}");
    let pki = pki();
    let err = TlsSettings::from_dir(&pki.client, TlsMode::On, false).unwrap_err();
    assert!(err.to_string().contains("server-cert.pem"), "{err}");
    std::fs::remove_file(pki.server.join("ca-cert.pem")).unwrap();
    let err = TlsSettings::from_dir(&pki.server, TlsMode::On, true).unwrap_err();
    assert!(err.to_string().contains("ca-cert.pem"), "{err}");
    assert!(TlsSettings::from_dir(&pki.server, TlsMode::On, false).is_ok());
}

/// After the ACK to STARTTLS, a client that sends garbage instead of a ClientHello, or
/// nothing at all, is dropped (the latter at the whole-handshake deadline); others are served.
#[test]
fn broken_tls_handshakes_are_dropped() {
    let pki = pki();
    let export = Arc::new(MemExport::new(1 << 20));
    let config = ServerConfig {
        tls: Some(TlsSettings::from_dir(&pki.server, TlsMode::On, false).unwrap()),
        // Room for nbdinfo's whole TLS handshake on a loaded machine.
        handshake_deadline: Some(std::time::Duration::from_secs(3)),
        ..ServerConfig::default()
    };
    let server = serve_with(ExportMap::new().with("d", "", export), config);
    for garbage in [&b"definitely not a TLS ClientHello.........."[..], &[]] {
        let mut raw = Raw::connect(server.tcp);
        raw.greeting();
        raw.send(&proto::FLAG_C_FIXED_NEWSTYLE.to_be_bytes());
        raw.option(proto::OPT_STARTTLS, &[]);
        assert_eq!(raw.option_reply().1, proto::REP_ACK);
        raw.send(garbage);
        assert!(raw.closed_by_server(), "dropped after {} bytes of garbage", garbage.len());
    }
    run(Command::new("nbdinfo").arg(nbds(&server, &pki.anonymous)));
    server.stop();
}

/// The shared budget holds under TLS: 8 clients upgrade with STARTTLS (a rustls client made
/// here), each sends four 32 MiB READs and never reads; the server holds no more than its
/// budget, nbdinfo over TLS is still served, and everything is released when they go.
#[test]
fn tls_readers_that_never_read_stay_within_the_budget() {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, ServerName};

    let pki = pki();
    let budget = 64u64 << 20;
    let config = ServerConfig {
        tls: Some(TlsSettings::from_dir(&pki.server, TlsMode::Require, false).unwrap()),
        shared_budget: budget,
        ..ServerConfig::default()
    };
    let server =
        serve_with(ExportMap::new().with("d", "", Arc::new(MemExport::new(64 << 20))), config);
    let handle = server.running.as_ref().unwrap().shutdown_handle();
    let mut roots = rustls::RootCertStore::empty();
    roots.add(CertificateDer::from_pem_file(pki.client.join("ca-cert.pem")).unwrap()).unwrap();
    let client_config = Arc::new(
        rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth(),
    );
    let mut hostile = Vec::new();
    for _ in 0..8 {
        let mut raw = Raw::connect(server.tcp);
        raw.greeting();
        raw.send(&proto::FLAG_C_FIXED_NEWSTYLE.to_be_bytes());
        raw.option(proto::OPT_STARTTLS, &[]);
        assert_eq!(raw.option_reply().1, proto::REP_ACK);
        let name = ServerName::try_from("localhost").unwrap();
        let conn = rustls::ClientConnection::new(Arc::clone(&client_config), name).unwrap();
        let mut tls = rustls::StreamOwned::new(conn, raw.s);
        let mut go = IHAVEOPT.to_be_bytes().to_vec();
        go.extend_from_slice(&proto::OPT_GO.to_be_bytes());
        go.extend_from_slice(&(4u32 + 1 + 2).to_be_bytes());
        go.extend_from_slice(&1u32.to_be_bytes());
        go.extend_from_slice(b"d");
        go.extend_from_slice(&0u16.to_be_bytes());
        tls.write_all(&go).unwrap();
        // Option replies until NBD_REP_ACK.
        loop {
            let mut head = [0u8; 20];
            std::io::Read::read_exact(&mut tls, &mut head).unwrap();
            let kind = u32::from_be_bytes(head[12..16].try_into().unwrap());
            let len = u32::from_be_bytes(head[16..20].try_into().unwrap()) as usize;
            let mut data = vec![0u8; len];
            std::io::Read::read_exact(&mut tls, &mut data).unwrap();
            if kind == proto::REP_ACK {
                break;
            }
            assert_eq!(kind, proto::REP_INFO, "NBD_OPT_GO over TLS");
        }
        for cookie in 0..4u64 {
            let mut request = 0x2560_9513u32.to_be_bytes().to_vec();
            request.extend_from_slice(&0u16.to_be_bytes());
            request.extend_from_slice(&proto::CMD_READ.to_be_bytes());
            request.extend_from_slice(&cookie.to_be_bytes());
            request.extend_from_slice(&0u64.to_be_bytes());
            request.extend_from_slice(&(32u32 << 20).to_be_bytes());
            tls.write_all(&request).unwrap();
        }
        tls.flush().unwrap();
        hostile.push(tls);
    }
    let started = std::time::Instant::now();
    while handle.budget_used() < budget {
        assert!(started.elapsed() < std::time::Duration::from_secs(120), "budget never filled");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert!(handle.budget_used() <= budget, "held {} bytes", handle.budget_used());
    run(Command::new("nbdinfo").arg(nbds(&server, &pki.anonymous)));
    drop(hostile);
    let started = std::time::Instant::now();
    while handle.connections() > 0 || handle.budget_used() > 0 {
        assert!(started.elapsed() < std::time::Duration::from_secs(120), "not released");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    server.stop();
}
