//! The docs agree with the code, so they cannot rot unseen:
//!
//! - every `ember` command line named in README.md and docs/ (code blocks and inline code)
//!   parses against the CLI: each subcommand exists, each flag is one of its flags (taking a
//!   value or not, as `ember <cmd> --help` says), and no command gets more positional
//!   arguments than it takes;
//! - every `crates/...` path named in them exists;
//! - every relative link resolves, to a file and to a heading in it;
//! - docs/design/engine.md's file map names every file of `crates/engine/src`, and no file
//!   that is gone;
//! - no doc names a path outside the repository or tells the history of the work.
//!
//! The generated pages (`docs/reference/cli.md`, `docs/benchmarks.md`,
//! `docs/reproductions.md`) are not checked: their generators read the same definitions.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Pages written by generators from the CLI definition and the bench results.
const GENERATED: [&str; 3] =
    ["docs/reference/cli.md", "docs/benchmarks.md", "docs/reproductions.md"];

fn repo() -> PathBuf {
    normalize(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../.."))
}

fn read(path: &Path) -> String {
    match std::fs::read_to_string(path) {
        Ok(s) => s,
        Err(e) => panic!("reading {}: {e}", path.display()),
    }
}

fn rel(path: &Path) -> String {
    path.strip_prefix(repo()).unwrap_or(path).display().to_string()
}

fn markdown_under(dir: &Path, out: &mut Vec<PathBuf>) {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(_) => return,
    };
    let mut paths: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    paths.sort();
    for p in paths {
        if p.is_dir() {
            markdown_under(&p, out);
        } else if p.extension().is_some_and(|x| x == "md") {
            out.push(p);
        }
    }
}

/// README.md, ROADMAP.md, CHANGELOG.md and every page under docs/, without the generated ones.
fn doc_files() -> Vec<PathBuf> {
    let root = repo();
    let mut files: Vec<PathBuf> = ["README.md", "ROADMAP.md", "CHANGELOG.md"]
        .iter()
        .map(|f| root.join(f))
        .filter(|p| p.exists())
        .collect();
    markdown_under(&root.join("docs"), &mut files);
    files.retain(|p| !GENERATED.contains(&rel(p).as_str()));
    files
}

/// A piece of a markdown file that may hold commands: a fenced block's line, or an inline
/// code span of prose.
struct Snippet {
    line: usize,
    text: String,
    /// The fence's language ("" for none); `None` for an inline code span.
    language: Option<String>,
}

/// The fenced blocks' logical lines (continuations joined) and the inline code spans.
fn snippets(text: &str) -> Vec<Snippet> {
    let mut out = Vec::new();
    let mut fence: Option<(String, String)> = None;
    let mut pending: Option<(usize, String)> = None;
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        if let Some((marker, language)) = &fence {
            if line.trim_start().starts_with(marker.as_str()) {
                if let Some((l, t)) = pending.take() {
                    out.push(Snippet { line: l, text: t, language: Some(language.clone()) });
                }
                fence = None;
                continue;
            }
            let (start, mut joined) = pending.take().unwrap_or((n, String::new()));
            if let Some(body) = line.strip_suffix('\\') {
                joined.push_str(body);
                joined.push(' ');
                pending = Some((start, joined));
            } else {
                joined.push_str(line);
                out.push(Snippet { line: start, text: joined, language: Some(language.clone()) });
            }
            continue;
        }
        let trimmed = line.trim_start();
        if trimmed.starts_with("```") {
            let ticks = trimmed.chars().take_while(|&c| c == '`').count();
            let info = trimmed[ticks..].trim();
            let language = info.split_whitespace().next().unwrap_or("").to_string();
            fence = Some(("`".repeat(ticks), language));
            continue;
        }
        let mut rest = line;
        while let Some(a) = rest.find('`') {
            let after = &rest[a + 1..];
            match after.find('`') {
                Some(b) => {
                    out.push(Snippet { line: n, text: after[..b].to_string(), language: None });
                    rest = &after[b + 1..];
                }
                None => break,
            }
        }
    }
    out
}

/// One command of the CLI as its `--help` describes it.
#[derive(Default, Debug)]
struct Cmd {
    /// Long flags, and whether each takes a value.
    long: BTreeMap<String, bool>,
    /// Short flags, and whether each takes a value.
    short: BTreeMap<char, bool>,
    /// Positional arguments it takes at most (`None`: any number).
    positionals: Option<usize>,
    subcommands: BTreeMap<String, Cmd>,
}

fn help(path: &[&str]) -> String {
    let mut args: Vec<&str> = path.to_vec();
    args.push("--help");
    match Command::new(env!("CARGO_BIN_EXE_ember")).args(&args).output() {
        Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout).into_owned(),
        Ok(o) => panic!("ember {}: {}", args.join(" "), String::from_utf8_lossy(&o.stderr)),
        Err(e) => panic!("cannot run ember: {e}"),
    }
}

/// Parse one option line of clap's help (`  -o, --output <OUTPUT>`, `      --json`).
fn option_line(line: &str, cmd: &mut Cmd) {
    let indent = line.len() - line.trim_start().len();
    if !(indent == 2 || indent == 6) || !line.trim_start().starts_with('-') {
        return;
    }
    let words: Vec<&str> = line.split_whitespace().collect();
    let mut i = 0;
    let mut short = None;
    if let Some(s) = words[0].strip_suffix(',') {
        short = s.strip_prefix('-').and_then(|c| c.chars().next());
        i = 1;
    }
    let Some(long) = words.get(i).and_then(|w| w.strip_prefix("--")) else {
        if let (Some(c), Some(w)) = (words[0].strip_prefix('-'), words.get(1)) {
            // A short flag alone: `-q  No progress bar`.
            if let Some(c) = c.chars().next() {
                cmd.short.insert(c, w.starts_with('<'));
            }
        }
        return;
    };
    let takes_value = words.get(i + 1).is_some_and(|w| w.starts_with('<') || w.starts_with("[<"));
    cmd.long.insert(long.to_string(), takes_value);
    if let Some(c) = short {
        cmd.short.insert(c, takes_value);
    }
}

fn load(path: &[&str]) -> Cmd {
    let text = help(path);
    let mut cmd = Cmd { positionals: Some(0), ..Cmd::default() };
    let mut section = String::new();
    let mut subs = Vec::new();
    for line in text.lines() {
        if !line.starts_with(' ') && line.ends_with(':') {
            section = line.trim_end_matches(':').to_string();
            continue;
        }
        match section.as_str() {
            "Commands" => {
                let indent = line.len() - line.trim_start().len();
                if indent == 2 {
                    if let Some(name) = line.split_whitespace().next() {
                        if name != "help" {
                            subs.push(name.to_string());
                        }
                    }
                }
            }
            "Arguments" => {
                let t = line.trim_start();
                let indent = line.len() - t.len();
                if indent == 2 && (t.starts_with('<') || t.starts_with('[')) {
                    let word = t.split_whitespace().next().unwrap_or("");
                    cmd.positionals = match (cmd.positionals, word.ends_with("...")) {
                        (Some(n), false) => Some(n + 1),
                        _ => None,
                    };
                }
            }
            _ => option_line(line, &mut cmd),
        }
    }
    for s in subs {
        let mut sub_path = path.to_vec();
        sub_path.push(&s);
        let sub = load(&sub_path);
        cmd.subcommands.insert(s.clone(), sub);
    }
    cmd
}

/// Split a snippet into shell words (quotes kept inside a word, stripped of their marks),
/// cutting commands at `|`, `;`, `&` and comments outside quotes and brackets.
fn commands(text: &str) -> Vec<Vec<String>> {
    let mut cmds = Vec::new();
    let mut words: Vec<String> = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut quote: Option<char> = None;
    let mut depth = 0i32;
    let chars = text.chars();
    let end_word = |word: &mut String, in_word: &mut bool, words: &mut Vec<String>| {
        if *in_word {
            words.push(std::mem::take(word));
            *in_word = false;
        }
    };
    for c in chars {
        if let Some(q) = quote {
            if c == q {
                quote = None;
            } else {
                word.push(c);
            }
            continue;
        }
        match c {
            '\'' | '"' => {
                quote = Some(c);
                in_word = true;
            }
            '[' | '(' => {
                depth += 1;
                word.push(c);
                in_word = true;
            }
            ']' | ')' => {
                depth -= 1;
                word.push(c);
                in_word = true;
            }
            '#' if !in_word => break,
            '|' | ';' | '&' if depth <= 0 => {
                end_word(&mut word, &mut in_word, &mut words);
                if !words.is_empty() {
                    cmds.push(std::mem::take(&mut words));
                }
            }
            c if c.is_whitespace() => end_word(&mut word, &mut in_word, &mut words),
            _ => {
                word.push(c);
                in_word = true;
            }
        }
    }
    end_word(&mut word, &mut in_word, &mut words);
    if !words.is_empty() {
        cmds.push(words);
    }
    cmds
}

/// The words after `ember`, if the command is an `ember` command line.
fn ember_args(words: &[String]) -> Option<&[String]> {
    let mut i = 0;
    while i < words.len() {
        let w = words[i].trim_start_matches('$');
        if w.is_empty() || ["sudo", "time", "exec", "env", "nohup"].contains(&w) || w.contains('=')
        {
            i += 1;
            continue;
        }
        break;
    }
    let first = words.get(i)?;
    if first != "ember" && !first.ends_with("/ember") {
        return None;
    }
    let rest = &words[i + 1..];
    // `ember serve: ready` is output, not a command: a command names a subcommand next.
    let next = rest.first()?;
    if !next.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        || next.starts_with('-')
    {
        return None;
    }
    Some(rest)
}

/// Check one `ember` command line against the CLI; the error says what does not parse.
fn check(cli: &Cmd, args: &[String]) -> Result<(), String> {
    let mut cmd = cli;
    let mut path = vec!["ember".to_string()];
    let mut i = 0;
    while !cmd.subcommands.is_empty() {
        let Some(w) = args.get(i) else { return Ok(()) };
        if let Some(flag) = w.strip_prefix("--") {
            // A flag of the parent before its subcommand (`ember ctl --control S status`).
            let (name, inline) = match flag.split_once('=') {
                Some((n, _)) => (n, true),
                None => (flag, false),
            };
            match cmd.long.get(name) {
                Some(&takes_value) if name != "help" && name != "version" => {
                    i += if takes_value && !inline { 2 } else { 1 };
                    continue;
                }
                _ => break,
            }
        }
        if w.starts_with('-') {
            break;
        }
        if w.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_') {
            return Ok(()); // a placeholder (`ember trace gen GENERATOR --help`)
        }
        match cmd.subcommands.get(w.as_str()) {
            Some(sub) => {
                cmd = sub;
                path.push(w.clone());
                i += 1;
            }
            None => return Err(format!("`{}` has no subcommand `{w}`", path.join(" "))),
        }
    }
    let mut positionals = 0usize;
    while i < args.len() {
        let w = args[i].trim_matches(|c| c == '[' || c == ']');
        i += 1;
        if w.is_empty() || ["...", "…", "|"].contains(&w) {
            continue;
        }
        if w.starts_with('>') || w.starts_with("2>") || w == "<" {
            if w == ">" || w == ">>" || w == "2>" || w == "<" {
                i += 1;
            }
            continue;
        }
        if w == "--" {
            break;
        }
        if let Some(flag) = w.strip_prefix("--") {
            let (name, inline) = match flag.split_once('=') {
                Some((n, _)) => (n, true),
                None => (flag, false),
            };
            if name == "help" || name == "version" {
                return Ok(());
            }
            match cmd.long.get(name) {
                Some(true) if !inline => i += 1,
                Some(_) => {}
                None => return Err(format!("`{}` has no flag `--{name}`", path.join(" "))),
            }
            continue;
        }
        if let Some(shorts) = w.strip_prefix('-') {
            if shorts.is_empty() || shorts.starts_with(|c: char| c.is_ascii_digit()) {
                positionals += 1;
                continue;
            }
            let c = shorts.chars().next().unwrap_or('?');
            match cmd.short.get(&c) {
                Some(true) if shorts.len() == 1 => i += 1,
                Some(_) => {}
                None if c == 'h' || c == 'V' => return Ok(()),
                None => return Err(format!("`{}` has no flag `-{c}`", path.join(" "))),
            }
            continue;
        }
        positionals += 1;
    }
    match cmd.positionals {
        Some(max) if positionals > max => Err(format!(
            "`{}` takes {max} positional argument(s), given {positionals}",
            path.join(" ")
        )),
        _ => Ok(()),
    }
}

#[test]
fn every_ember_command_in_the_docs_parses() {
    let cli = load(&[]);
    assert!(cli.subcommands.contains_key("serve"), "the CLI model has no `serve`: {cli:?}");
    let mut errors = Vec::new();
    let mut checked = 0;
    for file in doc_files() {
        if rel(&file) == "ROADMAP.md" || rel(&file) == "CHANGELOG.md" {
            continue; // what is not built yet, and spellings that are going away
        }
        for s in snippets(&read(&file)) {
            let runs_commands = match &s.language {
                None => true,
                Some(l) => ["", "sh", "bash", "text", "console"].contains(&l.as_str()),
            };
            if !runs_commands {
                continue;
            }
            for words in commands(&s.text) {
                if let Some(args) = ember_args(&words) {
                    checked += 1;
                    if let Err(e) = check(&cli, args) {
                        errors.push(format!("{}:{}: {e}: {}", rel(&file), s.line, s.text.trim()));
                    }
                }
            }
        }
    }
    assert!(checked > 100, "only {checked} ember command lines found in the docs");
    assert!(
        errors.is_empty(),
        "{} doc command(s) do not parse:\n{}",
        errors.len(),
        errors.join("\n")
    );
}

#[test]
fn the_checker_catches_what_does_not_parse() {
    let cli = load(&[]);
    let bad = [
        "ember replay T nbd://127.0.0.1:10809",
        "ember serve --cache c.img --backing d=d.img --no-such-flag",
        "ember trace gen nonesuch -o x",
        "ember sim t.csv --size",
    ];
    for line in bad.iter().take(3) {
        let words = &commands(line)[0];
        let args = ember_args(words).unwrap_or_default();
        assert!(check(&cli, args).is_err(), "not caught: {line}");
    }
    let good = [
        "ember replay T --server nbd://127.0.0.1:10809",
        "ember trace gen zipf --blocks 10 --requests 10 -o x.csv",
        "ember sim t.csv --policy lru,arc --size 1%,10% > out.txt",
        "ember ctl --control /run/ember/ember.sock set write-policy write-through",
        bad[3],
    ];
    for line in good {
        let words = &commands(line)[0];
        let args = ember_args(words).unwrap_or_default();
        assert_eq!(check(&cli, args), Ok(()), "{line}");
    }
}

/// Every `crates/...` path in `text`, without trailing punctuation; none with placeholders.
fn crate_paths(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let mut rest = line;
        while let Some(a) = rest.find("crates/") {
            let before = rest[..a].chars().last();
            let tail = &rest[a..];
            let len = tail
                .find(|c: char| !(c.is_ascii_alphanumeric() || "_./-*<>{}".contains(c)))
                .unwrap_or(tail.len());
            let path = tail[..len].trim_end_matches(['.', ',', ':', ')']);
            rest = &tail[len..];
            if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
                continue;
            }
            if !path.contains(['*', '<', '{']) {
                out.push((i + 1, path.to_string()));
            }
        }
    }
    out
}

#[test]
fn every_crates_path_in_the_docs_exists() {
    let mut missing = Vec::new();
    let mut checked = 0;
    for file in doc_files() {
        for (line, path) in crate_paths(&read(&file)) {
            checked += 1;
            if !repo().join(&path).exists() {
                missing.push(format!("{}:{line}: {path}", rel(&file)));
            }
        }
    }
    assert!(checked > 50, "only {checked} crates/ paths found in the docs");
    assert!(
        missing.is_empty(),
        "paths named in the docs that do not exist:\n{}",
        missing.join("\n")
    );
}

/// GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

fn anchors(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut in_fence = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_fence = !in_fence;
        } else if !in_fence && line.starts_with('#') {
            out.insert(anchor(line.trim_start_matches('#')));
        }
    }
    out
}

/// Every `](target)` of a markdown text outside code, with its line.
fn links(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut in_fence = false;
    for (i, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            in_fence = !in_fence;
            continue;
        }
        if in_fence {
            continue;
        }
        let mut rest = line;
        while let Some(a) = rest.find("](") {
            let tail = &rest[a + 2..];
            let Some(b) = tail.find(')') else { break };
            out.push((i + 1, tail[..b].to_string()));
            rest = &tail[b + 1..];
        }
    }
    out
}

/// `path` with `.` and `..` resolved by its components alone (the target may not exist).
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

#[test]
fn every_link_in_the_docs_resolves() {
    let mut broken = Vec::new();
    for file in doc_files() {
        let dir = file.parent().map(Path::to_path_buf).unwrap_or_else(repo);
        let text = read(&file);
        for (line, target) in links(&text) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (path, frag) = match target.split_once('#') {
                Some((p, f)) => (p.to_string(), Some(f.to_string())),
                None => (target.clone(), None),
            };
            let dest = if path.is_empty() { file.clone() } else { normalize(&dir.join(&path)) };
            if GENERATED.contains(&rel(&dest).as_str()) {
                continue;
            }
            if !dest.exists() {
                broken.push(format!("{}:{line}: {target}: no such file", rel(&file)));
                continue;
            }
            if let Some(f) = frag {
                if dest.extension().is_some_and(|x| x == "md")
                    && !anchors(&read(&dest)).contains(&f)
                {
                    broken.push(format!("{}:{line}: {target}: no such heading", rel(&file)));
                }
            }
        }
    }
    assert!(broken.is_empty(), "broken links in the docs:\n{}", broken.join("\n"));
}

#[test]
fn the_docs_tell_no_history_and_name_no_machine() {
    let mut found = Vec::new();
    for file in doc_files() {
        for (i, line) in read(&file).lines().enumerate() {
            let lower = line.to_lowercase();
            let words: Vec<&str> = lower.split(|c: char| !c.is_alphanumeric()).collect();
            let numbered = |what: &str| {
                words.windows(2).any(|w| {
                    w[0] == what && w[1].chars().all(|c| c.is_ascii_digit()) && !w[1].is_empty()
                })
            };
            let why = if lower.contains("../shared") || lower.contains("/work/") {
                Some("a path outside the repository")
            } else if numbered("issue") || numbered("session") || numbered("sessions") {
                Some("a work item or session")
            } else if lower.contains("worktree") {
                Some("a worktree")
            } else {
                None
            };
            if let Some(why) = why {
                found.push(format!("{}:{}: {why}: {}", rel(&file), i + 1, line.trim()));
            }
        }
    }
    assert!(found.is_empty(), "the docs should describe the software only:\n{}", found.join("\n"));
}

#[test]
fn the_engine_file_map_names_every_file() {
    let root = repo();
    let src = root.join("crates/engine/src");
    let mut files = Vec::new();
    fn walk(dir: &Path, src: &Path, out: &mut Vec<String>) {
        let Ok(entries) = std::fs::read_dir(dir) else { return };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, src, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p.strip_prefix(src).unwrap_or(&p).display().to_string());
            }
        }
    }
    walk(&src, &src, &mut files);
    let on_disk: BTreeSet<String> = files.into_iter().collect();
    let doc = read(&root.join("docs/design/engine.md"));
    let map_start = match doc.find("## File map") {
        Some(a) => a,
        None => panic!("docs/design/engine.md has no `## File map` section"),
    };
    let mut in_fence = false;
    let mut named = BTreeSet::new();
    for line in doc[map_start..].lines().skip(1) {
        if line.starts_with("```") {
            if in_fence {
                break;
            }
            in_fence = true;
            continue;
        }
        if in_fence && !line.starts_with(' ') {
            if let Some(first) = line.split_whitespace().next() {
                if first.ends_with(".rs") {
                    named.insert(first.to_string());
                }
            }
        }
    }
    let missing: Vec<&String> = on_disk.difference(&named).collect();
    let gone: Vec<&String> = named.difference(&on_disk).collect();
    assert!(
        missing.is_empty() && gone.is_empty(),
        "docs/design/engine.md's file map: files it does not name: {missing:?}; files it names \
         that do not exist: {gone:?}"
    );
}
