use super::*;
use crate::config::BackingVolume;

fn write(dir: &Path, text: &str) -> PathBuf {
    let p = dir.join("web.toml");
    std::fs::write(&p, text).unwrap();
    p
}

const GOOD: &str = r#"# a cache
[cache]
device = "mem:64MiB"

[[volume]]
name = "web"
backing = "web.img"

[live]
write-policy = "write-through"
epoch-count-memory = "1MiB"

[live.limits]
buffer-budget = "64MiB"
handshake-deadline = "2500ms"

[warmup]
log-interval = "20ms"
"#;

fn flags() -> ServeConfig {
    ServeConfig::new("flag.img", vec![BackingVolume::new("f", "f.img")])
}

#[test]
fn sizes_and_durations_are_read_as_written_and_flags_override() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(dir.path(), GOOD);
    let src = ConfigSource::new(Some(file.clone()), flags(), &[]).unwrap();
    let c = parse_with(&file, GOOD, &src.overrides).unwrap();
    assert_eq!(c.cache.device, PathBuf::from("mem:64MiB"));
    assert_eq!(c.live.epoch_count_memory, 1 << 20);
    assert_eq!(c.live.limits.buffer_budget, 64 << 20);
    assert_eq!(c.live.limits.handshake_deadline_secs, 2.5);
    assert_eq!(c.warmup.log_interval, std::time::Duration::from_millis(20));
    assert_eq!(src.name(&c).as_deref(), Some("web"));

    let mut f = flags();
    f.live.write_policy = "write-around".into();
    let src = ConfigSource::new(Some(file.clone()), f, &["write-policy", "backing"]).unwrap();
    let c = parse_with(&file, GOOD, &src.overrides).unwrap();
    assert_eq!(c.live.write_policy, "write-around");
    assert_eq!(c.volumes[0].name, "f");
    assert_eq!(c.cache.device, PathBuf::from("mem:64MiB"));
    assert!(src.overridden(Key::find("write-policy").unwrap()));

    // The effective configuration printed as TOML reads back as itself.
    let printed = toml::to_string(&c).unwrap();
    let back = parse_with(&file, &printed, &toml::Table::new()).unwrap();
    assert_eq!(back, c);
}

#[test]
fn errors_name_the_file_the_line_and_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let err = |text: &str| {
        let file = write(dir.path(), text);
        ConfigSource::new(Some(file), flags(), &[]).unwrap().load().unwrap_err()
    };
    let e = err(&GOOD.replace("write-policy = \"write-through\"", "colour = 1"));
    assert_eq!((e.line, e.key.as_deref()), (Some(10), Some("live.colour")), "{e}");
    assert!(e.message.contains("unknown field `colour`"), "{e}");
    assert!(e.to_string().starts_with(&format!("{}:10: key live.colour:", e.file.display())));

    let e = err(&GOOD.replace("\"1MiB\"", "\"1 parsec\""));
    assert_eq!((e.line, e.key.as_deref()), (Some(11), Some("live.epoch-count-memory")), "{e}");

    let e = err(&GOOD.replace("\"write-through\"", "\"write-sideways\""));
    assert_eq!((e.line, e.key.as_deref()), (Some(10), Some("live.write-policy")), "{e}");
    assert!(e.message.contains("write-sideways"), "{e}");

    let e = err("[cache\n");
    assert_eq!(e.line, Some(1), "{e}");

    let e = err("[[volume]]\nname = \"v\"\nbacking = \"b\"\n");
    assert!(e.message.contains("no cache device"), "{e}");

    let missing = dir.path().join("missing.toml");
    let e = ConfigSource::new(Some(missing.clone()), flags(), &[]).unwrap().load().unwrap_err();
    assert_eq!(e.file, missing);
    assert!(e.message.contains("cannot read"), "{e}");
}

#[test]
fn a_volumes_own_settings_are_read_and_a_malformed_one_is_located() {
    let dir = tempfile::tempdir().unwrap();
    let with = |extra: &str| {
        GOOD.replace("backing = \"web.img\"\n", &format!("backing = \"web.img\"\n{extra}\n"))
    };
    let load = |text: &str| {
        let file = write(dir.path(), text);
        ConfigSource::new(Some(file), flags(), &[]).unwrap().load()
    };
    let c = load(&with(
        "write-policy = \"write-around\"\nadmission = \"sievestore-c\"\nsieve = { t1 = 3 }\n\
         seq-cutoff = { policy = \"always\", read = \"1MiB\" }",
    ))
    .unwrap();
    let own = c.volumes[0].own(&c.live, ember_engine::WriteMode::WriteThrough).unwrap();
    assert_eq!(own.write_mode, Some(ember_engine::WriteMode::WriteAround));
    assert_eq!(own.sieve.as_ref().map(|s| s.name()), Some("sievestore-c"));
    let cut = own.seq_cutoff.unwrap();
    assert_eq!((cut.read_bytes, cut.write_bytes), (1 << 20, 0), "write: the cache-wide 0");
    // The cache-wide policy named again is no setting of its own.
    let c = load(&with("write-policy = \"write-through\"")).unwrap();
    let own = c.volumes[0].own(&c.live, ember_engine::WriteMode::WriteThrough).unwrap();
    assert_eq!((own.write_mode, own.sieve.is_some(), own.seq_cutoff), (None, false, None));

    let cases = [
        ("colour = 1", "volume.colour", "unknown field `colour`"),
        ("seq-cutoff = { read = \"lots\" }", "volume.seq-cutoff", "lots"),
        ("write-policy = \"write-back-persist\"", "volume.write-policy", "[[volume]] web"),
        ("write-policy = \"sideways\"", "volume.write-policy", "sideways"),
        ("admission = \"sievestore-d\"", "volume.admission", "discrete sieve"),
        ("seq-cutoff = { policy = \"sometimes\" }", "volume.seq-cutoff.policy", "sometimes"),
    ];
    for (line, key, says) in cases {
        let e = load(&with(line)).unwrap_err();
        assert_eq!((e.line, e.key.as_deref()), (Some(8), Some(key)), "{line}: {e}");
        assert!(e.message.contains(says), "{line}: {e}");
    }
}
