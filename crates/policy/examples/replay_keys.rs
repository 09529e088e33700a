//! Replay a key sequence through ember's replacement policies and print miss counts: the
//! ember side of `tests/peer/test_policy_exactness.py`.
//!
//! ```text
//! cargo run --release -p ember-policy --example replay_keys -- KEYS SPEC...
//! ```
//! `KEYS` is a file of little-endian `u64` block keys (numpy's `tofile`). Each `SPEC` is
//! `POLICY@CAPACITY`, `POLICY` any policy with its parameters as [`Spec`] parses it
//! (`lfu`, `slru:4:lcs` for libCacheSim's SLRU placement, `lruk:k=3`).
//! Every access is allocated on a miss; OPT gets `next_vtime` computed from the file.
//! Prints `SPEC MISSES` per spec.

use ember_policy::replacement::{build, next_vtimes, Replacement, Spec};
use ember_policy::Access;
use std::process::ExitCode;

fn parse_spec(spec: &str) -> Result<(Box<dyn Replacement>, bool), String> {
    let (policy, cap) =
        spec.split_once('@').ok_or_else(|| format!("spec `{spec}`: expected POLICY@CAPACITY"))?;
    let capacity: usize =
        cap.parse().map_err(|e| format!("spec `{spec}`: capacity `{cap}`: {e}"))?;
    let policy: Spec = policy.parse().map_err(|e| format!("spec `{spec}`: {e}"))?;
    Ok((build(policy, capacity), policy.needs_oracle()))
}

fn run() -> Result<(), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (path, specs) = args.split_first().ok_or("usage: replay_keys KEYS SPEC...")?;
    let bytes = std::fs::read(path).map_err(|e| format!("{path}: {e}"))?;
    if bytes.len() % 8 != 0 {
        return Err(format!("{path}: {} bytes is not a whole number of u64 keys", bytes.len()));
    }
    let keys: Vec<u64> = bytes
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]))
        .collect();
    let mut next: Option<Vec<u64>> = None;
    for spec in specs {
        let (mut policy, oracle) = parse_spec(spec)?;
        if oracle && next.is_none() {
            next = Some(next_vtimes(&keys));
        }
        let mut misses = 0u64;
        for (t, &key) in keys.iter().enumerate() {
            let mut a = Access::read(key, t as u64);
            if let (true, Some(n)) = (oracle, &next) {
                a.next_vtime = n[t];
            }
            if !policy.access(&a).0 {
                misses += 1;
            }
        }
        println!("{spec} {misses}");
    }
    Ok(())
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("replay_keys: {e}");
            ExitCode::FAILURE
        }
    }
}
