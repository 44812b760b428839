//! One scenario's report as a model, built once from the scenario and its
//! results: the figure, its comparison with the paper, the claims, the
//! tables (runs, energy, programs, the allocation timeline) and the charts.
//! Each renderer then reads the model in one pass and computes nothing of
//! its own:
//!
//! * `report.md` and `results.json` ([`crate::report`]);
//! * the scenario's section of `index.html` ([`crate::html`]);
//! * the plots ([`crate::report::render_plots`]).
//!
//! The live backend's report (`dyncore-live`) builds the same model — over
//! the live runs, or live and simulated side by side — and adds its own
//! sections around it.
//!
//! Invariant: a model's tables and charts are functions of its scenario,
//! results, figure and claims only, so the same inputs give the same bytes
//! from every renderer.

use dyncore_sim::ScenarioResult;
use dyncore_sim::claims::Claims;
use dyncore_sim::scenario::{PlotKind, Scenario};

use crate::events::{TimelineRow, timeline_rows};
use crate::figure::{Figure, comparison_table};
use crate::figure_plot::{bar_figure, timeline};
use crate::plot::bars::BarFigure;
use crate::plot::timeline::Timeline;
use crate::report::{energy_table, paper_verdict, programs_table, runs_table, timeline_table};
use crate::table::Table;

/// A chart the model draws.
pub enum ChartKind {
    Bars(BarFigure),
    Timeline(Timeline),
}

/// A chart and the file stem it is written to (`plot`, `plot-bars`).
pub struct ChartModel {
    pub file: &'static str,
    pub chart: ChartKind,
}

/// The allocation timeline of one run: its label, its rows, and their table.
pub struct TimelineModel {
    pub label: String,
    pub rows: Vec<TimelineRow>,
    pub table: Table,
}

/// How a report differs from the simulator's default.
#[derive(Default, Clone, Copy)]
pub struct Options<'a> {
    /// Replaces the plots' line under the title (which otherwise says
    /// they are dyncore-sim's).
    pub subtitle: Option<&'a str>,
    /// The result the runs, energy and programs tables show (default: the
    /// first seed's).
    pub tables_of: Option<&'a ScenarioResult>,
}

/// One scenario's report (see the module docs).
pub struct Model<'a> {
    pub scenario: &'a Scenario,
    /// One per seed, in order; at least one.
    pub results: &'a [ScenarioResult],
    pub figure: &'a Figure,
    pub claims: &'a Claims,
    /// The figure beside the paper, and which of its rows lie outside the
    /// paper value's band.
    pub comparison: Table,
    pub comparison_differs: Vec<bool>,
    /// What the comparison came to, in a sentence or two.
    pub verdict: String,
    pub runs: Table,
    pub energy: Table,
    pub programs: Table,
    /// Allocation figures: the timeline of the report's timeline run.
    pub timeline: Option<TimelineModel>,
    pub charts: Vec<ChartModel>,
}

impl<'a> Model<'a> {
    pub fn build(
        scenario: &'a Scenario,
        results: &'a [ScenarioResult],
        figure: &'a Figure,
        claims: &'a Claims,
        opts: Options<'_>,
    ) -> Model<'a> {
        assert!(!results.is_empty(), "a report needs at least one result");
        let tables_of = opts.tables_of.unwrap_or(&results[0]);
        let (charts, timeline) = charts(scenario, results, figure, opts.subtitle);
        Model {
            scenario,
            results,
            figure,
            claims,
            comparison: comparison_table("", figure),
            comparison_differs: figure.cells().iter().map(|c| c.differs()).collect(),
            verdict: paper_verdict(&claims.counts(), figure.seeds.len() > 1),
            runs: runs_table(tables_of),
            energy: energy_table(tables_of),
            programs: programs_table(tables_of),
            timeline,
            charts,
        }
    }

    /// The first seed (the one the tables and the trace show).
    pub fn first_seed(&self) -> u64 {
        self.results[0].seed
    }

    /// Every run finished, in every seed.
    pub fn all_finished(&self) -> bool {
        self.results.iter().all(|r| r.runs.iter().all(|r| r.finished))
    }
}

/// The run whose allocation timeline the report shows (first seed).
fn timeline_run<'r>(scenario: &Scenario, result: &'r ScenarioResult) -> &'r dyncore_sim::RunResult {
    scenario
        .report
        .timeline_run
        .as_ref()
        .and_then(|l| result.runs.iter().find(|r| &r.label == l))
        .unwrap_or(&result.runs[0])
}

/// A scenario's charts — the figure (`plot`), or for an allocation figure
/// the timeline of the first seed (`plot`) and the figure (`plot-bars`) —
/// and the timeline.
fn charts(
    scenario: &Scenario,
    results: &[ScenarioResult],
    fig: &Figure,
    subtitle: Option<&str>,
) -> (Vec<ChartModel>, Option<TimelineModel>) {
    let first = &results[0];
    if first.runs.is_empty() {
        return (Vec::new(), None);
    }
    let mut bars = bar_figure(scenario, results, fig);
    if let Some(s) = subtitle {
        bars.subtitle = s.to_string();
    }
    match scenario.report.kind {
        PlotKind::Bars => (vec![ChartModel { file: "plot", chart: ChartKind::Bars(bars) }], None),
        PlotKind::Allocation => {
            let run = timeline_run(scenario, first);
            let rows = timeline_rows(scenario, run);
            let mut chart = timeline(scenario, run, &rows, first.seed);
            if let Some(s) = subtitle {
                chart.subtitle = s.to_string();
                chart.x_label = "time (s)".into();
            }
            bars.title =
                format!("{}: {} per program", scenario.title, crate::figure::metric_short(fig.metric));
            let charts = vec![
                ChartModel { file: "plot", chart: ChartKind::Timeline(chart) },
                ChartModel { file: "plot-bars", chart: ChartKind::Bars(bars) },
            ];
            let table = timeline_table(&rows);
            (charts, Some(TimelineModel { label: run.label.clone(), rows, table }))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shipped(name: &str) -> (Scenario, Vec<ScenarioResult>, Figure, Claims) {
        let path = dyncore_scenario::load::default_dir().join(format!("{name}.toml"));
        let sc = Scenario::from_toml(&std::fs::read_to_string(path).unwrap()).unwrap();
        let results = vec![dyncore_sim::run_quietly(&sc).expect("within the event budget")];
        let fig = Figure::build(&sc, &results);
        let claims = dyncore_sim::scenario::claims::check(&sc, &results);
        (sc, results, fig, claims)
    }

    /// Figure 8 is an allocation figure: a timeline chart and its table, and
    /// the bars; Figure 3 one bar chart. The renderers get one comparison
    /// row flag per row, and the page and report.md show the same tables.
    #[test]
    fn one_model_holds_every_table_and_chart_the_renderers_show() {
        let (sc, results, fig, claims) = shipped("fig8-mixed-sequential");
        let m = Model::build(&sc, &results, &fig, &claims, Options::default());
        let files: Vec<&str> = m.charts.iter().map(|c| c.file).collect();
        assert_eq!(files, ["plot", "plot-bars"]);
        assert!(matches!(m.charts[0].chart, ChartKind::Timeline(_)));
        let t = m.timeline.as_ref().expect("an allocation figure has a timeline");
        assert_eq!(t.table.rows.len(), t.rows.len());
        assert!(!t.rows.is_empty());
        assert_eq!(m.comparison_differs.len(), m.comparison.rows.len());
        let page = crate::html::scenario_section(&m, &[], crate::html::Ran::SIMULATED);
        for row in t.table.rows.iter().chain(&m.comparison.rows) {
            assert!(page.contains(&crate::table::escape_html(&row[0])), "{row:?}");
        }
        assert_eq!(m.runs.rows.len(), results[0].runs.len());

        let (sc, results, fig, claims) = shipped("fig3-taxation");
        let subtitle = "a subtitle of our own";
        let opts = Options { subtitle: Some(subtitle), tables_of: None };
        let m = Model::build(&sc, &results, &fig, &claims, opts);
        assert!(m.timeline.is_none());
        match &m.charts[..] {
            [ChartModel { file: "plot", chart: ChartKind::Bars(b) }] => assert_eq!(b.subtitle, subtitle),
            _ => panic!("Figure 3 is one bar chart"),
        }
    }
}
