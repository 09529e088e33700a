//! What `ember generate` makes from the command-line definition: the committed
//! `docs/reference/cli.md` equals what the binary renders, there is a man page for every
//! command, completions for each shell, `make install-files` installs them all, and no help
//! text quotes a measurement.

mod serve_support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serve_support::{ember, run, run_status, skip_or_fail};

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn generated_markdown() -> String {
    run(Command::new(ember()).args(["generate", "markdown", "-"]), Duration::from_secs(30))
}

/// The command paths of the reference's sections: `ember`, `ember serve`, `ember trace gen zipf`.
fn command_paths(markdown: &str) -> Vec<String> {
    markdown
        .lines()
        .filter_map(|l| l.strip_prefix("## "))
        .filter(|h| h.starts_with("ember"))
        .map(str::to_string)
        .collect()
}

#[test]
fn committed_cli_reference_is_what_the_binary_generates() {
    let committed_path = repo_root().join("docs/reference/cli.md");
    let committed = std::fs::read_to_string(&committed_path).unwrap_or_default();
    let generated = generated_markdown();
    if committed != generated {
        let line = committed
            .lines()
            .zip(generated.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(committed.lines().count().min(generated.lines().count()));
        panic!(
            "docs/reference/cli.md is not what the binary generates (first difference at line \
             {}): run `make cli-reference` (or `target/release/ember generate markdown \
             docs/reference/cli.md`) and commit the result",
            line + 1
        );
    }
    let paths = command_paths(&generated);
    for want in ["ember", "ember serve", "ember trace gen zipf", "ember warmup advise"] {
        assert!(paths.iter().any(|p| p == want), "no section for `{want}` in {paths:?}");
    }
    assert!(!paths.iter().any(|p| p.contains("generate")), "the hidden command is listed");
    assert!(generated.contains("- `--write-policy <WRITE_POLICY>`"), "a flag is missing");
    assert!(generated.contains("Default: `lru`."), "a default is missing");
}

/// Phrases that report how fast something ran rather than what a flag does.
fn measurement(text: &str) -> Option<&'static str> {
    let lower = text.to_lowercase();
    let words: [(&str, &str); 7] = [
        ("µs", "microseconds"),
        ("iops", "IOPS"),
        ("measur", "a measurement"),
        ("req/s", "a request rate"),
        ("requests a second", "a request rate"),
        ("bench", "a benchmark"),
        ("times as fast", "a speed comparison"),
    ];
    if let Some((_, what)) = words.iter().find(|(w, _)| lower.contains(w)) {
        return Some(what);
    }
    // "30% more", "2.5x faster"
    let tokens: Vec<&str> = lower.split_whitespace().collect();
    for pair in tokens.windows(2) {
        let number = pair[0].trim_end_matches(['%', 'x']);
        let is_number = !number.is_empty() && number.parse::<f64>().is_ok();
        let quantified = pair[0].ends_with('%') || pair[0].ends_with('x');
        if is_number && quantified && matches!(pair[1], "more" | "less" | "fewer" | "faster") {
            return Some("a measured difference");
        }
    }
    None
}

/// A help text that quotes numbers of a model on purpose, not a measurement of ember.
const NOT_MEASUREMENTS: [&str; 1] = [
    // SieveStore's device model: the X25-E's rated IOPS, a parameter of the simulation.
    "- `--device <DEVICE>`: SSD model for drive IOPS occupancy",
];

#[test]
fn help_texts_quote_no_measurements() {
    assert_eq!(
        measurement("8 workers serve about 30% more cache hits"),
        Some("a measured difference")
    );
    assert_eq!(measurement("on the 2-core bench machine"), Some("a benchmark"));
    assert_eq!(measurement("p99 of 41 µs"), Some("microseconds"));
    assert_eq!(measurement("about 9 M req/s"), Some("a request rate"));
    assert_eq!(measurement("a percentage of the working set (1%, 10%)"), None);
    assert_eq!(measurement("replay this many times faster than recorded"), None);
    let markdown = generated_markdown();
    let mut section = String::new();
    let mut found = Vec::new();
    for line in markdown.lines() {
        if let Some(h) = line.strip_prefix("## ") {
            section = h.to_string();
        }
        if NOT_MEASUREMENTS.iter().any(|allowed| line.starts_with(allowed)) {
            continue;
        }
        if let Some(what) = measurement(line) {
            found.push(format!("`{section}`: {what}: {line}"));
        }
    }
    assert!(
        found.is_empty(),
        "help texts describe what a flag does, not how fast it ran:\n{}",
        found.join("\n")
    );
}

#[test]
fn a_man_page_for_every_command() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = run_status(
        Command::new(ember()).args(["generate", "man"]).arg(dir.path()),
        Duration::from_secs(30),
    );
    assert!(out.status.success(), "{}", out.stderr);
    for path in command_paths(&generated_markdown()) {
        let page = dir.path().join(format!("{}.1", path.replace(' ', "-")));
        let text = std::fs::read_to_string(&page)
            .unwrap_or_else(|e| panic!("no man page for `{path}` ({}): {e}", page.display()));
        for section in [".SH NAME", ".SH SYNOPSIS", ".SH DESCRIPTION"] {
            assert!(text.contains(section), "{} has no {section}", page.display());
        }
        if path != "ember" {
            assert!(text.contains(".SH \"SEE ALSO\""), "{} links nowhere", page.display());
        }
    }
    assert!(!dir.path().join("ember-generate.1").exists(), "the hidden command has a page");
}

#[test]
fn completions_for_bash_zsh_and_fish() {
    for shell in ["bash", "zsh", "fish"] {
        let script = run(
            Command::new(ember()).args(["generate", "completions", shell]),
            Duration::from_secs(30),
        );
        for word in ["serve", "sievestore", "write-policy"] {
            assert!(script.contains(word), "{shell} completion lacks `{word}`");
        }
    }
}

#[test]
fn make_install_places_the_binary_pages_and_completions() {
    if Command::new("make").arg("--version").output().is_err()
        && skip_or_fail("make is not installed")
    {
        return;
    }
    let prefix = tempfile::tempdir().expect("tempdir");
    let out = run_status(
        Command::new("make")
            .current_dir(repo_root())
            .arg("--no-print-directory")
            .arg("install-files")
            .arg(format!("PREFIX={}", prefix.path().display()))
            .arg(format!("EMBER_BIN={}", ember().display())),
        Duration::from_secs(60),
    );
    assert!(
        out.status.success(),
        "make install-files failed:\n{}{}",
        out.stdout.clone(),
        out.stderr
    );
    let p = prefix.path();
    let version = run(Command::new(p.join("bin/ember")).arg("--version"), Duration::from_secs(10));
    assert!(version.starts_with("ember "), "{version}");
    for file in [
        "share/man/man1/ember.1",
        "share/man/man1/ember-serve.1",
        "share/man/man1/ember-trace-gen-zipf.1",
        "share/bash-completion/completions/ember",
        "share/zsh/site-functions/_ember",
        "share/fish/vendor_completions.d/ember.fish",
    ] {
        let meta = std::fs::metadata(p.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
        assert!(meta.len() > 0, "{file} is empty");
    }
    if Command::new("man").arg("--version").output().is_err()
        && skip_or_fail("man is not installed (man-db)")
    {
        return;
    }
    let page = p.join("share/man/man1/ember-serve.1");
    let out = run_status(
        Command::new("man").arg("-l").arg(&page).env("MANPAGER", "cat").env("MANWIDTH", "80"),
        Duration::from_secs(30),
    );
    let text = out.stdout.clone();
    assert!(out.status.success(), "man -l failed: {}", out.stderr);
    for want in ["NAME", "ember-serve - Serve a cache device", "SYNOPSIS", "--write-policy"] {
        assert!(text.contains(want), "the rendered page lacks `{want}`:\n{text}");
    }
}
