//! `ember sim --deployment --out DIR` in a report: every tier as the laboratory predicts it
//! (READs and hits, allocation-writes, DEMOTEs, backing reads, mean READ latency), the
//! array's restart if the topology crashes it, and, when the directory also holds
//! `deployment-status.json` (`ember deploy status --json` of the running stack after the
//! replay), each tier's live READs and hits beside the prediction.

use std::path::Path;

use serde_json::Value;

use super::page::{f, num, s, Section};

/// The live status file `ember deploy status --json` writes, looked for beside the prediction.
pub const LIVE: &str = "deployment-status.json";

fn pct(x: f64) -> String {
    num(100.0 * x)
}

/// A predicted tier's row: its counts and role.
fn row(t: &Value, role: &str) -> Vec<String> {
    let reads = match t.pointer("/paths/reads") {
        Some(r) => r.as_f64().unwrap_or(0.0),
        None => f(t, "reads"),
    };
    let stored = if role == "array" { num(f(t, "demotes_stored")) } else { "-".into() };
    vec![
        s(t, "name"),
        role.into(),
        num(reads),
        pct(f(t, "hit_ratio")),
        num(f(t, "writes")),
        num(f(t, "allocation_writes")),
        if role == "array" { num(f(t, "demotes_received")) } else { num(f(t, "demotes_sent")) },
        stored,
        num(f(t, "demotes_refused") + f(t, "demotes_refused_stale")),
        num(f(t, "backing_reads")),
        t.get("mean_latency_ms").and_then(Value::as_f64).map_or("-".into(), num),
    ]
}

/// Every tier of `doc`, the clients first.
fn tiers(doc: &Value) -> Vec<(Value, &'static str)> {
    let mut out: Vec<(Value, &'static str)> = doc
        .get("clients")
        .and_then(Value::as_array)
        .map(|c| c.iter().map(|t| (t.clone(), "client")).collect())
        .unwrap_or_default();
    if let Some(a) = doc.get("array") {
        out.push((a.clone(), "array"));
    }
    out
}

/// The sections of a `deployment.json` in `dir`.
pub fn sections(doc: &Value, dir: &Path) -> anyhow::Result<Vec<Section>> {
    let mut predicted = Section::new("Deployment: every tier, predicted");
    predicted.text(&format!(
        "{} requests over {} client tier(s) and an array under {}; mean READ latency {} ms \
         (Wong & Wilkes' model).",
        num(f(doc, "requests")),
        doc.get("clients").and_then(Value::as_array).map_or(0, Vec::len),
        s(doc, "scheme"),
        num(f(doc, "mean_latency_ms"))
    ));
    let rows: Vec<Vec<String>> = tiers(doc).iter().map(|(t, role)| row(t, role)).collect();
    predicted.table(
        &[
            "tier",
            "role",
            "READs",
            "hit %",
            "writes",
            "alloc-writes",
            "DEMOTEs sent / received",
            "stored",
            "refused",
            "backing reads",
            "mean READ ms",
        ],
        &rows,
    );
    let mut out = vec![predicted];
    if let Some(r) = doc.get("restart").filter(|r| !r.is_null()) {
        let mut sec = Section::new("Deployment: the array after its crash, predicted");
        let a = r.get("array").cloned().unwrap_or(Value::Null);
        sec.text(&format!(
            "The array crashed after request {} and restarted; {} of {} planned blocks \
             preloaded. From the restart on: {} READs, hit ratio {} %, {} DEMOTEs refused as \
             stale.",
            num(r.pointer("/crash/after_requests").and_then(Value::as_f64).unwrap_or(0.0)),
            num(f(r, "preloaded_blocks")),
            num(f(r, "planned_blocks")),
            num(f(&a, "reads")),
            pct(f(&a, "hit_ratio")),
            num(f(&a, "demotes_refused_stale"))
        ));
        out.push(sec);
    }
    let live_path = dir.join(LIVE);
    if live_path.is_file() {
        let live = super::read_json(&live_path)?;
        let mut sec = Section::new("Deployment: live beside predicted");
        let mut rows = Vec::new();
        for (t, _) in tiers(doc) {
            let name = s(&t, "name");
            let Some(l) = live.as_array().and_then(|v| v.iter().find(|x| s(x, "name") == name))
            else {
                continue;
            };
            let vols = l.pointer("/status/volumes").and_then(Value::as_array);
            let sum = |k: &str| vols.map_or(0.0, |v| v.iter().map(|x| f(x, k)).sum::<f64>());
            let (hits, misses) = (sum("read_hits"), sum("read_misses"));
            let reads = match t.pointer("/paths/reads") {
                Some(r) => r.as_f64().unwrap_or(0.0),
                None => f(&t, "reads"),
            };
            rows.push(vec![
                name,
                num(reads),
                num(hits + misses),
                num(f(&t, "read_hits")),
                num(hits),
                pct(f(&t, "hit_ratio")),
                pct(if hits + misses > 0.0 { hits / (hits + misses) } else { 0.0 }),
            ]);
        }
        sec.table(
            &[
                "tier",
                "READs predicted",
                "READs live",
                "hits predicted",
                "hits live",
                "hit % predicted",
                "hit % live",
            ],
            &rows,
        );
        out.push(sec);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn predicted_tiers_the_restart_and_the_live_status_beside_them() {
        let doc = serde_json::json!({
            "clients": [{"name": "client0", "paths": {"reads": 100}, "read_hits": 60,
                         "hit_ratio": 0.6, "demotes_sent": 30, "mean_latency_ms": 1.5}],
            "array": {"name": "array", "reads": 40, "read_hits": 10, "hit_ratio": 0.25,
                      "demotes_received": 30, "demotes_stored": 20, "demotes_refused_stale": 4},
            "scheme": "DEMOTE", "mean_latency_ms": 1.5, "requests": 120,
            "restart": {"crash": {"after_requests": 60}, "planned_blocks": 50,
                        "preloaded_blocks": 40, "array": {"reads": 20, "hit_ratio": 0.5,
                                                         "demotes_refused_stale": 4}}
        });
        let dir = tempfile::tempdir().unwrap();
        let found = sections(&doc, dir.path()).unwrap();
        assert_eq!(found.len(), 2, "no live status: the prediction and the restart");
        assert!(found[0].body.contains("client0") && found[0].body.contains("DEMOTE"));
        assert!(found[1].body.contains("request 60") && found[1].body.contains("40 of 50"));
        let live = serde_json::json!([{"name": "client0", "status": {"volumes": [
            {"read_hits": 58, "read_misses": 42}]}}]);
        std::fs::write(dir.path().join(LIVE), live.to_string()).unwrap();
        let found = sections(&doc, dir.path()).unwrap();
        assert_eq!(found.len(), 3);
        assert!(found[2].body.contains("58"), "{}", found[2].body);
    }
}
