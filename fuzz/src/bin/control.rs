//! AFL++ target `control`: every input is a control connection's bytes, through `ember_serve::fuzz_entry::control_session` (docs/design/testing.md).

fn main() {
    afl::fuzz!(|data: &[u8]| {
        let _ = ember_serve::fuzz_entry::control_session(data);
    });
    ember_fuzz::record_cpu();
}
