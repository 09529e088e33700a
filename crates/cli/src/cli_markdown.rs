//! The command-line reference in Markdown (`docs/reference/cli.md`), rendered from the clap
//! definition: one section per command, nested ones too, each with its description, its usage
//! line, its subcommands and every visible argument with its help, default and possible
//! values. `ember generate markdown` writes it, and a test checks that the committed file
//! equals what the binary renders.

use std::fmt::Write;

use clap::{Arg, ArgAction, Command};

/// The whole reference for the command line `cli`.
pub fn render(cli: Command) -> String {
    let mut cli = cli.disable_help_subcommand(true);
    cli.build();
    let name = cli.get_name().to_string();
    let mut out = String::new();
    let _ = writeln!(out, "# `{name}` command-line reference\n");
    let _ = writeln!(
        out,
        "Generated from the command's definition by `{name} generate markdown \
         docs/reference/cli.md`: edit the doc comments of the arguments in `crates/cli/src/`, \
         not this file. `{name} COMMAND --help` prints the same text, and `man {name}-COMMAND` \
         shows it as a manual page once `make install` has run.\n"
    );
    let mut all = Vec::new();
    collect(&cli, &mut all);
    let _ = writeln!(out, "## Commands\n");
    for cmd in &all {
        let path = bin_name(cmd);
        let depth = path.split(' ').count().saturating_sub(2);
        let _ = writeln!(
            out,
            "{}- [`{path}`](#{}){}",
            "  ".repeat(depth),
            anchor(&path),
            about(cmd).map(|a| format!(": {}", escape(&a))).unwrap_or_default()
        );
    }
    out.push('\n');
    for cmd in all {
        section(&mut out, cmd);
    }
    while out.ends_with("\n\n") {
        out.pop();
    }
    out
}

/// The subcommands a user sees (not hidden, not clap's own `help`).
pub fn visible_subcommands(cmd: &Command) -> impl Iterator<Item = &Command> {
    cmd.get_subcommands().filter(|c| !c.is_hide_set() && c.get_name() != "help")
}

/// `cmd` and every visible command below it, depth first.
fn collect<'a>(cmd: &'a Command, all: &mut Vec<&'a Command>) {
    all.push(cmd);
    for child in visible_subcommands(cmd) {
        collect(child, all);
    }
}

/// The full command path, `ember trace gen zipf`.
fn bin_name(cmd: &Command) -> String {
    cmd.get_bin_name().unwrap_or_else(|| cmd.get_name()).to_string()
}

/// The heading anchor GitHub derives from a heading of `path` in backticks.
fn anchor(path: &str) -> String {
    path.replace(' ', "-")
}

/// A command's one-line description.
fn about(cmd: &Command) -> Option<String> {
    cmd.get_about().map(|a| one_line(&a.to_string()))
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// One command's section.
fn section(out: &mut String, cmd: &Command) {
    let path = bin_name(cmd);
    let _ = writeln!(out, "## {path}\n");
    let description = cmd.get_long_about().or_else(|| cmd.get_about()).map(|t| t.to_string());
    if let Some(text) = description {
        let _ = writeln!(out, "{}\n", escape(text.trim()));
    }
    let usage = cmd.clone().render_usage().to_string();
    let usage = usage.trim().trim_start_matches("Usage:").trim();
    let _ = writeln!(out, "```text\n{usage}\n```\n");
    let children: Vec<&Command> = visible_subcommands(cmd).collect();
    if !children.is_empty() {
        let _ = writeln!(out, "Commands:\n");
        for child in children {
            let child_path = bin_name(child);
            let _ = writeln!(
                out,
                "- [`{}`](#{}){}",
                child.get_name(),
                anchor(&child_path),
                about(child).map(|a| format!(": {}", escape(&a))).unwrap_or_default()
            );
        }
        out.push('\n');
    }
    let args: Vec<&Arg> = cmd.get_arguments().filter(|a| shown(a)).collect();
    let mut headings: Vec<Option<&str>> = Vec::new();
    for a in &args {
        if !headings.contains(&a.get_help_heading()) {
            headings.push(a.get_help_heading());
        }
    }
    for heading in headings {
        let group: Vec<&&Arg> = args.iter().filter(|a| a.get_help_heading() == heading).collect();
        let title = match heading {
            Some(h) => h.to_string(),
            None if group.iter().all(|a| a.is_positional()) => "Arguments".to_string(),
            None => "Options".to_string(),
        };
        let _ = writeln!(out, "{title}:\n");
        for a in group {
            argument(out, a);
        }
        out.push('\n');
    }
}

/// Whether an argument appears in the reference: visible, and not clap's `--help`/`--version`.
fn shown(arg: &Arg) -> bool {
    !arg.is_hide_set()
        && !matches!(
            arg.get_action(),
            ArgAction::Help | ArgAction::HelpShort | ArgAction::HelpLong | ArgAction::Version
        )
}

/// One argument's entry: its spelling, then its help, default and possible values.
fn argument(out: &mut String, arg: &Arg) {
    let mut line = format!("- `{}`", spelling(arg));
    if arg.is_required_set() {
        line.push_str(" (required)");
    }
    let help = arg.get_long_help().or_else(|| arg.get_help()).map(|h| h.to_string());
    let mut body: Vec<String> = Vec::new();
    if let Some(help) = help {
        body.extend(escape(help.trim()).lines().map(str::to_string));
    }
    let takes_value = arg.get_action().takes_values();
    let defaults: Vec<String> =
        arg.get_default_values().iter().map(|v| v.to_string_lossy().into_owned()).collect();
    if takes_value && !defaults.is_empty() {
        body.push(format!("Default: `{}`.", defaults.join(",")));
    }
    let values: Vec<String> = arg
        .get_possible_values()
        .into_iter()
        .filter(|v| !v.is_hide_set())
        .map(|v| match v.get_help() {
            Some(h) => format!("`{}` ({})", v.get_name(), escape(&one_line(&h.to_string()))),
            None => format!("`{}`", v.get_name()),
        })
        .collect();
    if takes_value && !values.is_empty() {
        body.push(format!("Values: {}.", values.join(", ")));
    }
    out.push_str(&line);
    let mut first = true;
    for l in body {
        if first {
            out.push_str(": ");
            out.push_str(&l);
            first = false;
        } else if l.trim().is_empty() {
            out.push('\n');
        } else {
            out.push_str("\n  ");
            out.push_str(&l);
        }
    }
    out.push('\n');
}

/// How an argument is typed: `<TRACE>`, `-o, --output <PATH>`, `--json`.
fn spelling(arg: &Arg) -> String {
    let value_names: Vec<String> = match arg.get_value_names() {
        Some(names) => names.iter().map(|n| n.to_string()).collect(),
        None => vec![arg.get_id().as_str().to_uppercase()],
    };
    let many = arg.get_num_args().is_some_and(|n| n.max_values() > 1);
    let value = value_names.iter().map(|n| format!("<{n}>")).collect::<Vec<_>>().join(" ");
    let value = if many { format!("{value}...") } else { value };
    if arg.is_positional() {
        return value;
    }
    let mut names = Vec::new();
    if let Some(s) = arg.get_short() {
        names.push(format!("-{s}"));
    }
    if let Some(l) = arg.get_long() {
        names.push(format!("--{l}"));
    }
    for alias in arg.get_visible_aliases().unwrap_or_default() {
        names.push(format!("--{alias}"));
    }
    let names = names.join(", ");
    if arg.get_action().takes_values() {
        format!("{names} {value}")
    } else {
        names
    }
}

/// Escape Markdown's inline markup outside code spans, so a help text reads as written.
fn escape(text: &str) -> String {
    if !text.matches('`').count().is_multiple_of(2) {
        return escape_plain(text);
    }
    text.split('`')
        .enumerate()
        .map(|(i, part)| if i % 2 == 1 { part.to_string() } else { escape_plain(part) })
        .collect::<Vec<_>>()
        .join("`")
}

fn escape_plain(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '\\' | '*' | '_' | '<' | '>' | '[' | ']' | '|') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup_but_not_code_spans() {
        assert_eq!(escape("a_b `c_d` <e>"), "a\\_b `c_d` \\<e\\>");
        assert_eq!(escape("odd ` tick_"), "odd ` tick\\_");
    }

    #[test]
    fn renders_nested_commands_with_defaults_and_values() {
        let cli = Command::new("tool").subcommand(
            Command::new("run").about("Run it.").arg(
                Arg::new("mode")
                    .long("mode")
                    .help("How to run.")
                    .default_value("fast")
                    .value_parser(["fast", "slow"]),
            ),
        );
        let md = render(cli);
        assert!(md.contains("## tool run\n"), "{md}");
        assert!(md.contains("- [`tool run`](#tool-run): Run it."), "{md}");
        assert!(
            md.contains(
                "- `--mode <MODE>`: How to run.\n  Default: `fast`.\n  Values: `fast`, `slow`."
            ),
            "{md}"
        );
    }
}
