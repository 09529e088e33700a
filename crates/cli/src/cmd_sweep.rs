//! `ember sweep SPEC`: the grid of a sweep spec run on Ray. Ray's client is Python, so this
//! command hands the spec to the emberlab package's sweep driver (`python -m emberlab sweep`,
//! docs/reference/sweep.md) in the project's virtual environment, which runs every cell through the
//! same Rust code as `ember sim`.

use anyhow::{bail, Context};
use clap::Args;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Arguments of `ember sweep`.
#[derive(Args, Debug)]
pub struct SweepArgs {
    /// The sweep spec (TOML or JSON): traces, policies, sizes, sieves (docs/reference/sweep.md).
    #[arg(value_name = "SPEC")]
    pub spec: PathBuf,
    /// Results directory (default: the spec's `out`, else `sweep-<spec name>` next to it).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// An existing Ray cluster (`HOST:PORT`, or `auto`); default: start a local Ray instance.
    #[arg(long)]
    pub ray_address: Option<String>,
    /// CPUs of the local Ray instance (default: all cores; ignored with --ray-address).
    #[arg(long)]
    pub num_cpus: Option<usize>,
    /// Run every cell again, even those a previous run finished.
    #[arg(long)]
    pub no_resume: bool,
    /// No progress bar.
    #[arg(long, short)]
    pub quiet: bool,
    /// The Python interpreter with emberlab and Ray installed (default: $EMBER_PYTHON, else
    /// the `.venv` of the source tree this ember was built in, else python3).
    #[arg(long)]
    pub python: Option<PathBuf>,
}

/// The project's `.venv/bin/python` above the running executable (`target/release/ember`).
fn venv_python() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    exe.ancestors().skip(1).map(|d| d.join(".venv/bin/python")).find(|p| p.is_file())
}

fn python(args: &SweepArgs) -> PathBuf {
    args.python
        .clone()
        .or_else(|| std::env::var_os("EMBER_PYTHON").map(PathBuf::from))
        .or_else(venv_python)
        .unwrap_or_else(|| Path::new("python3").to_path_buf())
}

/// Run `ember sweep`: the Python driver with the same flags; its exit status is ours.
pub fn run(args: SweepArgs) -> anyhow::Result<()> {
    let py = python(&args);
    let mut cmd = Command::new(&py);
    cmd.args(["-m", "emberlab", "sweep"]).arg(&args.spec);
    if let Some(o) = &args.out {
        cmd.arg("--out").arg(o);
    }
    if let Some(a) = &args.ray_address {
        cmd.args(["--ray-address", a]);
    }
    if let Some(n) = args.num_cpus {
        cmd.args(["--num-cpus", &n.to_string()]);
    }
    if args.no_resume {
        cmd.arg("--no-resume");
    }
    if args.quiet {
        cmd.arg("--quiet");
    }
    let status = cmd.status().with_context(|| {
        format!("starting {} (install emberlab with `make setup`, or give --python)", py.display())
    })?;
    if !status.success() {
        bail!("the sweep driver ({} -m emberlab sweep) exited with {status}", py.display());
    }
    Ok(())
}
