//! The HTML page of `ember report`: one self-contained document (inline CSS, inline SVG
//! figures, no script and nothing fetched), built from sections of tables, figures and text.

use std::fmt::Write;

use serde_json::Value;

/// One part of the page under a heading.
#[derive(Debug, Default)]
pub struct Section {
    /// The section's heading.
    pub heading: String,
    /// Its HTML, in order.
    pub body: String,
}

impl Section {
    /// An empty section titled `heading`.
    pub fn new(heading: impl Into<String>) -> Section {
        Section { heading: heading.into(), body: String::new() }
    }

    /// Add a paragraph of plain text.
    pub fn text(&mut self, text: &str) -> &mut Section {
        let _ = writeln!(self.body, "<p>{}</p>", escape(text));
        self
    }

    /// Add a table: `header` cells, then rows of cells (plain text, escaped here).
    pub fn table(&mut self, header: &[&str], rows: &[Vec<String>]) -> &mut Section {
        self.body.push_str("<table>\n<thead><tr>");
        for h in header {
            let _ = write!(self.body, "<th>{}</th>", escape(h));
        }
        self.body.push_str("</tr></thead>\n<tbody>\n");
        for row in rows {
            self.body.push_str("<tr>");
            for c in row {
                let _ = write!(self.body, "<td>{}</td>", escape(c));
            }
            self.body.push_str("</tr>\n");
        }
        self.body.push_str("</tbody>\n</table>\n");
        self
    }

    /// Add a figure: an inline SVG document and its caption.
    pub fn figure(&mut self, svg: &str, caption: &str) -> &mut Section {
        let svg = svg.find("<svg").map_or(svg, |i| &svg[i..]);
        let _ = write!(
            self.body,
            "<figure>\n{svg}\n<figcaption>{}</figcaption>\n</figure>\n",
            escape(caption)
        );
        self
    }
}

/// The whole report.
#[derive(Debug, Default)]
pub struct Page {
    /// The page's title (and first heading).
    pub title: String,
    /// What the page reports on, under the title.
    pub subtitle: String,
    /// The sections, in order.
    pub sections: Vec<Section>,
}

const STYLE: &str = "body{font-family:'DejaVu Sans',Helvetica,Arial,sans-serif;margin:2em auto;\
max-width:1100px;padding:0 1em;color:#222;background:#fff}h1{font-size:1.6em}\
h2{font-size:1.25em;border-bottom:1px solid #ccc;padding-bottom:.2em;margin-top:1.8em}\
table{border-collapse:collapse;margin:.8em 0;font-size:.9em}\
th,td{border:1px solid #ccc;padding:.25em .6em;text-align:right}\
th{background:#f0f3f7}td:first-child,th:first-child{text-align:left}\
figure{margin:1em 0}figure svg{max-width:100%;height:auto;border:1px solid #eee}\
figcaption{font-size:.85em;color:#555}.sub{color:#555}";

impl Page {
    /// The page as one HTML document.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let _ = write!(
            out,
            "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
             <title>{}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n<h1>{}</h1>\n\
             <p class=\"sub\">{}</p>\n",
            escape(&self.title),
            escape(&self.title),
            escape(&self.subtitle)
        );
        if self.sections.len() > 1 {
            out.push_str("<nav><ul>\n");
            for (i, s) in self.sections.iter().enumerate() {
                let _ = writeln!(out, "<li><a href=\"#s{i}\">{}</a></li>", escape(&s.heading));
            }
            out.push_str("</ul></nav>\n");
        }
        for (i, s) in self.sections.iter().enumerate() {
            let _ = write!(
                out,
                "<section id=\"s{i}\">\n<h2>{}</h2>\n{}</section>\n",
                escape(&s.heading),
                s.body
            );
        }
        out.push_str("</body>\n</html>\n");
        out
    }
}

/// Escape text for HTML.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            _ => out.push(c),
        }
    }
    out
}

/// The configuration of an experiment: every scalar of `doc`, nested objects flattened
/// (`array.capacity`), lists and `skip`ped keys left out.
pub fn configuration(doc: &Value, skip: &[&str]) -> Vec<Vec<String>> {
    let mut rows = Vec::new();
    flatten("", doc, skip, &mut rows);
    rows
}

fn flatten(prefix: &str, v: &Value, skip: &[&str], rows: &mut Vec<Vec<String>>) {
    let Value::Object(map) = v else { return };
    for (k, v) in map {
        if skip.contains(&k.as_str()) {
            continue;
        }
        let key = if prefix.is_empty() { k.clone() } else { format!("{prefix}.{k}") };
        match v {
            Value::Object(_) => flatten(&key, v, skip, rows),
            Value::Array(_) => {}
            Value::Null => rows.push(vec![key, "-".into()]),
            other => rows.push(vec![key, scalar(other)]),
        }
    }
}

/// A JSON scalar as text (numbers as [`num`] writes them).
pub fn scalar(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.as_f64().map(num).unwrap_or_else(|| n.to_string()),
        Value::Bool(b) => b.to_string(),
        Value::Null => "-".into(),
        other => other.to_string(),
    }
}

/// A number for a table: integers as they are, others to about four significant digits.
pub fn num(x: f64) -> String {
    if !x.is_finite() {
        return "-".into();
    }
    if x.fract() == 0.0 && x.abs() < 1e15 {
        return format!("{x:.0}");
    }
    let a = x.abs();
    let text = if a >= 100.0 {
        format!("{x:.1}")
    } else if a >= 1.0 {
        format!("{x:.2}")
    } else {
        format!("{x:.3}")
    };
    text.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// `v[key]` as a number (0 when missing).
pub fn f(v: &Value, key: &str) -> f64 {
    v.get(key).and_then(Value::as_f64).unwrap_or(0.0)
}

/// `v[key]` as text (empty when missing).
pub fn s(v: &Value, key: &str) -> String {
    v.get(key).map(scalar).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_escaped_tables_and_flattened_configuration() {
        let doc = serde_json::json!({"a": 1, "b": {"c": "x<y"}, "runs": [1, 2], "d": 0.5});
        let rows = configuration(&doc, &[]);
        assert_eq!(rows, vec![vec!["a", "1"], vec!["b.c", "x<y"], vec!["d", "0.5"]]);
        let mut s = Section::new("S");
        s.table(&["k", "v"], &rows);
        s.figure("<?xml version=\"1.0\"?><svg></svg>", "cap & co");
        let page = Page { title: "T".into(), subtitle: "u".into(), sections: vec![s] };
        let html = page.render();
        assert!(html.contains("<td>x&lt;y</td>"), "{html}");
        assert!(html.contains("<figure>\n<svg></svg>"), "{html}");
        assert!(html.contains("cap &amp; co"), "{html}");
        assert!(!html.contains("<?xml"), "{html}");
    }
}
