//! `out/index.html`: the whole report as one page to open in a browser. Per
//! scenario: what it is, its plot, the comparison table over seeds, the
//! paper's claims with their verdicts, the allocation events (Figure 8) and
//! its trace with how to open it; then the bench reports found in
//! `out/bench-*/` and the sweeps' summaries in `out/sweep-*/`.
//!
//! The page is self-contained: no scripts, no fonts or styles from the
//! network (the system's sans-serif), plots as PNGs beside it, relative
//! links only, so the folder can be copied, zipped or opened offline. It
//! reads on a laptop screen (one column of at most 1100 px) and in print
//! (a print stylesheet: A4, a page per section, no split tables or plots).

use std::fmt::Write as _;
use std::path::Path;

use anyhow::{Context, Result};

use crate::figure::{PaperCounts, summary_sentence};
use crate::figure_plot::seeds_phrase;
use crate::model::Model;
use crate::report::{Plot, Written, index_table};
use crate::table::escape_html as esc;

const STYLE: &str = r#"
:root { color-scheme: light; }
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", "Liberation Sans", sans-serif;
       font-size: 16px; line-height: 1.45; color: #212121; background: #fff;
       max-width: 1100px; margin: 0 auto; padding: 0 24px 48px; }
h1 { font-size: 1.9em; margin: 0.8em 0 0.2em; }
h2 { font-size: 1.45em; margin: 1.6em 0 0.3em; border-bottom: 1px solid #ccc; padding-bottom: 0.15em; }
h3 { font-size: 1.15em; margin: 1.2em 0 0.3em; }
h4, h5, h6 { font-size: 1em; margin: 1em 0 0.3em; }
p.meta { color: #555; font-size: 0.92em; margin-top: 0; }
code { font-family: "DejaVu Sans Mono", Menlo, Consolas, monospace; font-size: 0.9em; background: #f3f3f3;
       padding: 0 0.2em; border-radius: 3px; }
pre { background: #f6f6f6; padding: 0.6em 0.8em; overflow-x: auto; }
figure { margin: 1em 0; }
img { max-width: 100%; height: auto; display: block; }
table { border-collapse: collapse; margin: 0.6em 0 1em; font-size: 0.9em; }
th, td { border: 1px solid #d0d0d0; padding: 0.25em 0.55em; text-align: left; vertical-align: top; }
th { background: #f0f0f0; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
tbody tr:nth-child(even) { background: #fafafa; }
tr.differs td { background: #fff0dc; }
.table-wrap { overflow-x: auto; }
nav.toc table { font-size: 0.92em; }
.note { color: #555; }
@page { size: A4; margin: 14mm; }
@media print {
  body { font-size: 10pt; max-width: none; padding: 0; }
  a { color: inherit; text-decoration: none; }
  section { break-before: page; }
  figure, tr, h2, h3 { break-inside: avoid; }
  figure img { max-height: 105mm; width: auto; }
  h2, h3 { break-after: avoid; }
  .table-wrap { overflow: visible; }
  tr.differs td, th { print-color-adjust: exact; -webkit-print-color-adjust: exact; }
}
"#;

/// How a scenario ran, for its section of the page: `ran` says where
/// ("simulated", "live"), `lead` is HTML put after the description (the
/// live backend's side-by-side table).
#[derive(Debug, Clone, Copy)]
pub struct Ran<'a> {
    pub ran: &'a str,
    pub lead: &'a str,
}

impl Ran<'static> {
    pub const SIMULATED: Ran<'static> = Ran { ran: "simulated", lead: "" };
}

/// A scenario's section of the page, from its model; links are relative
/// to `out/`.
pub fn scenario_section(m: &Model<'_>, plots: &[Plot], ran: Ran<'_>) -> String {
    let (scenario, fig, first_seed) = (m.scenario, m.figure, m.first_seed());
    let name = esc(&scenario.name);
    let mut s = format!("<section id=\"{name}\">\n<h2>{}</h2>\n", esc(&scenario.title));
    let _ = writeln!(
        s,
        "<p class=\"meta\"><code>{name}</code> · {}, {} · <a href=\"{name}/report.md\">report.md</a> · \
         <a href=\"{name}/results.json\">results.json</a> · <a href=\"{name}/trace.json\">trace.json</a></p>",
        esc(ran.ran),
        esc(&seeds_phrase(&fig.seeds)),
    );
    if !scenario.description.trim().is_empty() {
        let _ = writeln!(s, "<p>{}</p>", esc(scenario.description.trim()));
    }
    s += ran.lead;
    for p in plots {
        let _ = writeln!(
            s,
            "<figure><img src=\"{name}/{f}.png\" width=\"{w}\" height=\"{h}\" alt=\"{alt} ({f})\">\
             <figcaption class=\"note\">Also as <a href=\"{name}/{f}.svg\">SVG</a>.</figcaption></figure>",
            f = p.file,
            w = p.size.0,
            h = p.size.1,
            alt = esc(&scenario.title),
        );
    }
    s += "<h3>dyncore beside the paper</h3>\n<div class=\"table-wrap\">\n";
    s +=
        &m.comparison.to_html(|i| m.comparison_differs.get(i).copied().unwrap_or(false).then_some("differs"));
    s += "</div>\n";
    s += &crate::markdown::to_html(&m.verdict, 0, "");
    s += &crate::claims_view::html(m.claims);
    if let Some(t) = &m.timeline {
        let _ =
            writeln!(s, "<h3>Events: CPU allocation over time ({}, seed {first_seed})</h3>", esc(&t.label));
        s += "<div class=\"table-wrap\">\n";
        s += &t.table.to_html(|_| None);
        s += "</div>\n";
    }
    let _ = writeln!(
        s,
        "<h3>Trace</h3>\n<p><a href=\"{name}/trace.json\">trace.json</a> holds the first seed ({first_seed}) only: \
         one trace per scenario. To open it, go to <a href=\"https://ui.perfetto.dev\">ui.perfetto.dev</a>, \
         choose <em>Open trace file</em> and pick the file (Perfetto reads it inside the browser; nothing is \
         uploaded), or load it in <code>chrome://tracing</code>.</p>\n</section>"
    );
    s
}

/// The bench reports in `out/bench-*/report.md` and the sweeps' in
/// `out/sweep-*/report.md`, in name order, as (folder name, section HTML).
fn bench_sections(out: &Path) -> Result<Vec<(String, String)>> {
    let mut dirs: Vec<String> = match std::fs::read_dir(out) {
        Ok(rd) => rd
            .filter_map(|e| e.ok())
            .filter(|e| e.path().join("report.md").is_file())
            .filter_map(|e| e.file_name().to_str().map(str::to_string))
            .filter(|n| n.starts_with("bench-") || n.starts_with("sweep-"))
            .collect(),
        Err(_) => Vec::new(),
    };
    dirs.sort();
    dirs.into_iter()
        .map(|d| {
            let path = out.join(&d).join("report.md");
            let md = std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
            let body = crate::markdown::to_html(&md, 1, &format!("{d}/"));
            let section = format!(
                "<section id=\"{id}\">\n{body}<p class=\"meta\">From <a href=\"{id}/report.md\">{id}/report.md</a>; \
                 {what}</p>\n</section>\n",
                id = esc(&d),
                what = if d.starts_with("sweep-") {
                    "a design-space sweep (<code>dyncore sweep</code>): simulated figures, with the table in results.parquet and results.csv."
                } else {
                    "figures measured on this machine when the benchmark ran."
                }
            );
            Ok((d, section))
        })
        .collect()
}

/// The whole page; `what_ran` says what the invocation ran.
pub fn page(out: &Path, written: &[Written], total: &PaperCounts, what_ran: &str) -> Result<String> {
    let benches = bench_sections(out)?;
    let mut s = String::from("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
    s += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
    s += "<title>dyncore report</title>\n<style>";
    s += STYLE;
    s += "</style>\n</head>\n<body>\n<header>\n<h1>dyncore report</h1>\n";
    let several = written.iter().any(|w| w.seeds.len() > 1);
    let _ = writeln!(
        s,
        "<p>{} Every run is run once per seed, each figure the median over the seeds with its min–max range \
         (whiskers on the plots, a column in the tables). The paper's values, where its text states them, are the \
         hollow diamonds on the plots and the <em>paper</em> column in the tables; rows whose paper value lies \
         outside its band (the precision the paper prints it to, plus the seeds' range) are shaded. Every \
         statement of the paper that the figures can check is a claim, checked on every run and shown in three \
         groups: predictions (counted), fitted points and inputs (shown, not counted); rows of claims that fail \
         are shaded. docs/results.md explains every difference.</p>\n<p><strong>{}.</strong></p>\n</header>",
        crate::markdown::inline(what_ran, ""),
        esc(&summary_sentence(total, several))
    );
    s += "<nav class=\"toc\">\n<h2>Contents</h2>\n<div class=\"table-wrap\">\n";
    // Through Markdown, whose links the table cells keep.
    s += &crate::markdown::to_html(
        &index_table(written, |w| format!("[{n}](#{n})", n = w.name)).to_markdown(),
        0,
        "",
    );
    s += "</div>\n";
    if !benches.is_empty() {
        s += "<p>Benchmarks on this machine and sweeps: ";
        let links: Vec<String> =
            benches.iter().map(|(d, _)| format!("<a href=\"#{id}\">{id}</a>", id = esc(d))).collect();
        s += &links.join(" · ");
        s += ".</p>\n";
    } else {
        s += "<p class=\"note\">No benchmark reports in this folder: run <code>dyncore bench sim</code>, \
              <code>bench sidecall</code> or <code>bench reconfig</code>, then this command again, to include them.</p>\n";
    }
    s += "</nav>\n<main>\n";
    for w in written {
        s += &w.html;
        s.push('\n');
    }
    for (_, b) in &benches {
        s += b;
    }
    s += "</main>\n</body>\n</html>\n";
    Ok(s)
}
