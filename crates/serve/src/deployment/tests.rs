use super::*;

/// Writes a two-client deployment into `dir`: the array over two files, each client over
/// one of its exports through its Unix socket. Returns the topology file.
fn write_deployment(dir: &Path, client1_export: &str, extra: &str) -> PathBuf {
    let w = |name: &str, text: String| std::fs::write(dir.join(name), text).unwrap();
    w(
        "array.toml",
        "[cache]\ndevice = \"mem:28M\"\n\n[[volume]]\nname = \"disk0\"\nbacking = \"disk0.img\"\n\n\
         [[volume]]\nname = \"disk1\"\nbacking = \"disk1.img\"\n\n[listen]\nunix = \"array.sock\"\n\n\
         [tiers]\narray-scheme = \"demote\"\n"
            .into(),
    );
    for (k, export) in [(0, "disk0"), (1, client1_export)] {
        w(
            &format!("client{k}.toml"),
            format!(
                "[cache]\ndevice = \"client{k}.img\"\nsize = \"16M\"\n\n[[volume]]\nname = \"disk\"\n\
                 backing = \"nbd+unix:///{export}?socket=array.sock\"\n\n[listen]\nunix = \
                 \"client{k}.sock\"\n\n[tiers]\ndemote = true\n"
            ),
        );
    }
    let topology = format!(
        "[[tier]]\nname = \"client0\"\nconfig = \"client0.toml\"\nbacking = \"array\"\n\n\
         [[tier]]\nname = \"array\"\nconfig = \"array.toml\"\nlatency-ms = 0.2\n\
         backing-latency-ms = 10\n\n\
         [[tier]]\nname = \"client1\"\nconfig = \"client1.toml\"\nbacking = \"array\"\n\n\
         [[route]]\ntrace-volume = \"client0\"\ntier = \"client0\"\n\n\
         [[route]]\ntrace-volume = \"client1\"\ntier = \"client1\"\nvolume = \"disk\"\n{extra}"
    );
    let path = dir.join("deployment.toml");
    std::fs::write(&path, topology).unwrap();
    path
}

#[test]
fn a_deployment_loads_its_tiers_config_files_and_checks_their_links() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_deployment(dir.path(), "disk1", "");
    let d = Deployment::load(&path).unwrap();
    let names: Vec<&str> = d.tiers.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["array", "client0", "client1"], "the array first");
    assert_eq!(d.array().role, Role::Array);
    assert_eq!(d.array().config.tiers.array_scheme.as_deref(), Some("demote"));
    assert_eq!(d.array().capacity_blocks, 6092, "mem:28M, as the running server reports it");
    assert_eq!(d.clients()[0].capacity_blocks, 3044, "a 16M file");
    assert_eq!(d.clients()[0].array_volumes, [0]);
    assert_eq!(d.clients()[1].array_volumes, [1]);
    assert_eq!((d.array().latency_ms, d.array().backing_latency_ms), (0.2, 10.0));
    assert_eq!(d.array().aborted_demote_ms, DEFAULT_ABORTED_DEMOTE_MS);
    assert_eq!(d.routes[1], Route { trace_volume: "client1".into(), tier: 2, volume: 0 });
    assert_eq!(d.state_dir, dir.path().join("deployment.state"));
    assert_eq!(d.array().crash_after_requests, None);
    let text = std::fs::read_to_string(&path).unwrap().replace(
        "backing-latency-ms = 10\n",
        "backing-latency-ms = 10\ncrash-after-requests = 500\n",
    );
    std::fs::write(&path, text).unwrap();
    assert_eq!(Deployment::load(&path).unwrap().array().crash_after_requests, Some(500));
}

#[test]
fn a_broken_topology_names_the_file_and_the_line() {
    let dir = tempfile::tempdir().unwrap();
    // client1 reads an export the array does not have: the error is at its `backing` line.
    let path = write_deployment(dir.path(), "disk9", "");
    let e = Deployment::load(&path).unwrap_err();
    assert_eq!(e.line, Some(15), "{e}");
    assert!(e.to_string().contains("exports no \"disk9\""), "{e}");
    let path = write_deployment(
        dir.path(),
        "disk1",
        "\n[[route]]\ntrace-volume = \"x\"\ntier = \"array\"\n",
    );
    let e = Deployment::load(&path).unwrap_err();
    assert_eq!(e.line, Some(28), "{e}");
    assert!(e.to_string().contains("is the array tier"), "{e}");
    // The laboratory crashes the array tier only.
    let text = std::fs::read_to_string(&path).unwrap().replace(
        "config = \"client1.toml\"\n",
        "config = \"client1.toml\"\ncrash-after-requests = 10\n",
    );
    std::fs::write(&path, text).unwrap();
    let e = Deployment::load(&path).unwrap_err();
    assert_eq!(e.line, Some(15), "{e}");
    assert!(e.to_string().contains("the array tier's"), "{e}");
    // A config file's own error names that file and its line, as `ember serve` does.
    std::fs::write(
        dir.path().join("client0.toml"),
        "[cache]\ndevice = \"c.img\"\nsize = \"16M\"\nmystery = 2\n",
    )
    .unwrap();
    let e = Deployment::load(&path).unwrap_err();
    assert!(e.file.ends_with("client0.toml") && e.line == Some(4), "{e}");
}
