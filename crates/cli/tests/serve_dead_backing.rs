//! An NBD backing whose server host vanishes without closing the connection (power loss, a
//! partition): `ember serve --nbd-dead-after` fails the read waiting on it with an I/O error
//! instead of leaving it waiting for good (docs/reference/nbd.md, "ember as an NBD client").
//!
//! The backing is nbdkit's memory plugin behind its delay filter (every READ takes 10 s),
//! in a network namespace reached over a veth pair. A READ misses in ember, goes to the
//! backing and is acknowledged there; then the namespace's end of the link goes down, so
//! nothing more crosses: no reply, no RST, no FIN. Needs root and `ip` (iproute2).
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "integration-test helpers")]

mod serve_support;

use serve_support::*;
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A network namespace joined to this one by a veth pair, removed on drop.
struct NetNs {
    name: String,
    host_if: String,
    ns_if: String,
    /// The namespace's address.
    addr: String,
}

fn ip(args: &[&str]) -> bool {
    Command::new("ip")
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

impl NetNs {
    fn new(tag: &str) -> Option<NetNs> {
        let id = std::process::id();
        let net = 16 + id % 200;
        let ns = NetNs {
            name: format!("ember-{tag}-{id}"),
            host_if: format!("eh{tag}{id}"),
            ns_if: format!("en{tag}{id}"),
            addr: format!("10.213.{net}.2"),
        };
        let host_addr = format!("10.213.{net}.1/30");
        let ns_addr = format!("{}/30", ns.addr);
        let exec = |args: &[&str]| {
            let mut all = vec!["netns", "exec", &ns.name, "ip"];
            all.extend_from_slice(args);
            ip(&all)
        };
        let made = ip(&["netns", "add", &ns.name])
            && ip(&["link", "add", &ns.host_if, "type", "veth", "peer", "name", &ns.ns_if])
            && ip(&["link", "set", &ns.ns_if, "netns", &ns.name])
            && ip(&["addr", "add", &host_addr, "dev", &ns.host_if])
            && ip(&["link", "set", &ns.host_if, "up"])
            && exec(&["addr", "add", &ns_addr, "dev", &ns.ns_if])
            && exec(&["link", "set", &ns.ns_if, "up"])
            && exec(&["link", "set", "lo", "up"]);
        made.then_some(ns)
    }

    /// Cut the link at the namespace's end: from now on nothing crosses, in either way.
    fn cut(&self) {
        assert!(ip(&["netns", "exec", &self.name, "ip", "link", "set", &self.ns_if, "down"]));
    }
}

impl Drop for NetNs {
    fn drop(&mut self) {
        ip(&["link", "del", &self.host_if]);
        ip(&["netns", "del", &self.name]);
    }
}

/// nbdkit in the namespace: 64 MiB of memory, every READ delayed 10 s.
struct SlowBacking(Child);

impl SlowBacking {
    fn start(ns: &NetNs, port: u16) -> SlowBacking {
        let child = Command::new("ip")
            .args(["netns", "exec", &ns.name, "nbdkit", "-f", "-i", &ns.addr])
            .args(["-p", &port.to_string(), "--filter=delay", "memory", "64M", "delay-read=10"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn nbdkit");
        let at: SocketAddr = format!("{}:{port}", ns.addr).parse().unwrap();
        let t0 = Instant::now();
        while TcpStream::connect_timeout(&at, Duration::from_millis(200)).is_err() {
            assert!(t0.elapsed() < Duration::from_secs(20), "nbdkit did not listen on {at}");
            std::thread::sleep(Duration::from_millis(50));
        }
        SlowBacking(child)
    }
}

impl Drop for SlowBacking {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Serve the backing at `uri` with `--nbd-dead-after dead_after`, read a block (a miss,
/// so the backing's 10 s READ), cut the link 1 s in, and return what the read got and
/// when, or None if it still waited `patience` after the cut.
fn read_across_a_cut(
    ns: &NetNs,
    uri: &str,
    dead_after: &str,
    patience: Duration,
) -> Option<(Result<(), String>, Duration)> {
    let backing = format!("v={uri}");
    let serve = Serve::start(&[
        "--cache",
        "mem:16M",
        "--backing",
        &backing,
        "--nbd-dead-after",
        dead_after,
    ]);
    let client = ember_nbd::ClientBuilder::new().export("v").connect_tcp(serve.nbd.as_str());
    let client = client.expect("connect to ember serve");
    let (tx, rx) = std::sync::mpsc::channel();
    let t0 = Instant::now();
    std::thread::spawn(move || {
        let mut buf = vec![0u8; 4096];
        let got = client.read(0, &mut buf).map_err(|e| e.to_string());
        let _ = tx.send((got, t0.elapsed()));
    });
    std::thread::sleep(Duration::from_secs(1));
    ns.cut();
    let got = rx.recv_timeout(patience).ok();
    drop(serve); // ends a read still waiting
    got
}

#[test]
fn a_vanished_backing_host_fails_the_read_instead_of_hanging() {
    // SAFETY: geteuid(2) has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        skip_or_fail("needs root for a network namespace");
        return;
    }
    let Some(ns) = NetNs::new("db") else {
        skip_or_fail("cannot make a network namespace with a veth pair (ip netns, ip link)");
        return;
    };
    let port = 10809;
    let backing = SlowBacking::start(&ns, port);
    let uri = format!("nbd://{}:{port}/", ns.addr);

    // Detection off: the read is still waiting 10 s after the cut (the behaviour before
    // --nbd-dead-after; nothing would ever end it).
    let off = read_across_a_cut(&ns, &uri, "0", Duration::from_secs(10));
    assert!(off.is_none(), "with detection off the read ended: {off:?}");

    // A new namespace for the second half: the link of the first is cut for good.
    drop(backing);
    drop(ns);
    let ns = NetNs::new("dc").expect("a second namespace");
    let _backing = SlowBacking::start(&ns, port);
    let uri = format!("nbd://{}:{port}/", ns.addr);
    let on = read_across_a_cut(&ns, &uri, "3", Duration::from_secs(30));
    let Some((got, took)) = on else { panic!("the read still waits 30 s after the cut") };
    let e = got.expect_err("the backing is gone: the read must fail");
    assert!(e.contains("NBD_EIO"), "{e}");
    // The READ was acknowledged at about 0 s; the kernel gives up 3 s of silence later.
    assert!(took >= Duration::from_secs(2) && took < Duration::from_secs(9), "{took:?}: {e}");
    eprintln!("the read failed {took:?} after it was sent (link cut at 1 s): {e}");
}
