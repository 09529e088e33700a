//! The figure of `ember sievestore --sensitivity`: one panel per parameter varied (SieveStore,
//! ISCA 2010, section 5.1), accesses captured against the parameter's value, the paper's
//! value marked.

use crate::plot::{colour, png, Frame, PANEL};
use ember_sim::sievestore::sensitivity::SensitivityPoint;
use plotters::prelude::*;
use std::path::Path;

/// Draw `points` to `path` (PNG), five panels: SieveStore-D's t and epoch, SieveStore-C's
/// t1, t2 and window.
pub fn plot_sensitivity(
    points: &[SensitivityPoint],
    trace: &str,
    path: &Path,
) -> anyhow::Result<()> {
    let panels = [
        ("sievestore-d", "t", "SieveStore-D threshold t"),
        ("sievestore-d", "epoch", "SieveStore-D epoch (hours)"),
        ("sievestore-c", "t1", "SieveStore-C IMCT threshold t1"),
        ("sievestore-c", "t2", "SieveStore-C MCT threshold t2"),
        ("sievestore-c", "window", "SieveStore-C window W (hours)"),
    ];
    let y_max = points.iter().map(|p| 100.0 * p.captured()).fold(1.0, f64::max) * 1.1;
    png(path, (1500, 900), |root| {
        let root = root.titled(
            &format!("SieveStore sensitivity (section 5.1): accesses captured — {trace}"),
            ("sans-serif", 24),
        )?;
        let areas = root.split_evenly((2, 3));
        let frame = Frame { x_label_area: 35, y_label_area: 50, labels: 13, ..PANEL };
        for (i, (sieve, param, title)) in panels.iter().enumerate() {
            let pts: Vec<&SensitivityPoint> =
                points.iter().filter(|p| p.sieve == *sieve && p.parameter == *param).collect();
            let x_max = pts.iter().map(|p| p.value).fold(1.0, f64::max) * 1.1;
            let mut chart = frame.chart(&areas[i], title, 0f64..x_max, 0f64..y_max)?;
            frame.mesh(&mut chart).y_desc("% captured").draw()?;
            let c = colour(i);
            chart.draw_series(LineSeries::new(
                pts.iter().map(|p| (p.value, 100.0 * p.captured())),
                c.stroke_width(2),
            ))?;
            chart.draw_series(pts.iter().map(|p| {
                let style = if p.paper { BLACK.filled() } else { c.filled() };
                Circle::new((p.value, 100.0 * p.captured()), if p.paper { 6 } else { 4 }, style)
            }))?;
        }
        Ok(())
    })
}
