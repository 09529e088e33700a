//! Sizes in `ember serve`'s flags and config: [`ember_units::parse_size`]'s rule (a bare
//! number is bytes; K, M, G, T and KiB, MiB, ... are powers of 1024; KB, MB, GB, TB are powers
//! of 1000), with the error as text for the command line.

/// Parse a byte count by [`ember_units::parse_size`]'s rule.
pub fn parse_size(s: &str) -> Result<u64, String> {
    ember_units::parse_size(s).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("512"), Ok(512));
        assert_eq!(parse_size("4K"), Ok(4096));
        assert_eq!(parse_size("64MiB"), Ok(64 << 20));
        assert_eq!(parse_size("2G"), Ok(2 << 30));
        assert_eq!(parse_size("4MB"), Ok(4_000_000));
        assert!(parse_size("lots").is_err());
        assert!(parse_size("99999999999T").is_err());
    }
}
