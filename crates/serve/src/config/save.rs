//! `ember ctl set --save`: one setting written into the config file, keeping its comments,
//! order and layout (`toml_edit`), and replacing the file atomically (a temporary file
//! beside it, synced, renamed over it, the directory synced), so that a crash leaves the old
//! file or the new one, never a mix.

use std::io::Write;
use std::path::Path;

use anyhow::{anyhow, Context};

use super::keys::Key;

/// Set `key` to `value` in the config file `file`, atomically, keeping everything else.
pub fn save_setting(file: &Path, key: &Key, value: &toml::Value) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(file)
        .with_context(|| format!("{}: cannot read the config file", file.display()))?;
    let mut doc: toml_edit::DocumentMut =
        text.parse().with_context(|| format!("{}: not TOML", file.display()))?;
    let (last, tables) = key.path.split_last().ok_or_else(|| anyhow!("an empty key"))?;
    let mut table: &mut dyn toml_edit::TableLike = doc.as_table_mut();
    for p in tables {
        if table.get(p).is_none() {
            table.insert(p, toml_edit::Item::Table(toml_edit::Table::new()));
        }
        table = table
            .get_mut(p)
            .and_then(toml_edit::Item::as_table_like_mut)
            .ok_or_else(|| anyhow!("{}: {p} is not a table", file.display()))?;
    }
    let new = edit_value(value)?;
    match table.get_mut(last) {
        Some(toml_edit::Item::Value(old)) => {
            // Keep the comments and spacing around the old value.
            let decor = old.decor().clone();
            *old = new;
            *old.decor_mut() = decor;
        }
        _ => {
            table.insert(last, toml_edit::Item::Value(new));
        }
    }
    replace_atomically(file, doc.to_string().as_bytes())
}

/// A `toml` value as a `toml_edit` one.
fn edit_value(value: &toml::Value) -> anyhow::Result<toml_edit::Value> {
    let text = format!("v = {value}");
    let doc: toml_edit::DocumentMut = text.parse().context("the new value")?;
    doc.get("v")
        .and_then(|i| i.as_value())
        .cloned()
        .ok_or_else(|| anyhow!("{value} is not a TOML value"))
}

/// Write `bytes` to `file` through a synced temporary file renamed over it.
fn replace_atomically(file: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let dir = match file.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = file.file_name().ok_or_else(|| anyhow!("{}: no file name", file.display()))?;
    let tmp = dir.join(format!(".{}.ember-save", name.to_string_lossy()));
    let write = || -> std::io::Result<()> {
        let mut f = std::fs::File::create(&tmp)?;
        if let Ok(meta) = std::fs::metadata(file) {
            f.set_permissions(meta.permissions())?;
        }
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, file)?;
        std::fs::File::open(dir)?.sync_all()
    };
    write().map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        anyhow!("{}: cannot save: {e}", file.display())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_saved_setting_keeps_the_comments() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("ember.toml");
        let text = "# the cache\n[cache]\ndevice = \"c.img\" # fast\n\n[live]\n# how writes go\nwrite-policy = \"write-through\"  # for now\n";
        std::fs::write(&file, text).unwrap();
        let key = Key::find("write-policy").unwrap();
        save_setting(&file, key, &toml::Value::String("write-back-persist".into())).unwrap();
        let after = std::fs::read_to_string(&file).unwrap();
        assert!(
            after.contains("# how writes go\nwrite-policy = \"write-back-persist\"  # for now"),
            "{after}"
        );
        assert!(after.contains("# the cache\n[cache]\ndevice = \"c.img\" # fast"), "{after}");
        let key = Key::find("max-dirty").unwrap();
        save_setting(&file, key, &toml::Value::String("30%".into())).unwrap();
        let after = std::fs::read_to_string(&file).unwrap();
        let t: toml::Table = after.parse().unwrap();
        assert_eq!(t["live"]["writeback"]["max-dirty"].as_str(), Some("30%"));
        assert!(!dir.path().join(".ember.toml.ember-save").exists());
    }
}
