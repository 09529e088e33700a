//! What ember's tests spawn and share, in one place: `ember serve` and nbdkit as child
//! processes ([`serve`], [`nbdkit`]), ember's NBD server and test exports in process
//! ([`nbd`]), device wrappers, the engine rig and the power-cut harness ([`devices`],
//! [`engine`], [`power`]), real NBD clients ([`clients`]), the built binary as a command
//! ([`ember`]), commands with deadlines ([`process`]), the tool checks ([`tools`]:
//! `EMBER_REQUIRE_TOOLS=1` makes a missing tool fail instead of skip), files and trace
//! builders ([`files`], [`trace`]).
//!
//! Used only as a dev-dependency: no release binary links it. It depends on the crates below
//! the server (nbd, engine, policy, trace), never on the ones whose tests use it for their
//! own types across the process boundary (serve, replay, cli).
//!
//! A helper here fails the test that called it when its setup fails, as the test's own code
//! would: unwrap and expect are that failure, not a panic on input.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test-support crate: a failed setup is a failed test"
)]

pub mod clients;
pub mod devices;
pub mod ember;
pub mod engine;
pub mod files;
pub mod nbd;
pub mod nbdkit;
pub mod power;
pub mod process;
pub mod serve;
pub mod tools;
pub mod trace;
pub mod watching_alloc;

pub use clients::{debian_path, fio_randrw_verify, have_nbdsh, nbdsh, qemu_io, sha256};
pub use ember::{
    convert_trace, ember, ember_cmd, ember_fails, ember_limited, ember_limited_cmd, ember_ok,
    ember_on_trace, ember_run, ember_stdout, gen_trace, json_file, TWO_CLIENTS_4M,
};
pub use files::{filled_file, fuzz_corpus, fuzz_inputs, mkfifo, sparse_file, write_at};
pub use nbdkit::Nbdkit;
pub use process::{cmdline, run, run_status, signal, wait_child, wait_stdout, words, Output, MIN};
pub use serve::{serve_fails, Serve, ServeArgs};
pub use tools::{io_uring_available, must_not_skip, skip_or_fail};
pub use trace::{
    fnv, lagged_blocks, random_block_reads, write_csv_trace, write_msr_trace, Req, Rng, MSR_T0,
};

/// One `#[test]` a case, each calling `run` with its arguments: a table of cases that stays
/// one test a case (each named, each failing alone).
///
/// ```text
/// ember_testkit::test_cases!(run {
///     write_through: (WriteMode::WriteThrough, true),
///     write_back_flush: (WriteMode::WriteBackFlush, false),
/// });
/// ```
#[macro_export]
macro_rules! test_cases {
    ($run:path { $($(#[$meta:meta])* $name:ident: ($($arg:expr),* $(,)?)),* $(,)? }) => {
        $(
            $(#[$meta])*
            #[test]
            fn $name() {
                $run($($arg),*)
            }
        )*
    };
}
