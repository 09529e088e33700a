//! Chart scaffolding shared by every figure ember draws: the PNG canvas and its error
//! handling, the chart frames, the palette, line series with their legend marks, and the
//! legend. The figures themselves live with their commands' plot modules (`plot_sim`,
//! `plot_demote`, `plot_sievestore`, `plot_sensitivity`, `plot_analyze`) and in
//! `cmd_warmup`.

use anyhow::anyhow;
use plotters::chart::MeshStyle;
use plotters::coord::ranged1d::{AsRangedCoord, ValueFormatter};
use plotters::coord::Shift;
use plotters::prelude::*;
use std::path::Path;

/// What a figure's drawing closure returns: plotters' errors boxed, so one closure can use
/// `?` on every drawing call.
pub type DrawResult = Result<(), Box<dyn std::error::Error>>;

/// Turn a figure's drawing result into an error that names the file.
pub fn finish(path: &Path, r: DrawResult) -> anyhow::Result<()> {
    r.map_err(|e| anyhow!("drawing {}: {e}", path.display()))
}

/// A figure's canvas: the whole PNG image (or a part of it, once split into panels).
pub type Canvas<'b> = DrawingArea<BitMapBackend<'b>, Shift>;

/// A chart on a [`Canvas`], `X` and `Y` the coordinates of its axes.
pub type Chart<'a, 'b, X, Y> = ChartContext<'a, BitMapBackend<'b>, Cartesian2d<X, Y>>;

/// What building a chart on a [`Canvas`] can fail with.
pub type AreaError<'b> = DrawingAreaErrorKind<<BitMapBackend<'b> as DrawingBackend>::ErrorType>;

/// Draw the PNG figure `path`, `size` pixels: `body` draws on a white canvas, then the file
/// is written. An error names the file.
pub fn png(
    path: &Path,
    size: (u32, u32),
    body: impl FnOnce(&Canvas<'_>) -> DrawResult,
) -> anyhow::Result<()> {
    let draw = || -> DrawResult {
        let root = BitMapBackend::new(path, size).into_drawing_area();
        root.fill(&WHITE)?;
        body(&root)?;
        root.present()?;
        Ok(())
    };
    finish(path, draw())
}

/// The layout of a chart: its margin, the caption's size, the label areas below and left of
/// the plot (pixels), and the sizes of the tick labels and the axis descriptions (points;
/// `None`: the tick labels' size).
#[derive(Clone, Copy, Debug)]
pub struct Frame {
    /// Margin around the chart, pixels.
    pub margin: u32,
    /// Caption size, points.
    pub caption: u32,
    /// Height of the x axis' label area, pixels.
    pub x_label_area: u32,
    /// Width of the y axis' label area, pixels.
    pub y_label_area: u32,
    /// Tick label size, points.
    pub labels: u32,
    /// Axis description size, points (`None`: as the tick labels).
    pub axis_desc: Option<u32>,
}

/// The frame of the papers' figures that `ember demote` and `ember sievestore` draw.
pub const PAPER: Frame = Frame {
    margin: 20,
    caption: 24,
    x_label_area: 45,
    y_label_area: 70,
    labels: 15,
    axis_desc: None,
};

/// One panel of a paper figure of several panels.
pub const PANEL: Frame = Frame {
    margin: 15,
    caption: 18,
    x_label_area: 40,
    y_label_area: 70,
    labels: 14,
    axis_desc: None,
};

/// The frame of the figures of `ember sim`, `ember analyze` and `ember warmup`.
pub const WIDE: Frame = Frame {
    margin: 16,
    caption: 24,
    x_label_area: 50,
    y_label_area: 64,
    labels: 15,
    axis_desc: Some(17),
};

impl Frame {
    /// A chart in this frame on `area`, captioned `caption`, over the ranges `x` and `y`.
    pub fn chart<'a, 'b, X: AsRangedCoord, Y: AsRangedCoord>(
        &self,
        area: &'a Canvas<'b>,
        caption: &str,
        x: X,
        y: Y,
    ) -> Result<Chart<'a, 'b, X::CoordDescType, Y::CoordDescType>, AreaError<'b>> {
        ChartBuilder::on(area)
            .margin(self.margin)
            .caption(caption, ("sans-serif", self.caption))
            .x_label_area_size(self.x_label_area)
            .y_label_area_size(self.y_label_area)
            .build_cartesian_2d(x, y)
    }

    /// The mesh of `chart` with this frame's label sizes; the caller adds the axis
    /// descriptions and whatever else its figure needs, then draws it.
    pub fn mesh<'a, 'b, 'c, X, Y>(
        &self,
        chart: &'c mut Chart<'a, 'b, X, Y>,
    ) -> MeshStyle<'a, 'c, X, Y, BitMapBackend<'b>>
    where
        X: Ranged + ValueFormatter<X::ValueType>,
        Y: Ranged + ValueFormatter<Y::ValueType>,
    {
        let mut mesh = chart.configure_mesh();
        mesh.label_style(("sans-serif", self.labels));
        if let Some(size) = self.axis_desc {
            mesh.axis_desc_style(("sans-serif", size));
        }
        mesh
    }
}

/// A colour per series, distinguishable in print (every ember plot uses this palette).
pub fn colour(i: usize) -> RGBColor {
    const P: [RGBColor; 10] = [
        RGBColor(31, 119, 180),
        RGBColor(255, 127, 14),
        RGBColor(44, 160, 44),
        RGBColor(214, 39, 40),
        RGBColor(148, 103, 189),
        RGBColor(140, 86, 75),
        RGBColor(227, 119, 194),
        RGBColor(127, 127, 127),
        RGBColor(188, 189, 34),
        RGBColor(23, 190, 207),
    ];
    P[i % P.len()]
}

/// How [`line`] draws a series: the stroke's width, a dot of radius `dot` on every point (0:
/// none), and the legend mark's length and width (pixels).
#[derive(Clone, Copy, Debug)]
pub struct LineStyle {
    /// Stroke width.
    pub width: u32,
    /// Radius of the dot on every point; 0 draws none.
    pub dot: u32,
    /// Length of the legend mark.
    pub mark_len: i32,
    /// Stroke width of the legend mark.
    pub mark_width: u32,
}

/// The lines of `ember sim`, `ember analyze` and `ember warmup`: 2 px, a 22 px legend mark
/// 3 px wide, no dots.
pub const WIDE_LINE: LineStyle = LineStyle { width: 2, dot: 0, mark_len: 22, mark_width: 3 };

/// Draw `points` on `chart` as one line named `name` (in the legend) in colour `c`.
pub fn line<X, Y>(
    chart: &mut Chart<'_, '_, X, Y>,
    name: impl Into<String>,
    points: &[(f64, f64)],
    c: RGBColor,
    style: LineStyle,
) -> DrawResult
where
    X: Ranged<ValueType = f64>,
    Y: Ranged<ValueType = f64>,
{
    let LineStyle { width, dot, mark_len, mark_width } = style;
    chart
        .draw_series(LineSeries::new(points.iter().copied(), c.stroke_width(width)))?
        .label(name)
        .legend(move |(x, y)| {
            PathElement::new(vec![(x, y), (x + mark_len, y)], c.stroke_width(mark_width))
        });
    if dot > 0 {
        chart.draw_series(points.iter().map(|&p| Circle::new(p, dot, c.filled())))?;
    }
    Ok(())
}

/// The legend mark of a bar series: a filled box `width` pixels wide, 12 high.
pub fn box_mark(c: RGBColor, width: i32) -> impl Fn((i32, i32)) -> Rectangle<(i32, i32)> {
    move |(x, y)| Rectangle::new([(x, y - 6), (x + width, y + 6)], c.filled())
}

/// The legend every ember figure draws: white translucent box, black border, 14 pt labels,
/// at `position`.
pub fn draw_legend<'a, DB, CT>(
    chart: &mut ChartContext<'a, DB, CT>,
    position: SeriesLabelPosition,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>>
where
    DB: DrawingBackend + 'a,
    CT: plotters::coord::CoordTranslate,
{
    chart
        .configure_series_labels()
        .position(position)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 14))
        .draw()
}
