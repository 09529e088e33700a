//! AFL++ target `layout`: every input goes through `ember_engine::fuzz_entry::decode_layout` (docs/design/testing.md).

fn main() {
    afl::fuzz!(|data: &[u8]| {
        let _ = ember_engine::fuzz_entry::decode_layout(data);
    });
    ember_fuzz::record_cpu();
}
