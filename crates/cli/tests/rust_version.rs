//! The workspace's declared `rust-version` is one it can build with: at least the
//! `rust-version` of every package in Cargo.lock (as `cargo metadata` reports them), and
//! inherited by every crate of the workspace, so clippy's `incompatible_msrv` lint checks the
//! std APIs ember uses against it under `make lint`.

use std::path::Path;
use std::process::Command;

/// "1.89" or "1.85.0" as comparable numbers (a missing patch is 0).
fn version(text: &str) -> Option<(u64, u64, u64)> {
    let mut parts = text.trim().split('.').map(|p| p.parse::<u64>());
    let major = parts.next()?.ok()?;
    let minor = parts.next()?.ok()?;
    let patch = match parts.next() {
        Some(p) => p.ok()?,
        None => 0,
    };
    Some((major, minor, patch))
}

#[test]
fn declared_rust_version_covers_every_dependency() {
    assert_eq!(version("1.89"), Some((1, 89, 0)));
    assert!(version("1.85.1") < version("1.89"));
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let out = Command::new(cargo)
        .current_dir(&root)
        .args(["metadata", "--format-version", "1", "--locked", "--offline"])
        .output()
        .expect("cargo metadata runs");
    assert!(out.status.success(), "cargo metadata: {}", String::from_utf8_lossy(&out.stderr));
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).expect("metadata is JSON");
    let members: Vec<&str> = meta["workspace_members"]
        .as_array()
        .expect("workspace_members")
        .iter()
        .filter_map(|m| m.as_str())
        .collect();
    let packages = meta["packages"].as_array().expect("packages");
    let mut declared = None;
    let mut needed = Vec::new();
    for p in packages {
        let name = p["name"].as_str().unwrap_or("?");
        let rust_version = p["rust_version"].as_str();
        let id = p["id"].as_str().unwrap_or("");
        if members.contains(&id) {
            let v = rust_version.unwrap_or_else(|| {
                panic!("{name} declares no rust-version: add `rust-version.workspace = true`")
            });
            assert!(
                declared.is_none_or(|d| d == v),
                "{name} declares rust-version {v}, another crate {declared:?}"
            );
            declared = Some(v);
        } else if let Some(v) = rust_version {
            needed.push((version(v).unwrap_or_else(|| panic!("{name}: bad {v}")), name, v));
        }
    }
    let declared = declared.expect("the workspace has members");
    let declared_v = version(declared).expect("a valid rust-version");
    let too_new: Vec<String> = needed
        .iter()
        .filter(|(v, _, _)| *v > declared_v)
        .map(|(_, name, v)| format!("{name} needs {v}"))
        .collect();
    assert!(
        too_new.is_empty(),
        "Cargo.toml declares rust-version {declared}, but {}",
        too_new.join(", ")
    );
}
