//! `ember generate`: files made from the command-line definition itself, so they cannot drift
//! from it: one man page per command (`ember(1)`, `ember-serve(1)`, `ember-trace-gen-zipf(1)`,
//! ...), shell completions, and the Markdown reference `docs/reference/cli.md`
//! ([`crate::cli_markdown`]). `make install` runs it; the command is hidden from `--help`.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::Subcommand;
use clap_complete::Shell;

use crate::cli_markdown::visible_subcommands;

/// What `ember generate` writes.
#[derive(Subcommand, Debug)]
pub enum GenerateCommand {
    /// Write ember(1) and one page per subcommand, nested ones too, into DIR (created if
    /// missing).
    Man {
        /// The directory for the pages (e.g. PREFIX/share/man/man1).
        dir: PathBuf,
    },
    /// Print the completion script for SHELL on stdout.
    Completions {
        /// The shell to complete for.
        shell: Shell,
    },
    /// Write the command-line reference (every command and flag, with its help and default)
    /// in Markdown to FILE; `-` prints it.
    Markdown {
        /// The file to write (docs/reference/cli.md in the repository), or `-`.
        file: PathBuf,
    },
}

/// Run `ember generate` for the command line `cli` (the `ember` command's definition).
pub fn run(command: GenerateCommand, cli: clap::Command) -> anyhow::Result<()> {
    match command {
        GenerateCommand::Man { dir } => {
            let pages = write_man_pages(cli, &dir)?;
            eprintln!("ember generate: wrote {} man pages into {}", pages.len(), dir.display());
            Ok(())
        }
        GenerateCommand::Completions { shell } => {
            let mut cli = cli;
            let name = cli.get_name().to_string();
            clap_complete::generate(shell, &mut cli, name, &mut std::io::stdout());
            Ok(())
        }
        GenerateCommand::Markdown { file } => {
            let text = crate::cli_markdown::render(cli);
            if file.as_os_str() == "-" {
                std::io::stdout().write_all(text.as_bytes()).context("writing to stdout")
            } else {
                std::fs::write(&file, text).with_context(|| format!("writing {}", file.display()))
            }
        }
    }
}

/// Write one man page (section 1) per visible command of `cli` into `dir`; returns the files
/// written, the top command's page first.
pub fn write_man_pages(cli: clap::Command, dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut cli = cli.disable_help_subcommand(true);
    cli.build();
    let mut written = Vec::new();
    write_page(&cli, None, dir, &mut written)?;
    Ok(written)
}

/// The page of `cmd` (whose parent page is `parent`), then those of its subcommands.
fn write_page(
    cmd: &clap::Command,
    parent: Option<&str>,
    dir: &Path,
    written: &mut Vec<PathBuf>,
) -> anyhow::Result<()> {
    let name = page_name(cmd);
    let mut roff = Vec::new();
    clap_mangen::Man::new(cmd.clone()).manual("ember manual").render(&mut roff)?;
    let children: Vec<&clap::Command> = visible_subcommands(cmd).collect();
    let mut see_also: Vec<String> = parent.map(str::to_string).into_iter().collect();
    see_also.extend(children.iter().map(|c| page_name(c)));
    if !see_also.is_empty() {
        roff.extend_from_slice(b".SH \"SEE ALSO\"\n");
        let last = see_also.len() - 1;
        for (i, page) in see_also.iter().enumerate() {
            let comma = if i < last { "," } else { "" };
            writeln!(roff, ".BR {} (1){comma}", page.replace('-', "\\-"))?;
        }
    }
    let path = dir.join(format!("{name}.1"));
    std::fs::write(&path, roff).with_context(|| format!("writing {}", path.display()))?;
    written.push(path);
    for child in children {
        write_page(child, Some(&name), dir, written)?;
    }
    Ok(())
}

/// A built command's page name: `ember`, `ember-serve`, `ember-trace-gen-zipf`.
fn page_name(cmd: &clap::Command) -> String {
    cmd.get_display_name().unwrap_or_else(|| cmd.get_name()).to_string()
}
