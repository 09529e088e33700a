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
    let (_, mut doc) = read(file)?;
    put(doc.as_table_mut(), key.path, Some(value), false)
        .map_err(|e| anyhow!("{}: {e}", file.display()))?;
    replace_atomically(file, doc.to_string().as_bytes())
}

/// Set `path` (below the table: `["seq-cutoff", "read"]`) to `value` in the `[[volume]]`
/// table named `volume` of the config file `file` (`None`: remove the key, so the
/// cache-wide value applies), atomically, keeping everything else.
pub fn save_volume_setting(
    file: &Path,
    volume: &str,
    path: &[&str],
    value: Option<&toml::Value>,
) -> anyhow::Result<()> {
    let (_, mut doc) = read(file)?;
    let table = doc
        .get_mut("volume")
        .and_then(toml_edit::Item::as_array_of_tables_mut)
        .and_then(|a| a.iter_mut().find(|t| t.get("name").and_then(|n| n.as_str()) == Some(volume)))
        .ok_or_else(|| {
            anyhow!("{}: no [[volume]] table named {volume:?} to save into", file.display())
        })?;
    // A new table inside a `[[volume]]` entry is written inline, so it stays with its entry.
    put(table, path, value, true).map_err(|e| anyhow!("{}: {e}", file.display()))?;
    replace_atomically(file, doc.to_string().as_bytes())
}

/// Add a `[[volume]]` table naming `name` over `backing` to the config file `file`, after
/// its other volumes, atomically, keeping everything else. Refused if the file has a table
/// of that name already.
pub fn save_new_volume(file: &Path, name: &str, backing: &str) -> anyhow::Result<()> {
    let (_, mut doc) = read(file)?;
    if doc.get("volume").is_none() {
        doc.insert("volume", toml_edit::Item::ArrayOfTables(Default::default()));
    }
    let tables = doc
        .get_mut("volume")
        .and_then(toml_edit::Item::as_array_of_tables_mut)
        .ok_or_else(|| anyhow!("{}: `volume` is not an array of tables", file.display()))?;
    if tables.iter().any(|t| t.get("name").and_then(|n| n.as_str()) == Some(name)) {
        return Err(anyhow!(
            "{}: a [[volume]] table named {name:?} is there already",
            file.display()
        ));
    }
    let mut t = toml_edit::Table::new();
    t.insert("name", toml_edit::value(name));
    t.insert("backing", toml_edit::value(backing));
    tables.push(t);
    replace_atomically(file, doc.to_string().as_bytes())
}

fn read(file: &Path) -> anyhow::Result<(String, toml_edit::DocumentMut)> {
    let text = std::fs::read_to_string(file)
        .with_context(|| format!("{}: cannot read the config file", file.display()))?;
    let doc = text.parse().with_context(|| format!("{}: not TOML", file.display()))?;
    Ok((text, doc))
}

/// Set (or, with `None`, remove) `path` in `table`, creating the tables on the way (`inline`:
/// as inline tables) and keeping the comments around an old value.
fn put(
    table: &mut dyn toml_edit::TableLike,
    path: &[&str],
    value: Option<&toml::Value>,
    inline: bool,
) -> anyhow::Result<()> {
    let (last, tables) = path.split_last().ok_or_else(|| anyhow!("an empty key"))?;
    let mut table = table;
    for p in tables {
        if table.get(p).is_none() {
            if value.is_none() {
                return Ok(());
            }
            let new = if inline {
                toml_edit::Item::Value(toml_edit::Value::InlineTable(Default::default()))
            } else {
                toml_edit::Item::Table(toml_edit::Table::new())
            };
            table.insert(p, new);
        }
        table = table
            .get_mut(p)
            .and_then(toml_edit::Item::as_table_like_mut)
            .ok_or_else(|| anyhow!("{p} is not a table"))?;
    }
    let Some(value) = value else {
        table.remove(last);
        return Ok(());
    };
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
    Ok(())
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

    #[test]
    fn a_volumes_setting_is_saved_into_its_own_table() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("ember.toml");
        let text = "[[volume]]\nname = \"a\"\nbacking = \"a.img\"\n\n[[volume]]\nname = \"b\" # logs\nbacking = \"b.img\"\n";
        std::fs::write(&file, text).unwrap();
        let wa = toml::Value::String("write-around".into());
        save_volume_setting(&file, "b", &["write-policy"], Some(&wa)).unwrap();
        let read = toml::Value::String("1MiB".into());
        save_volume_setting(&file, "b", &["seq-cutoff", "read"], Some(&read)).unwrap();
        let after = std::fs::read_to_string(&file).unwrap();
        assert!(after.contains("name = \"b\" # logs"), "{after}");
        let t: toml::Table = after.parse().unwrap();
        let b = &t["volume"][1];
        assert_eq!(b["write-policy"].as_str(), Some("write-around"));
        assert_eq!(b["seq-cutoff"]["read"].as_str(), Some("1MiB"));
        assert!(t["volume"][0].get("write-policy").is_none());
        save_volume_setting(&file, "b", &["write-policy"], None).unwrap();
        let t: toml::Table = std::fs::read_to_string(&file).unwrap().parse().unwrap();
        assert!(t["volume"][1].get("write-policy").is_none());
        assert!(save_volume_setting(&file, "c", &["write-policy"], Some(&wa)).is_err());
        save_new_volume(&file, "c", "c.img").unwrap();
        let after = std::fs::read_to_string(&file).unwrap();
        assert!(after.contains("name = \"b\" # logs"), "{after}");
        let t: toml::Table = after.parse().unwrap();
        assert_eq!(t["volume"][2]["name"].as_str(), Some("c"));
        assert_eq!(t["volume"][2]["backing"].as_str(), Some("c.img"));
        assert!(save_new_volume(&file, "c", "other.img").is_err(), "one table a name");
    }
}
