//! dyncore-report: what a reader sees of a run, whichever backend ran it —
//! each scenario's figure beside the paper's, comparison tables, plots
//! shaped like the paper's, `results.json`, the Perfetto trace, and the
//! report folder's `index.md` and self-contained `index.html`.
//!
//! * [`claims_view`]: the paper's claims and their verdicts, as a table;
//! * [`figure`]: a scenario's figure from its results (medians and ranges
//!   over seeds) and its comparison with the paper's values;
//! * [`model`]: one scenario's report as a model (figure, comparison,
//!   claims, tables, charts), built once and read by every renderer;
//! * [`report`]: the report folder of one scenario and the index;
//! * [`html`], [`markdown`], [`table`]: the renderers;
//! * [`plot`], [`figure_plot`]: PNG/SVG plots with a bundled font;
//! * [`trace`]: Chrome/Perfetto traces;
//! * [`events`]: Figure 8's events beside the allocation timeline;
//! * [`newtos`]: the NewtOS network-stack scenarios' runs and reports;
//! * [`machine`]: where a report was measured.

pub mod claims_view;
pub mod events;
pub mod figure;
pub mod figure_plot;
pub mod html;
pub mod machine;
pub mod markdown;
pub mod model;
pub mod newtos;
pub mod outdir;
pub mod plot;
pub mod report;
pub mod table;
pub mod trace;
