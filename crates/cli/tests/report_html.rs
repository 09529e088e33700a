//! `ember report DIR -o report.html` on every experiment's output (sim, sievestore, demote,
//! analyze, warmup run, and a sweep's results.csv), opened in headless Chromium: the page
//! loads with no console error and no script error, every figure is an SVG with drawn content
//! and a size once laid out, and a screenshot is not one colour.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "integration-test helpers")]

mod serve_support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serve_support::{ember, run, run_status, skip_or_fail};

fn ember_ok(dir: &Path, args: &[&str]) {
    run(Command::new(ember()).current_dir(dir).args(args), Duration::from_secs(300));
}

/// Small runs of every experiment, each with --out; returns (name, output directory).
fn experiments(dir: &Path) -> Vec<(&'static str, PathBuf)> {
    ember_ok(
        dir,
        &["trace", "gen", "zipf", "--blocks", "2000", "--requests", "20000", "--rate", "50"]
            .into_iter()
            .chain(["--seed", "1", "-o", "zipf.ember"])
            .collect::<Vec<_>>(),
    );
    ember_ok(
        dir,
        &["sim", "zipf.ember", "-q", "--policy", "lru,fifo", "--size", "1%,5%,20%"]
            .into_iter()
            .chain(["--interval", "1m", "--out", "sim"])
            .collect::<Vec<_>>(),
    );
    ember_ok(
        dir,
        &["trace", "gen", "ensemble", "--days", "2", "--accesses-per-day", "20000", "--seed", "7"]
            .into_iter()
            .chain(["-o", "ensemble.csv"])
            .collect::<Vec<_>>(),
    );
    ember_ok(
        dir,
        &["sievestore", "ensemble.csv", "--experiment", "--out", "sievestore", "--quiet"],
    );
    ember_ok(
        dir,
        &["trace", "gen", "ww-zipf", "--client-blocks", "256", "--array-blocks", "256"]
            .into_iter()
            .chain(["--seed", "3", "-o", "ww.ember"])
            .collect::<Vec<_>>(),
    );
    ember_ok(dir, &["demote", "ww.ember", "--experiment", "--out", "demote", "--quiet"]);
    ember_ok(
        dir,
        &["trace", "gen", "bonfire", "--rate", "0.2", "--days", "3", "--seed", "1", "-o", "b.csv"],
    );
    ember_ok(dir, &["analyze", "b.csv", "--out", "analyze"]);
    ember_ok(dir, &["warmup", "run", "b.csv", "--th-n", "0.01", "--out", "warmup"]);
    // A sweep needs Ray; its output is a results.csv of ember sim's columns per cell.
    let sweep = dir.join("sweep");
    std::fs::create_dir_all(&sweep).expect("mkdir");
    let mut csv = String::from("cell,kind,trace,policy,size,percent_wss,hits,misses,hit_ratio\n");
    for (i, (policy, pct, hr)) in
        [("lru", 1, 0.2), ("lru", 10, 0.5), ("arc", 1, 0.25), ("arc", 10, 0.55)].iter().enumerate()
    {
        csv.push_str(&format!("{i},sim,/t/a.csv,{policy},{pct}%,{pct},1,1,{hr}\n"));
    }
    std::fs::write(sweep.join("results.csv"), csv).expect("write");
    std::fs::write(sweep.join("failures.csv"), "cell,kind,trace,error\n").expect("write");
    ["sim", "sievestore", "demote", "analyze", "warmup", "sweep"]
        .into_iter()
        .map(|n| (n, dir.join(n)))
        .collect()
}

/// The SVG elements of `html` (from `<svg` to `</svg>`).
fn svgs(html: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = html;
    while let Some(i) = rest.find("<svg") {
        let tail = &rest[i..];
        let end = tail.find("</svg>").map_or(tail.len(), |e| e + 6);
        out.push(&tail[..end]);
        rest = &tail[end..];
    }
    out
}

/// Headless Chromium as root on this machine, with a fresh profile.
fn chromium(profile: &Path) -> Command {
    let mut c = Command::new("chromium");
    c.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--hide-scrollbars",
    ])
    .arg(format!("--user-data-dir={}", profile.display()));
    c
}

/// The report with a probe: records script errors and failed loads from the start, and at the
/// end writes each figure's laid-out size and the errors into the DOM for --dump-dom.
fn probed(html: &str) -> String {
    let head = "<head><script>window.__errors=[];addEventListener('error',function(e){\
                __errors.push(String(e.message||(e.target&&(e.target.src||e.target.href))))},true);\
                </script>";
    let tail = "<script>var s=document.querySelectorAll('figure svg'),r=[];\
                for(var i=0;i<s.length;i++){var b=s[i].getBoundingClientRect();\
                r.push(Math.round(b.width)+'x'+Math.round(b.height)+':'+s[i].querySelectorAll('path,rect,polyline,line,circle,text').length)}\
                document.body.setAttribute('data-figures',r.join(' '));\
                document.body.setAttribute('data-errors',__errors.join('|'));</script></body>";
    html.replacen("<head>", head, 1).replacen("</body>", tail, 1)
}

fn attribute<'a>(dom: &'a str, name: &str) -> Option<&'a str> {
    let start = dom.find(&format!("{name}=\""))? + name.len() + 2;
    let len = dom[start..].find('"')?;
    Some(&dom[start..start + len])
}

/// Whether a PNG has more than a handful of colours (not a blank page).
fn distinct_colours(png_path: &Path) -> usize {
    let file = std::fs::File::open(png_path).expect("screenshot");
    let decoder = png::Decoder::new(std::io::BufReader::new(file));
    let mut reader = decoder.read_info().expect("a PNG");
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).expect("a frame");
    let px = info.color_type.samples();
    let mut seen = std::collections::HashSet::new();
    for chunk in buf[..info.buffer_size()].chunks(px) {
        seen.insert(chunk.to_vec());
        if seen.len() > 64 {
            break;
        }
    }
    seen.len()
}

#[test]
fn every_experiment_becomes_a_page_that_chromium_renders() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut pages = Vec::new();
    for (name, out) in experiments(dir.path()) {
        let html_path = dir.path().join(format!("{name}.html"));
        ember_ok(
            dir.path(),
            &["report", out.to_str().expect("utf-8"), "-o", html_path.to_str().expect("utf-8")],
        );
        let html = std::fs::read_to_string(&html_path).expect("the report");
        assert!(html.starts_with("<!DOCTYPE html>"), "{name}: not an HTML document");
        assert!(!html.contains("<script"), "{name}: the report runs no script");
        assert!(!html.contains("src=\"http") && !html.contains("href=\"http"), "{name}: fetches");
        let n_figures = svgs(&html).len();
        let figures = svgs(&html);
        assert!(!figures.is_empty(), "{name}: no figure");
        for svg in &figures {
            assert!(
                svg.contains("<path") || svg.contains("<rect") || svg.contains("<polyline"),
                "{name}: an empty figure"
            );
        }
        let paper = match name {
            "demote" => Some("Table 2"),
            "sievestore" => Some("the paper's findings"),
            "warmup" => Some("Bonfire's Table 3"),
            _ => None,
        };
        if let Some(p) = paper {
            assert!(html.contains(p), "{name}: the paper's numbers are missing");
        }
        pages.push((name, html_path, html, n_figures));
    }
    if Command::new("chromium").arg("--version").output().is_err()
        && skip_or_fail("chromium is not installed (Debian's chromium package)")
    {
        return;
    }
    for (name, path, html, n_figures) in pages {
        let probe = path.with_extension("probe.html");
        std::fs::write(&probe, probed(&html)).expect("write");
        let profile = tempfile::tempdir().expect("profile");
        let out = run_status(
            chromium(profile.path())
                .args(["--enable-logging=stderr", "--v=0", "--dump-dom"])
                .arg(format!("file://{}", probe.display())),
            Duration::from_secs(120),
        );
        assert!(out.status.success(), "{name}: chromium failed: {}", out.stderr);
        let console: Vec<&str> = out
            .stderr
            .lines()
            .filter(|l| l.contains("CONSOLE") || l.contains("Uncaught"))
            .collect();
        assert!(console.is_empty(), "{name}: console messages:\n{}", console.join("\n"));
        let errors = attribute(&out.stdout, "data-errors").expect("the probe ran");
        assert!(errors.is_empty(), "{name}: page errors: {errors}");
        let figures: Vec<&str> =
            attribute(&out.stdout, "data-figures").expect("the probe ran").split(' ').collect();
        assert_eq!(figures.len(), n_figures, "{name}: figures in the DOM: {figures:?}");
        for fig in figures {
            let (size, elements) = fig.split_once(':').expect("WxH:N");
            let (w, h) = size.split_once('x').expect("WxH");
            let (w, h, e): (u32, u32, u32) =
                (w.parse().unwrap_or(0), h.parse().unwrap_or(0), elements.parse().unwrap_or(0));
            assert!(w > 100 && h > 100 && e > 10, "{name}: a figure did not render: {fig}");
        }
        let shot = path.with_extension("png");
        let out = run_status(
            chromium(profile.path())
                .arg("--window-size=1200,1600")
                .arg(format!("--screenshot={}", shot.display()))
                .arg(format!("file://{}", path.display())),
            Duration::from_secs(120),
        );
        assert!(out.status.success(), "{name}: chromium screenshot failed: {}", out.stderr);
        let colours = distinct_colours(&shot);
        assert!(colours > 16, "{name}: the screenshot is blank ({colours} colours)");
    }
}
