//! Shared by the AFL++ targets in `src/bin/` (docs/design/testing.md).

use std::io::Write;

/// Append this process's CPU seconds (user + system, every thread) as one line to the file
/// `EMBER_FUZZ_CPU_LOG` names, if set. Each target calls it when AFL++'s persistent loop
/// ends (`AFL_FUZZER_LOOPCOUNT` iterations), so `make fuzz` can add up the CPU time a target
/// used; a process killed at the end of a run does not report its last loop.
pub fn record_cpu() {
    let Some(path) = std::env::var_os("EMBER_FUZZ_CPU_LOG") else {
        return;
    };
    // SAFETY: getrusage writes one plain-data struct that we own.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) } != 0 {
        return;
    }
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    let cpu = secs(usage.ru_utime) + secs(usage.ru_stime);
    if let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(path) {
        let _ = f.write_all(format!("{cpu:.3}\n").as_bytes());
    }
}
