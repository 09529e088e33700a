//! AFL++ target `nbd_client`: every input goes through `ember_nbd::fuzz_entry::client_session` (docs/design/testing.md).

fn main() {
    afl::fuzz!(|data: &[u8]| {
        let _ = ember_nbd::fuzz_entry::client_session(data);
    });
    ember_fuzz::record_cpu();
}
