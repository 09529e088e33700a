//! `ember serve --tls require --tls-certificates DIR` end to end: nbdinfo and nbdcopy over
//! `nbds://` with certificates made by openssl (the qemu/nbdkit file names), a plaintext
//! client refused, and `--unix` sockets created owner-only.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "integration-test helpers")]

mod serve_support;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use serve_support::*;

const MIN: Duration = Duration::from_secs(60);

/// A CA and a server certificate for localhost / 127.0.0.1 in `dir`, as ca-cert.pem,
/// server-cert.pem and server-key.pem.
fn make_certificates(dir: &Path) {
    let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];
    run(
        Command::new("openssl")
            .current_dir(dir)
            .args(["req", "-x509"])
            .args(ec)
            .args(["-keyout", "ca-key.pem", "-out", "ca-cert.pem", "-days", "2"])
            .args(["-subj", "/CN=ember test CA"])
            .args(["-addext", "basicConstraints=critical,CA:TRUE"])
            .args(["-addext", "keyUsage=critical,keyCertSign,cRLSign"]),
        MIN,
    );
    run(
        Command::new("openssl").current_dir(dir).arg("req").args(ec).args([
            "-keyout",
            "server-key.pem",
            "-out",
            "server.csr",
            "-subj",
            "/CN=localhost",
        ]),
        MIN,
    );
    std::fs::write(
        dir.join("ext.cnf"),
        "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n",
    )
    .unwrap();
    run(
        Command::new("openssl").current_dir(dir).args([
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca-cert.pem",
            "-CAkey",
            "ca-key.pem",
            "-CAcreateserial",
            "-out",
            "server-cert.pem",
            "-days",
            "2",
            "-extfile",
            "ext.cnf",
        ]),
        MIN,
    );
}

#[test]
fn tls_required_with_real_clients() {
    let dir = tempfile::tempdir().unwrap();
    let certs = dir.path().join("pki");
    std::fs::create_dir(&certs).unwrap();
    make_certificates(&certs);
    let (cache, backing) = (dir.path().join("cache.img"), dir.path().join("disk.img"));
    sparse_file(&backing, 8 << 20);
    let socket = dir.path().join("ember.sock");
    let serve = ServeArgs::file_cache(&cache, "8M")
        .backing("disk", backing.display())
        .args([
            "--unix",
            socket.to_str().unwrap(),
            "--tls",
            "require",
            "--tls-certificates",
            certs.to_str().unwrap(),
        ])
        .start();
    let printed = serve.lines.lock().unwrap().join("\n");
    assert!(printed.contains("TLS required (no client certificates verified)"), "{printed}");
    let port = printed
        .lines()
        .find_map(|l| l.split(" nbds://127.0.0.1:").nth(1))
        .and_then(|rest| rest.split('/').next())
        .unwrap_or_else(|| panic!("no nbds:// export printed:\n{printed}"))
        .to_string();
    let mode = std::fs::metadata(&socket).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "the Unix socket is owner-only");

    let tls_uri = format!("nbds://127.0.0.1:{port}/disk?tls-certificates={}", certs.display());
    let data: Vec<u8> = (0..4u32 << 20).map(|i| (i % 251) as u8 ^ 0x5a).collect();
    let input = dir.path().join("in.raw");
    std::fs::write(&input, &data).unwrap();
    run(Command::new("nbdcopy").arg(&input).arg(&tls_uri), MIN);
    let out = run(Command::new("nbdinfo").args(["--size", &tls_uri]), MIN);
    assert_eq!(out.trim(), (8u64 << 20).to_string());
    let back = dir.path().join("back.raw");
    run(Command::new("nbdcopy").arg(&tls_uri).arg(&back), MIN);
    let back = std::fs::read(&back).unwrap();
    assert!(back[..data.len()] == data[..], "nbdcopy over TLS reads back what it wrote");

    let plain =
        run_status(Command::new("nbdinfo").arg(format!("nbd://127.0.0.1:{port}/disk")), MIN);
    assert!(!plain.status.success(), "plaintext must be refused under --tls require");
    serve.stop();
    // Write-through: the backing file holds the bytes sent over TLS.
    let on_disk = std::fs::read(&backing).unwrap();
    assert!(on_disk[..data.len()] == data[..]);
}
