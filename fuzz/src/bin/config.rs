//! AFL++ target `config`: every input is a config file, through `ember_serve::fuzz_entry::config_file` (docs/design/testing.md).

fn main() {
    afl::fuzz!(|data: &[u8]| {
        let _ = ember_serve::fuzz_entry::config_file(data);
    });
    ember_fuzz::record_cpu();
}
