//! Entry points for the coverage-guided fuzz targets in `fuzz/` (`control`, `config`) and
//! for the corpus replay test (`tests/fuzz_corpus.rs`); not part of ember's API. Each
//! function feeds one input to the real code the way a peer or an operator would, and
//! checks what must hold; a panic is the bug a fuzzer looks for. See docs/design/testing.md.

use std::path::Path;

use crate::config::{parse_with, to_toml};
use crate::control::{parse_request, Reply, Request, MAX_REQUEST};

/// What one request line of a control connection came to.
#[derive(Debug, PartialEq)]
pub enum LineOutcome {
    /// A request the server carries out.
    Request(Request),
    /// An error reply; the connection goes on.
    Refused(String),
    /// An error reply for a line over [`MAX_REQUEST`]; the connection ends.
    TooLong,
}

/// Split `input` into request lines as the control socket reads a connection (lines of at
/// most [`MAX_REQUEST`] bytes, blank lines skipped) and parse each.
///
/// Panics when a request that parsed does not read back as itself from its own line, or
/// when an error reply is not one line of JSON that reads back as an error: the properties
/// the socket and `ember ctl` rely on.
pub fn control_session(input: &[u8]) -> Vec<LineOutcome> {
    let mut outcomes = Vec::new();
    for line in input.split(|b| *b == b'\n') {
        if line.len() > MAX_REQUEST {
            outcomes.push(LineOutcome::TooLong);
            break;
        }
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match parse_request(line) {
            Ok(request) => {
                let again = parse_request(request.to_line().as_bytes());
                assert_eq!(again.as_ref(), Ok(&request), "a request does not read back");
                outcomes.push(LineOutcome::Request(request));
            }
            Err(why) => {
                let reply = Reply::error(why.clone()).to_line();
                assert_eq!(reply.matches('\n').count(), 1, "an error reply is not one line");
                let back: Result<Reply, _> = serde_json::from_str(reply.trim_end());
                assert!(
                    back.is_ok_and(|r| r.ok == Some(false) && r.error.as_deref() == Some(&why)),
                    "an error reply does not read back: {reply}"
                );
                outcomes.push(LineOutcome::Refused(why));
            }
        }
    }
    outcomes
}

/// Parse `input` as a config file (`fuzz.toml`) as `ember serve --config` does, without
/// opening anything it names; `Ok` with the effective configuration printed as TOML.
///
/// Panics when a file that parsed prints as TOML that does not parse back to the same
/// printed configuration (what `--print-config` promises), or when an error names a line
/// past the end of the file.
pub fn config_file(input: &[u8]) -> Result<String, String> {
    let Ok(text) = std::str::from_utf8(input) else {
        return Err("not UTF-8".into());
    };
    let path = Path::new("fuzz.toml");
    let empty = toml::Table::new();
    let config = match parse_with(path, text, &empty) {
        Ok(c) => c,
        Err(e) => {
            let lines = text.matches('\n').count() + 1;
            assert!(e.line.is_none_or(|l| (1..=lines).contains(&l)), "{e} (of {lines} lines)");
            return Err(e.to_string());
        }
    };
    let printed = to_toml(&config).map_err(|e| e.to_string())?;
    let back = parse_with(path, &printed, &empty)
        .unwrap_or_else(|e| panic!("the printed configuration does not parse: {e}\n{printed}"));
    let again = to_toml(&back).map_err(|e| e.to_string())?;
    assert_eq!(again, printed, "the printed configuration does not read back as itself");
    Ok(printed)
}
