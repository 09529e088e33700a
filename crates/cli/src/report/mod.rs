//! `ember report DIR -o report.html`: any experiment's output directory (`ember sim`, `sim
//! --deployment`, `sievestore`, `demote`, `analyze`, `warmup run` or `sweep` with `--out`) as one
//! self-contained HTML page: the configuration, the tables, the figures (inline SVG) and,
//! where the experiment reproduces a paper, the paper's published numbers beside ember's.

mod analyze;
pub mod chart;
mod demote;
mod deployment;
pub mod page;
mod papers;
mod sievestore;
mod sim;
mod sweep;
mod warmup;

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use clap::Args;
use serde_json::Value;

use page::{Page, Section};

/// Options of `ember report`.
#[derive(Args, Debug)]
pub struct ReportArgs {
    /// An experiment's output directory (what `--out` named).
    pub dir: PathBuf,
    /// The HTML file to write.
    #[arg(short, long, value_name = "FILE")]
    pub output: PathBuf,
    /// The page's title (default: the experiment and the directory's name).
    #[arg(long)]
    pub title: Option<String>,
}

/// The experiments a directory can hold: the file each writes, and its name.
const KINDS: [(&str, &str); 7] = [
    ("sim.json", "ember sim"),
    ("deployment.json", "ember sim --deployment"),
    ("sievestore.json", "ember sievestore"),
    ("demote.json", "ember demote"),
    ("analyze.json", "ember analyze"),
    ("warmup.json", "ember warmup run"),
    ("results.csv", "ember sweep"),
];

fn read_json(path: &Path) -> anyhow::Result<Value> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))
}

/// The report of `dir`: one part per experiment found in it.
pub fn build(dir: &Path, title: Option<&str>) -> anyhow::Result<Page> {
    let mut found = Vec::new();
    let mut sections: Vec<Section> = Vec::new();
    for (file, kind) in KINDS {
        let path = dir.join(file);
        if !path.is_file() {
            continue;
        }
        found.push(kind);
        let mut part = match file {
            "sim.json" => sim::sections(&read_json(&path)?)?,
            "sievestore.json" => sievestore::sections(&read_json(&path)?)?,
            "demote.json" => demote::sections(&read_json(&path)?)?,
            "deployment.json" => deployment::sections(&read_json(&path)?, dir)?,
            "analyze.json" => analyze::sections(&read_json(&path)?)?,
            "warmup.json" => warmup::sections(&read_json(&path)?)?,
            _ => sweep::sections(dir)?,
        };
        sections.append(&mut part);
    }
    if found.is_empty() {
        let files: Vec<&str> = KINDS.iter().map(|k| k.0).collect();
        bail!(
            "{} holds no experiment output (looked for {}): pass the directory an experiment's \
             --out wrote",
            dir.display(),
            files.join(", ")
        );
    }
    let name = dir
        .canonicalize()
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()));
    let title = match title {
        Some(t) => t.to_string(),
        None => format!(
            "{} report: {}",
            found.join(", "),
            name.unwrap_or_else(|| dir.display().to_string())
        ),
    };
    let subtitle = format!(
        "From {} ({}), written by ember {}.",
        dir.display(),
        found.join(", "),
        env!("CARGO_PKG_VERSION")
    );
    Ok(Page { title, subtitle, sections })
}

/// Run `ember report`.
pub fn run(args: ReportArgs) -> anyhow::Result<()> {
    let page = build(&args.dir, args.title.as_deref())?;
    std::fs::write(&args.output, page.render())
        .with_context(|| format!("writing {}", args.output.display()))?;
    eprintln!("ember report: wrote {}", args.output.display());
    Ok(())
}
