//! The built `ember` binary run as a command: its path, a run that must succeed or fail, and a
//! run under an address-space limit (`ulimit -v`), the bounded-memory tests' yardstick.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::process::{cmdline, run_status, Output};

/// How long one `ember` command may take before the test fails.
const DEADLINE: Duration = Duration::from_secs(1800);

/// The `ember` binary under test: cargo builds it beside the directory of the test binaries
/// (`target/<profile>/ember` for `target/<profile>/deps/TEST`) before it runs the tests of the
/// crate that defines it.
pub fn ember() -> PathBuf {
    let exe = std::env::current_exe().unwrap_or_else(|e| panic!("the test binary's path: {e}"));
    let dir = exe.parent().and_then(Path::parent).unwrap_or_else(|| Path::new("."));
    let bin = dir.join("ember");
    assert!(
        bin.exists(),
        "no ember binary at {}: run the tests of the ember-cli crate",
        bin.display()
    );
    bin
}

/// `ember ARGS` as a command.
pub fn ember_cmd<S: AsRef<OsStr>>(args: &[S]) -> Command {
    let mut c = Command::new(ember());
    c.args(args);
    c
}

/// Run `ember ARGS` (no stdin); what it printed, whatever its exit status.
pub fn ember_run<S: AsRef<OsStr>>(args: &[S]) -> Output {
    run_status(&mut ember_cmd(args), DEADLINE)
}

/// Run `ember ARGS`, which must succeed; what it printed.
pub fn ember_ok<S: AsRef<OsStr> + std::fmt::Debug>(args: &[S]) -> Output {
    ember_run(args).ok(&format!("ember {args:?}"))
}

/// Run `ember ARGS`, which must succeed; its stdout.
pub fn ember_stdout<S: AsRef<OsStr> + std::fmt::Debug>(args: &[S]) -> String {
    ember_ok(args).stdout
}

/// Run `ember ARGS`, which must fail; its stderr.
pub fn ember_fails<S: AsRef<OsStr> + std::fmt::Debug>(args: &[S]) -> String {
    ember_run(args).fails(&format!("ember {args:?}"))
}

/// Run `ember LINE` (see [`cmdline`]: its first `{}` is the trace, the others `paths`) with
/// the file `trace` piped into its stdin by `cat`: with `piped` the trace argument is
/// `/dev/stdin`, a pipe, which the commands read whole; else the file itself, which they
/// stream. Under an address-space limit (`ulimit -v LIMIT_KIB`, not applied to `cat`) if
/// `limit_kib` is set: the bounded-memory tests' yardstick. What it printed, whatever its exit
/// status.
pub fn ember_on_trace(
    line: &str,
    trace: &Path,
    paths: &[&Path],
    piped: bool,
    limit_kib: Option<u64>,
) -> Output {
    let input = if piped { Path::new("/dev/stdin") } else { trace };
    let all: Vec<&Path> = [input].into_iter().chain(paths.iter().copied()).collect();
    let limit = limit_kib.map(|k| format!("ulimit -v {k} && ")).unwrap_or_default();
    let script = format!("f=\"$1\"; shift; cat \"$f\" | {{ {limit}exec \"$0\" \"$@\"; }}");
    let mut c = Command::new("bash");
    c.arg("-c").arg(script).arg(ember()).arg(trace).args(cmdline(line, &all));
    run_status(&mut c, DEADLINE)
}

/// `ember ARGS` under an address-space limit (`ulimit -v LIMIT_KIB`) if `limit_kib` is set, as
/// a command.
pub fn ember_limited_cmd<S: AsRef<OsStr>>(args: &[S], limit_kib: Option<u64>) -> Command {
    let limit = limit_kib.map(|k| format!("ulimit -v {k} && ")).unwrap_or_default();
    let mut c = Command::new("bash");
    c.arg("-c").arg(format!("{limit}exec \"$0\" \"$@\"")).arg(ember()).args(args);
    c
}

/// Run `ember ARGS` under an address-space limit (`ulimit -v LIMIT_KIB`) if `limit_kib` is
/// set; what it printed, whatever its exit status.
pub fn ember_limited<S: AsRef<OsStr>>(args: &[S], limit_kib: Option<u64>) -> Output {
    run_status(&mut ember_limited_cmd(args, limit_kib), DEADLINE)
}

/// `ember trace gen LINE -o OUT` (LINE: a generator and its options), which must succeed.
pub fn gen_trace(line: &str, out: &Path) {
    let mut args: Vec<&OsStr> = ["trace", "gen"].map(OsStr::new).to_vec();
    args.extend(line.split_whitespace().map(OsStr::new));
    args.extend([OsStr::new("-o"), out.as_os_str()]);
    ember_ok(&args);
}

/// `ember trace convert FROM TO --to FORMAT`, which must succeed; the lines of `TO`.
pub fn convert_trace(from: &Path, to: &Path, format: &str) -> Vec<String> {
    let args = ["trace", "convert"].map(OsStr::new);
    ember_ok(
        &[&args[..], &[from.as_os_str(), to.as_os_str()], &["--to", format].map(OsStr::new)]
            .concat(),
    );
    let text =
        std::fs::read_to_string(to).unwrap_or_else(|e| panic!("reading {}: {e}", to.display()));
    text.lines().map(str::to_string).collect()
}

/// `ember trace gen` options of the bounded-memory tests' workload: two clients (volumes),
/// Zipf 0.9 over 20,000 blocks each, 10 % writes, 4 million requests as MSR CSV.
pub const TWO_CLIENTS_4M: &str = "multi-client --clients 2 --blocks-per-client 20000 \
    --pattern zipf --alpha 0.9 --warmup-per-client 100000 --timed-per-client 1900000 \
    --write-ratio 0.1 --seed 3 --format msr";

/// Parse the JSON file at `path`.
pub fn json_file(path: &Path) -> serde_json::Value {
    let text =
        std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("JSON of {}: {e}", path.display()))
}
