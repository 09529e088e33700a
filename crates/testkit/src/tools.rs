//! Whether a test may skip for want of a tool: under `make test` and in CI it must not.

use std::io::Write;

/// Whether this run must not skip anything: under `make test` (which sets
/// `EMBER_REQUIRE_TOOLS=1` after `scripts/setup.sh` installed every tool) and in CI (`CI` set
/// to anything but empty, `0` or `false`; `.ci/run` exports `CI=true`).
pub fn must_not_skip() -> bool {
    let set = |k: &str| std::env::var(k).is_ok_and(|v| !matches!(v.as_str(), "" | "0" | "false"));
    set("CI") || set("EMBER_REQUIRE_TOOLS")
}

/// A test that cannot run here (`why`): fails under `make test` and in CI, where every tool
/// was installed; otherwise returns `true` (skip) after printing the skip on stderr directly,
/// past the test harness's output capture, so it shows in `cargo test` output as well.
pub fn skip_or_fail(why: &str) -> bool {
    assert!(
        !must_not_skip(),
        "{why}: this test must run under `make test` and in CI (scripts/setup.sh installs \
         what it needs)"
    );
    let test = std::thread::current().name().unwrap_or("test").to_string();
    // Not eprintln!: the harness captures it for passing tests; a direct write is shown.
    let _ = writeln!(
        std::io::stderr(),
        "\n*** SKIPPED {test}: {why}. Run `make setup`, or `make test` (which fails instead \
         of skipping). ***\n"
    );
    true
}

/// Whether this process may set up an io_uring (a sandbox may forbid it).
pub fn io_uring_available() -> bool {
    // SAFETY: io_uring_setup with a zeroed parameter block; a ring made here is closed.
    let mut params = [0u8; 120];
    let fd = unsafe { libc::syscall(libc::SYS_io_uring_setup, 4, params.as_mut_ptr()) };
    if fd >= 0 {
        // SAFETY: `fd` was just returned to us.
        unsafe { libc::close(fd as i32) };
    }
    fd >= 0
}
