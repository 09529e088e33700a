//! AFL++ target `trace`: every input goes through `ember_trace::fuzz_entry::read_trace_input` (docs/design/testing.md).

fn main() {
    afl::fuzz!(|data: &[u8]| {
        let _ = ember_trace::fuzz_entry::read_trace_input(data);
    });
    ember_fuzz::record_cpu();
}
