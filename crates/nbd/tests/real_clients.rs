//! Real NBD clients (qemu-io, qemu-img, nbdcopy, nbdinfo, nbdsh, fio) against ember's server
//! running in this process on loopback TCP and a Unix socket.

use std::io::Write;
use std::process::Command;
use std::sync::Arc;

use ember_nbd::server::ServerConfig;
use ember_nbd::{Export, ExportFlags, ExportMap, MemExport};
use ember_testkit::nbd::*;
use ember_testkit::{fio_randrw_verify, nbdsh, qemu_io, sha256, MIN};
use std::time::Duration;

fn run(command: &mut Command) -> String {
    ember_testkit::run(command, MIN)
}

#[test]
fn qemu_io_writes_and_verifies_a_pattern() {
    let (server, export) = serve_mem("disk", 4 << 20);
    let out = qemu_io(&server.uri("disk"), "write -P 0xab 0 1M; read -P 0xab 0 1M");
    assert!(out.contains("wrote 1048576/1048576 bytes at offset 0"), "{out}");
    assert!(out.contains("read 1048576/1048576 bytes at offset 0"), "{out}");
    assert!(!out.contains("Pattern verification failed"), "{out}");
    let mut check = vec![0u8; 1 << 20];
    export.read(0, &mut check).unwrap();
    assert!(check.iter().all(|&b| b == 0xab));
    // Over the Unix socket, with a flush, a zeroed range and an unaligned write.
    let unix = format!("nbd+unix:///disk?socket={}", server.unix.display());
    let out = qemu_io(
        &unix,
        "write -P 0x11 1000 3000; flush; write -z 2M 64k; read -P 0x11 1000 3000; \
         read -P 0 2M 64k; read -P 0xab 4000 4096",
    );
    assert!(out.contains("read 65536/65536 bytes at offset 2097152"), "{out}");
    assert!(export.flushes() >= 1);
    server.stop();
}

#[test]
fn qemu_img_convert_and_compare_round_trip() {
    let size = 8 << 20;
    let (server, _export) = serve_mem("img", size as u64);
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src.img");
    let dst = dir.path().join("dst.img");
    std::fs::write(&src, pattern(42, size)).unwrap();
    let uri = server.uri("img");
    run(Command::new("qemu-img")
        .args(["convert", "-n", "-f", "raw", "-O", "raw"])
        .arg(&src)
        .arg(&uri));
    let out = run(Command::new("qemu-img")
        .args(["compare", "-f", "raw", "-F", "raw"])
        .arg(&src)
        .arg(&uri));
    assert!(out.contains("Images are identical"), "{out}");
    run(Command::new("qemu-img").args(["convert", "-f", "raw", "-O", "raw"]).arg(&uri).arg(&dst));
    assert_eq!(std::fs::read(&dst).unwrap(), std::fs::read(&src).unwrap());
    // A changed byte is noticed.
    let mut f = std::fs::OpenOptions::new().write(true).open(&src).unwrap();
    std::io::Seek::seek(&mut f, std::io::SeekFrom::Start(5 << 20)).unwrap();
    f.write_all(&[0]).unwrap();
    drop(f);
    let output = Command::new("qemu-img")
        .args(["compare", "-f", "raw", "-F", "raw"])
        .arg(&src)
        .arg(&uri)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1), "qemu-img compare reports a difference");
    server.stop();
}

#[test]
fn nbdcopy_256_mib_in_and_out() {
    const SIZE: usize = 256 << 20;
    let (server, export) = serve_mem("big", SIZE as u64);
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src.img");
    let dst = dir.path().join("dst.img");
    {
        // Non-zero everywhere (nbdcopy skips zero blocks), different in every MiB.
        let body = pattern(7, 1 << 20);
        let mut f = std::io::BufWriter::new(std::fs::File::create(&src).unwrap());
        for mib in 0..(SIZE >> 20) as u64 {
            f.write_all(&(mib | 0x0101_0101_0000_0000).to_le_bytes()).unwrap();
            f.write_all(&body[8..]).unwrap();
        }
        f.flush().unwrap();
    }
    let uri = server.uri("big");
    run(Command::new("nbdcopy").arg(&src).arg(&uri));
    // What arrived in the export is the source, byte for byte.
    let source = std::fs::read(&src).unwrap();
    let mut got = vec![0u8; 1 << 20];
    for mib in 0..SIZE >> 20 {
        export.read((mib << 20) as u64, &mut got).unwrap();
        assert!(got == source[mib << 20..(mib + 1) << 20], "MiB {mib} differs after nbdcopy in");
    }
    drop(source);
    run(Command::new("nbdcopy").arg(&uri).arg(&dst));
    assert_eq!(std::fs::metadata(&dst).unwrap().len(), SIZE as u64);
    assert_eq!(sha256(&src), sha256(&dst), "checksums match after nbdcopy out");
    let writes = server.stats.command(ember_nbd::Command::Write);
    assert_eq!(writes.bytes(), SIZE as u64);
    assert_eq!(writes.errors(), 0);
    server.stop();
}

#[test]
fn nbdinfo_shows_flags_and_lists_exports() {
    let ro = MemExport::with_flags(
        1 << 20,
        ExportFlags { read_only: true, can_flush: true, ..ExportFlags::default() },
    );
    let server = serve_with(
        ExportMap::new().with("rw", "writable disk", Arc::new(MemExport::new(2 << 20))).with(
            "ro",
            "read-only disk",
            Arc::new(ro),
        ),
        ServerConfig::default(),
    );
    let info: serde_json::Value =
        serde_json::from_str(&run(Command::new("nbdinfo").arg("--json").arg(server.uri("rw"))))
            .unwrap();
    let export = &info["exports"][0];
    assert_eq!(info["protocol"], "newstyle-fixed");
    assert_eq!(info["structured"], true);
    assert_eq!(export["export-size"], 2 << 20);
    assert_eq!(export["description"], "writable disk");
    for (key, value) in [
        ("is_read_only", false),
        ("can_flush", true),
        ("can_fua", true),
        ("can_trim", true),
        ("can_zero", true),
        ("can_multi_conn", true),
        ("can_cache", false),
        ("can_fast_zero", false),
    ] {
        assert_eq!(export[key], value, "rw {key}");
    }
    assert_eq!(export["block_size_maximum"], 32 << 20);

    let info: serde_json::Value = serde_json::from_str(&run(Command::new("nbdinfo")
        .arg("--json")
        .arg(server.unix_uri("ro"))))
    .unwrap();
    let export = &info["exports"][0];
    for (key, value) in [
        ("is_read_only", true),
        ("can_flush", true),
        ("can_fua", false),
        ("can_trim", false),
        ("can_zero", false),
        ("can_multi_conn", false),
    ] {
        assert_eq!(export[key], value, "ro {key}");
    }

    let list: serde_json::Value = serde_json::from_str(&run(Command::new("nbdinfo")
        .args(["--list", "--json"])
        .arg(format!("nbd://{}", server.tcp))))
    .unwrap();
    let names: Vec<(String, String)> = list["exports"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["export-name"].as_str().unwrap().to_string(),
                e["description"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    assert_eq!(
        names,
        vec![
            ("rw".to_string(), "writable disk".to_string()),
            ("ro".to_string(), "read-only disk".to_string())
        ]
    );
    server.stop();
}

const NBDSH_SCRIPT: &str = r#"
import errno, os
uri = os.environ["EMBER_NBD_URI"]
h.set_strict_mode(0)          # send out-of-range requests instead of refusing them locally
h.connect_uri(uri)
size = h.get_size()
assert size == 64 << 20, size
assert h.get_structured_replies_negotiated()
assert h.can_flush() and h.can_fua() and h.can_trim() and h.can_zero() and h.can_multi_conn()
assert not h.is_read_only()

h.pwrite(b"\xab" * 8192, 4096, nbd.CMD_FLAG_FUA)
assert h.pread(8192, 4096) == b"\xab" * 8192
assert h.pread(100, 4090) == b"\0" * 6 + b"\xab" * 94
h.flush()
h.zero(4096, 4096)
assert h.pread(4096, 4096) == b"\0" * 4096
h.zero(4096, 4096, nbd.CMD_FLAG_NO_HOLE)
assert h.pread(8192, 4096) == b"\0" * 4096 + b"\xab" * 4096
h.trim(4096, 8192)
h.pwrite(b"\x01" * 512, size - 512)
assert h.pread(512, size - 512) == b"\x01" * 512

def fails(expected, fn, *args):
    try:
        fn(*args)
    except nbd.Error as e:
        assert e.errnum == expected, (fn.__name__, e.errnum, e.string)
        return
    raise AssertionError(fn.__name__ + " succeeded")

fails(errno.EINVAL, h.pread, 1024, size - 512)
fails(errno.ENOSPC, h.pwrite, b"x" * 1024, size - 512)
fails(errno.EINVAL, h.trim, 1024, size - 512)
fails(errno.ENOSPC, h.zero, 1024, size - 512)
fails(errno.EOVERFLOW, h.pread, (32 << 20) + 4096, 0)  # above the maximum payload

# Many commands in flight at once.
h.pwrite(bytes(range(256)) * 16, 64 * 4096)
buffers = [nbd.Buffer(4096) for i in range(64)]
cookies = [h.aio_pread(buffers[i], 64 * 4096) for i in range(64)]
assert h.aio_in_flight() > 0
while h.aio_in_flight() > 0:
    h.poll(-1)
for c in cookies:
    assert h.aio_command_completed(c)
assert all(bytes(b.to_bytearray()) == bytes(range(256)) * 16 for b in buffers)
h.shutdown()
print("NBDSH-OK")
"#;

#[test]
fn nbdsh_protocol_checks() {
    let (server, export) = serve_mem("sh", 64 << 20);
    for uri in [server.uri("sh"), server.unix_uri("sh")] {
        let out = run(nbdsh().env("EMBER_NBD_URI", &uri).arg("-c").arg(NBDSH_SCRIPT));
        assert!(out.contains("NBDSH-OK"), "{out}");
    }
    assert!(export.fua_requests() >= 2);
    assert!(export.flushes() >= 2);
    let stats = server.stats.clone();
    server.stop();
    let reads = stats.command(ember_nbd::Command::Read);
    // Per run: 5 good reads, 2 refused, 64 in flight.
    assert_eq!(reads.count(), 2 * (5 + 2 + 64));
    assert_eq!(reads.errors(), 2 * 2);
}

#[test]
fn fio_nbd_engine_randrw_with_crc32c_verify() {
    let enghelp = run(Command::new("fio").arg("--enghelp"));
    assert!(enghelp.lines().any(|l| l.trim() == "nbd"), "fio lacks the nbd engine:\n{enghelp}");
    let (server, _export) = serve_mem("fio", 64 << 20);
    let dir = tempfile::tempdir().unwrap();
    fio_randrw_verify(dir.path(), &server.uri("fio"), "32M", 16, Duration::from_secs(300));
    let stats = server.stats.clone();
    server.stop();
    assert_eq!(stats.command(ember_nbd::Command::Read).errors(), 0);
    assert_eq!(stats.command(ember_nbd::Command::Write).errors(), 0);
    assert!(stats.command(ember_nbd::Command::Write).count() > 0);
}
