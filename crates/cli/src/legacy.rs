//! The spellings `ember sim` had before each experiment got its own subcommand, kept working
//! for one release: `ember sim --experiment sievestore`, `--admission`, `--partition`,
//! `--device`, `--cache-blocks` (now `ember sievestore`), and `ember sim --hierarchy`,
//! `--experiment demote` (now `ember demote`). [`rewrite`] turns such a command line into the
//! new one and says how on stderr; everything else passes unchanged.

/// Flags that only SieveStore's runs took.
const SIEVESTORE_FLAGS: [&str; 4] = ["--admission", "--partition", "--device", "--cache-blocks"];

/// Flags of `ember sim` that the hierarchy ignored and `ember demote` does not take (each
/// takes a value).
const DEMOTE_DROPPED: [&str; 2] = ["--policy", "--size"];

fn flag_name(arg: &str) -> &str {
    arg.split_once('=').map_or(arg, |(name, _)| name)
}

/// The new command line for an old `ember sim` spelling, and the deprecation note to print;
/// `None` when `args` (without the program name) is not an old spelling.
pub fn rewrite(args: &[String]) -> Option<(Vec<String>, String)> {
    if args.first().map(String::as_str) != Some("sim") {
        return None;
    }
    let rest = &args[1..];
    let mut target: Option<&str> = None;
    let mut experiment = false;
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    let mut old: Vec<String> = Vec::new();
    while i < rest.len() {
        let a = rest[i].as_str();
        if a == "--" {
            out.extend(rest[i..].iter().cloned());
            break;
        }
        match flag_name(a) {
            "--experiment" => {
                let (value, used) = match a.split_once('=') {
                    Some((_, v)) => (Some(v.to_string()), 1),
                    None => (rest.get(i + 1).cloned(), 2),
                };
                match value.as_deref() {
                    Some("sievestore") => target = Some("sievestore"),
                    Some("demote") => target = Some("demote"),
                    // Not an old spelling: let the parser report it.
                    _ => return None,
                }
                old.push(format!("--experiment {}", value.unwrap_or_default()));
                experiment = true;
                i += used;
                continue;
            }
            "--hierarchy" => {
                target = Some("demote");
                old.push("--hierarchy".into());
                i += 1;
                continue;
            }
            f if SIEVESTORE_FLAGS.contains(&f) => {
                if target.is_none() {
                    target = Some("sievestore");
                }
                old.push(f.to_string());
            }
            _ => {}
        }
        out.push(rest[i].clone());
        i += 1;
    }
    let target = target?;
    if target == "demote" {
        // The hierarchy never read --policy / --size; `ember demote` has no such flags.
        let mut kept = Vec::with_capacity(out.len());
        let mut j = 0;
        while j < out.len() {
            let name = flag_name(&out[j]);
            if DEMOTE_DROPPED.contains(&name) {
                j += if out[j].contains('=') { 1 } else { 2 };
                continue;
            }
            kept.push(out[j].clone());
            j += 1;
        }
        out = kept;
    }
    let mut new = vec![target.to_string()];
    new.extend(out);
    if experiment {
        new.push("--experiment".into());
    }
    let note = format!(
        "ember: warning: `ember sim {}` is deprecated and will be removed in the next release; \
         use `ember {target}{}` (running: ember {})",
        old.join(" "),
        if experiment { " --experiment" } else { "" },
        new.join(" ")
    );
    Some((new, note))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn old_spellings_map_to_the_new_commands() {
        let (new, note) = rewrite(&v("sim t.csv --experiment sievestore --out d")).unwrap();
        assert_eq!(new, v("sievestore t.csv --out d --experiment"));
        assert!(note.contains("deprecated") && note.contains("ember sievestore --experiment"));
        let (new, _) = rewrite(&v("sim t.csv --experiment=demote --client-size 4")).unwrap();
        assert_eq!(new, v("demote t.csv --client-size 4 --experiment"));
        let (new, _) =
            rewrite(&v("sim t.csv --hierarchy --policy lru --size=1% --scheme demote")).unwrap();
        assert_eq!(new, v("demote t.csv --scheme demote"));
        let (new, _) =
            rewrite(&v("sim t.csv --policy lru --admission aod,wmna --partition equal")).unwrap();
        assert_eq!(new, v("sievestore t.csv --policy lru --admission aod,wmna --partition equal"));
    }

    #[test]
    fn new_spellings_pass_unchanged() {
        assert!(rewrite(&v("sim t.csv --policy lru --size 1%")).is_none());
        assert!(rewrite(&v("sievestore t.csv --experiment")).is_none());
        assert!(rewrite(&v("sim t.csv --experiment nope")).is_none());
        assert!(rewrite(&v("analyze t.csv")).is_none());
    }
}
