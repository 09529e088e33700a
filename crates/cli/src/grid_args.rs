//! The policies and cache sizes of a simulation grid, as `ember sim` and `ember sievestore`
//! take them (`--policy lru,arc --size 1%,64MiB,1000`): blank items are skipped.

use ember_policy::Kind;
use ember_sim::Capacity;

/// The replacement policies of `--policy`, in the order given.
pub fn policies(items: &[String]) -> anyhow::Result<Vec<Kind>> {
    Ok(items
        .iter()
        .filter(|p| !p.trim().is_empty())
        .map(|p| p.parse::<Kind>())
        .collect::<Result<_, _>>()?)
}

/// The cache sizes of `--size`, in the order given: each as written (trimmed) and parsed.
pub fn sizes(items: &[String]) -> anyhow::Result<Vec<(String, Capacity)>> {
    items
        .iter()
        .filter(|s| !s.trim().is_empty())
        .map(|s| Ok((s.trim().to_owned(), s.parse::<Capacity>()?)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn blank_items_are_skipped_and_bad_ones_are_errors() {
        assert_eq!(policies(&v(&["lru", " ", "s3fifo"])).unwrap(), [Kind::Lru, Kind::S3Fifo]);
        assert!(policies(&v(&["lru", "mru"])).is_err());
        let s = sizes(&v(&[" 1% ", "", "1000", "64MiB"])).unwrap();
        let names: Vec<&str> = s.iter().map(|x| x.0.as_str()).collect();
        assert_eq!(names, ["1%", "1000", "64MiB"]);
        assert_eq!(s[1].1, Capacity::Blocks(1000));
        assert_eq!(s[2].1.blocks(4096, 0), 16384);
        assert!(sizes(&v(&["10 bananas"])).is_err());
    }
}
