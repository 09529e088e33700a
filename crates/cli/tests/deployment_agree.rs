//! The laboratory predicts a deployment from its own config files (docs/guide/deployment.md):
//! two client tiers (`--demote`, write-through, memory caches of 3044 blocks) over one array
//! tier (DEMOTE, a memory cache of about 15,200 blocks, libCacheSim's doorkeeper as its sieve,
//! exact, DEMOTEs sieved), written as `ember serve` config files and a topology file.
//! `ember sim --deployment` predicts every tier before `ember deploy up` starts them; each
//! client's part of a `multi-client` trace (disjoint working sets of 6000 blocks read at
//! random, 10 % writes) is then replayed through its client tier by its own `ember replay` at queue depth
//! 1, both at once; `ember deploy status` asks every tier and `ember deploy down` stops them.
//!
//! Equal, tier by tier: READ hits, write hits, allocation-writes, DEMOTEs sent (none
//! dropped), stored, aborted and refused by the array's sieve. Exact, although the two
//! replays interleave at the array as the machine schedules them, because the interleaving
//! changes nothing here: the clients' blocks are disjoint, the array holds every block the
//! clients touch (12,000: it never evicts) and its sieve decides per block (the exact
//! doorkeeper: admit at a block's second miss, a DEMOTE counting as one). A tier whose array
//! evicts, or a shared block, makes the array's counters depend on that interleaving
//! (crates/cli/tests/demote_multi_client.rs bounds it). The clock-driven counters (dirty
//! blocks, flushes) are 0 on both sides: write-through clients leave nothing dirty.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "integration-test helpers")]

mod serve_support;

use serve_support::*;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// Blocks in each client's working set.
const W: u64 = 6000;

/// The config files and the topology file, in `dir`.
fn write_deployment(dir: &Path) -> PathBuf {
    sparse_file(&dir.join("disk.img"), 64 << 20);
    let w = |name: &str, text: &str| std::fs::write(dir.join(name), text).unwrap();
    w(
        "array.toml",
        r#"metrics = "127.0.0.1:0"

[cache]
device = "mem:64M"

[[volume]]
name = "disk"
backing = "disk.img"

[listen]
unix = "array.sock"

[live]
admission = "bloom"

[live.sieve]
bloom-keys = 0
bloom-fpr = 0.0

[tiers]
array-scheme = "demote"
demote-admission = "sieve"
"#,
    );
    for k in 0..2 {
        w(
            &format!("client{k}.toml"),
            &format!(
                r#"metrics = "127.0.0.1:0"

[cache]
device = "mem:16M"

[[volume]]
name = "client{k}_0"
backing = "nbd+unix:///disk?socket=array.sock"

[listen]
unix = "client{k}.sock"

[live]
write-policy = "write-through"

[tiers]
demote = true
"#
            ),
        );
    }
    w(
        "deployment.toml",
        r#"[[tier]]
name = "array"
config = "array.toml"
latency-ms = 0.2
backing-latency-ms = 10.0

[[tier]]
name = "client0"
config = "client0.toml"
backing = "array"

[[tier]]
name = "client1"
config = "client1.toml"
backing = "array"

[[route]]
trace-volume = "client0_0"
tier = "client0"

[[route]]
trace-volume = "client1_0"
tier = "client1"
"#,
    );
    dir.join("deployment.toml")
}

/// The Prometheus address a tier printed in its log.
fn metrics_of(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap();
    let line =
        text.lines().find(|l| l.contains("metrics http://")).unwrap_or_else(|| panic!("{text}"));
    let at = line.find("http://").unwrap();
    line[at..].trim().to_string()
}

/// (name in the table, simulated, live).
type Check = (String, f64, f64);

#[test]
fn a_live_deployment_gives_the_counters_the_laboratory_predicted() {
    let dir = tempfile::tempdir().unwrap();
    let topology = write_deployment(dir.path());
    let trace = dir.path().join("mc.csv");
    let gen = format!(
        "multi-client --clients 2 --blocks-per-client {W} --sharing disjoint --pattern random \
         --timed-per-client {W} --write-ratio 0.1 --seed 5"
    );
    gen_trace(&gen, &trace);
    // The prediction, before any server runs.
    let sim_json = dir.path().join("sim.json");
    let line = "sim {} --deployment {} --json {} -q";
    ember_ok(&cmdline(line, &[&trace, &topology, &sim_json]));
    let sim = json_file(&sim_json);

    let up = ember_ok(&[Path::new("deploy"), Path::new("up"), &topology]);
    assert!(up.stdout.contains("array array: ready"), "{}", up.stdout);
    let state = dir.path().join("deployment.state");
    let text = std::fs::read_to_string(&trace).unwrap();
    let replays: Vec<_> = (0..2)
        .map(|k| {
            let p = dir.path().join(format!("client{k}.csv"));
            let tag = format!(",client{k},");
            let mine: String =
                text.lines().filter(|l| l.contains(&tag)).map(|l| format!("{l}\n")).collect();
            std::fs::write(&p, mine).unwrap();
            let sock = dir.path().join(format!("client{k}.sock"));
            Command::new(ember())
                .arg("replay")
                .arg(&p)
                .arg("--server")
                .arg(format!("nbd+unix:///?socket={}", sock.display()))
                .args(["--queue-depth", "1", "--connections", "1", "--json"])
                .stdout(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for r in replays {
        let (status, stdout) = wait_stdout(r, Duration::from_secs(300), "ember replay");
        assert!(status.success());
        let v: serde_json::Value = serde_json::from_slice(&stdout).unwrap();
        assert_eq!(v["verification"]["reads_failed"], 0, "{v:#}");
    }
    let status = ember_ok(&[Path::new("deploy"), Path::new("status"), &topology]).stdout;
    assert_eq!(status.lines().filter(|l| l.contains(".ctl")).count(), 3, "{status}");

    let mut checks: Vec<Check> = Vec::new();
    let sum = |s: &[ember_replay::Sample], names: &[&str]| -> f64 {
        names.iter().map(|n| metric(s, &format!("ember_cache_{n}_total"))).sum()
    };
    for k in 0..2 {
        let s = scrape(&metrics_of(&state.join(format!("client{k}.log"))));
        let c = &sim["clients"][k];
        for (key, live) in [
            ("read_hits", sum(&s, &["read_hits"])),
            ("write_hits", sum(&s, &["write_hits"])),
            ("allocation_writes", sum(&s, &["allocation_writes"])),
            ("demotes_sent", sum(&s, &["demotes_sent"])),
            ("demotes_dropped", sum(&s, &["demotes_dropped"])),
            ("dirty_writes", sum(&s, &["dirty_writes"])),
        ] {
            checks.push((format!("client{k} {key}"), c[key].as_f64().unwrap(), live));
        }
    }
    let s = scrape(&metrics_of(&state.join("array.log")));
    let a = &sim["array"];
    for (key, live) in [
        ("read_hits", sum(&s, &["read_hits"])),
        ("write_hits", sum(&s, &["write_hits"])),
        ("allocation_writes", sum(&s, &["allocation_writes"])),
        ("demotes_stored", sum(&s, &["demotes_stored"])),
        ("demotes_aborted", sum(&s, &["demotes_aborted_cached", "demotes_aborted_no_room"])),
        ("demotes_refused", sum(&s, &["demotes_refused_sieve"])),
    ] {
        checks.push((format!("array {key}"), a[key].as_f64().unwrap(), live));
    }
    let stale = sum(&s, &["demotes_refused_stale"]);
    let received = sum(&s, &["demotes_received"]);
    ember_ok(&[Path::new("deploy"), Path::new("down"), &topology]);
    assert!(!state.join("array.pid").exists() && !state.join("client0.pid").exists());

    let table: Vec<String> =
        checks.iter().map(|(n, sim, live)| format!("{n}: sim {sim} live {live}")).collect();
    eprintln!("{}\nstale {stale}, received {received}", table.join("\n"));
    assert_eq!(stale, 0.0, "no client writes another's blocks");
    for (n, sim, live) in &checks {
        assert_eq!(sim, live, "{n}\n{}", table.join("\n"));
    }
    let sent = checks.iter().filter(|c| c.0.ends_with("demotes_sent")).map(|c| c.1).sum::<f64>();
    assert_eq!(received, sent);
    let get = |n: &str| checks.iter().find(|c| c.0 == n).unwrap().1;
    // Every demoted block reached the client through the array, which counted that miss:
    // the DEMOTE is the block's second miss at the doorkeeper, admitted. The sieve's
    // refusals of DEMOTEs are the unit tests' (policy, engine state, sim deployment).
    assert!(get("array demotes_stored") > 0.0 && get("array allocation_writes") > 0.0);
    assert!(get("array read_hits") > 0.0 && get("client0 read_hits") > 0.0);
}

/// A topology with a mistake is refused by `ember sim --deployment` and `ember deploy up`
/// alike, naming the file and the line, before any server starts.
#[test]
fn a_broken_topology_names_its_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let topology = write_deployment(dir.path());
    let mut text = std::fs::read_to_string(&topology).unwrap();
    text.push_str("\n[[route]]\ntrace-volume = \"x\"\ntier = \"nobody\"\n");
    std::fs::write(&topology, text).unwrap();
    let trace = dir.path().join("t.csv");
    write_csv_trace(&trace, &[("client0_0".to_string(), false, 0, 4096)]);
    let want = format!("{}:27: no tier nobody", topology.display());
    let sim = ember_fails(&cmdline("sim {} --format csv --deployment {}", &[&trace, &topology]));
    assert!(sim.contains(&want), "{sim}");
    let up = ember_fails(&[Path::new("deploy"), Path::new("up"), &topology]);
    assert!(up.contains(&want), "{up}");
    assert!(!dir.path().join("deployment.state").join("array.pid").exists());
}
