//! The `ember` command as a library: every subcommand's arguments and runner, shared by the
//! `ember` binary (`main.rs`) and the Python package (`crates/py`, through [`lab`]).

pub mod cleaning_args;
pub mod cli_markdown;
pub mod cmd_analyze;
pub mod cmd_cache;
pub mod cmd_ctl;
pub mod cmd_demote;
pub mod cmd_gen;
pub mod cmd_generate;
pub mod cmd_replay;
pub mod cmd_serve;
pub mod cmd_sievestore;
pub mod cmd_sim;
pub mod cmd_stats;
pub mod cmd_sweep;
pub mod cmd_trace;
pub mod cmd_warmup;
pub mod demote_args;
pub mod file_passes;
pub mod grid_args;
pub mod health_args;
pub mod lab;
pub mod legacy;
pub mod net_args;
pub mod output;
pub mod plot;
pub mod plot_analyze;
pub mod plot_demote;
pub mod plot_sensitivity;
pub mod plot_sievestore;
pub mod plot_sim;
pub mod report;
pub mod seq_cutoff_args;
pub mod trace_args;
pub mod tuning_args;
pub mod write_stream;
