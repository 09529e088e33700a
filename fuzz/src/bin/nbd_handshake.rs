//! AFL++ target `nbd_handshake`: every input goes through `ember_nbd::fuzz_entry::server_handshake` (docs/design/testing.md).

fn main() {
    afl::fuzz!(|data: &[u8]| {
        let _ = ember_nbd::fuzz_entry::server_handshake(data);
    });
    ember_fuzz::record_cpu();
}
