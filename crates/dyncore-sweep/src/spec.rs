//! The sweep file: what is swept, over which base scenario, with how many
//! seeds. Parsed with its spans, so every error is `file:line:col: field:
//! what is accepted; found X`.
//!
//! ```toml
//! name = "tax-vs-node"                 # default: the file's stem
//! title = "..."                        # one line for the report
//! base = "../scenarios/fig7-underprovisioned.toml"   # relative to this file
//! runs = ["DB tax 1"]                  # keep only these runs of the base
//! seed = 1                             # first seed (default: the base's)
//! seeds = 5                            # seeds per point (default 5)
//! plot = ["speedup"]                   # figures of the summary plots
//! [grid]                               # cartesian product, in file order
//! "run.*.workload.*.tax" = [0.01, 1, 100]
//! [zip]                                # paired lists: one axis, after the grid's
//! "run.*.nodes" = [6, 2]
//! "run.*.cpus_per_node" = [4, 12]
//! ```
//!
//! **Invariants:** every axis has at least one value; the fields of a zip
//! axis have lists of one length; no field path is swept twice; the points
//! are the axes' mixed-radix product, the last axis varying fastest.

use std::path::{Path, PathBuf};

use dyncore_scenario::load::{LoadError, line_col};
use toml_edit::{ImDocument, Item, Value};

use super::paths::{Seg, parse_path};

/// At most this many points × seeds in one sweep.
pub const MAX_UNITS: usize = 1_000_000;

/// The keys a sweep file may have.
const KEYS: &[&str] =
    &["name", "title", "description", "base", "runs", "seed", "seeds", "plot", "grid", "zip"];

/// One swept field: its path and its values, each with where the sweep file
/// says it.
#[derive(Debug, Clone)]
pub struct Field {
    /// As written: `run.*.workload.*.tax`.
    pub path: String,
    pub segs: Vec<Seg>,
    /// Clean values (no comments or layout of the sweep file).
    pub values: Vec<Value>,
    /// 1-based line and column of each value in the sweep file.
    pub at: Vec<Option<(usize, usize)>>,
    /// The table the field is in (`grid` or `zip`), for error paths.
    pub table: &'static str,
}

impl Field {
    /// The dotted field of value `i`, for errors: `grid."run.*.tax"[2]`.
    pub fn field_name(&self, i: usize) -> String {
        format!("{}.\"{}\"[{i}]", self.table, self.path)
    }
}

/// A string and where the sweep file says it (1-based line and column).
pub type Located = (String, Option<(usize, usize)>);

/// An axis of the product: one grid field, or the zip's fields together.
#[derive(Debug, Clone)]
pub struct Axis {
    pub fields: Vec<Field>,
}

impl Axis {
    pub fn len(&self) -> usize {
        self.fields[0].values.len()
    }

    /// Never true: a field has at least one value (checked when parsed).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A parsed sweep file (not yet applied to its base).
#[derive(Debug, Clone)]
pub struct Spec {
    pub file: PathBuf,
    pub text: String,
    pub name: String,
    pub title: String,
    pub description: String,
    /// The base scenario, resolved against the sweep file's folder.
    pub base: PathBuf,
    pub runs: Option<Vec<Located>>,
    pub seed: Option<u64>,
    pub seeds: Option<u32>,
    pub plot: Option<Vec<Located>>,
    pub axes: Vec<Axis>,
}

impl Spec {
    /// Every swept field, in column order.
    pub fn fields(&self) -> impl Iterator<Item = &Field> {
        self.axes.iter().flat_map(|a| a.fields.iter())
    }

    /// Points of the product (`usize::MAX` when it does not fit: a grid
    /// that large is refused when the file is read).
    pub fn points(&self) -> usize {
        self.axes.iter().try_fold(1usize, |n, a| n.checked_mul(a.len())).unwrap_or(usize::MAX)
    }

    /// The value index of each axis at point `p`.
    pub fn coords(&self, p: usize) -> Vec<usize> {
        let mut rest = p;
        let mut c = vec![0; self.axes.len()];
        for (i, a) in self.axes.iter().enumerate().rev() {
            c[i] = rest % a.len();
            rest /= a.len();
        }
        c
    }

    /// Where the sweep file says `field` (for errors).
    pub fn error(&self, at: Option<(usize, usize)>, field: &str, message: String) -> LoadError {
        LoadError { file: self.file.clone(), at, field: Some(field.to_string()), message }
    }
}

/// A value's kind in words, for "found X".
fn kind(v: &Value) -> &'static str {
    match v {
        Value::String(_) => "a string",
        Value::Integer(_) => "a whole number",
        Value::Float(_) => "a number",
        Value::Boolean(_) => "true or false",
        Value::Datetime(_) => "a date",
        Value::Array(_) => "a list",
        Value::InlineTable(_) => "a table",
    }
}

/// Parses sweep `text` read from `file`; the base is resolved against
/// `file`'s folder (or taken as it is when absolute).
pub fn parse(file: &Path, text: &str) -> Result<Spec, Vec<LoadError>> {
    let lc = |span: Option<std::ops::Range<usize>>| span.map(|s| line_col(text, s.start));
    let doc = ImDocument::parse(text.to_string()).map_err(|e| {
        vec![LoadError {
            file: file.to_path_buf(),
            at: lc(e.span()),
            field: None,
            message: e.message().trim().to_string(),
        }]
    })?;
    let root = doc.as_table();
    let mut errs = Vec::new();
    let err = |at, field: &str, message: String| LoadError {
        file: file.to_path_buf(),
        at,
        field: Some(field.to_string()),
        message,
    };
    for (k, item) in root.iter() {
        if !KEYS.contains(&k) {
            let at = lc(root.key(k).and_then(|k| k.span()).or_else(|| item.span()));
            errs.push(err(at, k, format!("unknown field; expected one of {}", KEYS.join(", "))));
        }
    }
    let string = |k: &str, errs: &mut Vec<LoadError>| -> Option<String> {
        let item = root.get(k)?;
        match item.as_str() {
            Some(s) => Some(s.to_string()),
            None => {
                errs.push(err(lc(item.span()), k, format!("expected a string; found {}", item_kind(item))));
                None
            }
        }
    };
    let stem = file.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    // Without `name`, the file's stem, or `sweep` where the stem is not a
    // folder name (text given as `<sweep>` by the Python package).
    let stem_ok = dyncore_sim::scenario::limits::check_name(&stem).is_ok();
    let name = string("name", &mut errs).unwrap_or(if stem_ok { stem } else { "sweep".into() });
    if let Err(m) = dyncore_sim::scenario::limits::check_name(&name) {
        let at = lc(root.get("name").and_then(Item::span));
        errs.push(err(
            at,
            "name",
            format!("{m} (the report folder is sweep-NAME; name the file or set `name`)"),
        ));
    }
    let title = string("title", &mut errs).unwrap_or_else(|| format!("Sweep {name}"));
    let description = string("description", &mut errs).unwrap_or_default();
    let base = match string("base", &mut errs) {
        Some(b) => {
            let b = PathBuf::from(b);
            if b.is_absolute() { b } else { file.parent().unwrap_or(Path::new("")).join(b) }
        }
        None => {
            if root.get("base").is_none() {
                errs.push(LoadError::new(file, "`base` is missing: the scenario file the sweep varies"));
            }
            PathBuf::new()
        }
    };
    let int = |k: &str, lo: i64, hi: i64, errs: &mut Vec<LoadError>| -> Option<i64> {
        let item = root.get(k)?;
        match item.as_integer() {
            Some(n) if (lo..=hi).contains(&n) => Some(n),
            _ => {
                let found = item.as_value().map_or_else(|| item_kind(item).to_string(), |v| v.to_string());
                errs.push(err(
                    lc(item.span()),
                    k,
                    format!("expected a whole number from {lo} to {hi}; found {}", found.trim()),
                ));
                None
            }
        }
    };
    let seed = int("seed", 0, i64::MAX, &mut errs).map(|n| n as u64);
    let seeds = int("seeds", 1, i64::from(dyncore_sim::Scenario::MAX_SEEDS), &mut errs).map(|n| n as u32);
    let runs = strings(root, "runs", &lc, &mut errs, file);
    let plot = strings(root, "plot", &lc, &mut errs, file);
    let axes = axes_of(root, &lc, &mut errs, file);
    let spec = Spec {
        file: file.to_path_buf(),
        text: text.to_string(),
        name,
        title,
        description,
        base,
        runs,
        seed,
        seeds,
        plot,
        axes,
    };
    let units = spec.points().saturating_mul(spec.seeds.unwrap_or(5) as usize);
    if errs.is_empty() && units > MAX_UNITS {
        errs.push(LoadError::new(
            file,
            if spec.points() == usize::MAX {
                let sizes: Vec<String> = spec.axes.iter().map(|a| a.len().to_string()).collect();
                format!(
                    "the grid's axes ({} values) make more points than a number holds; at most {MAX_UNITS} \
                     runs in one sweep (split it)",
                    sizes.join(" × ")
                )
            } else {
                format!(
                    "{} points × {} seeds is {units} runs; at most {MAX_UNITS} in one sweep (split it)",
                    spec.points(),
                    spec.seeds.unwrap_or(5)
                )
            },
        ));
    }
    if errs.is_empty() { Ok(spec) } else { Err(errs) }
}

/// The axes of `[grid]` (one per field) and `[zip]` (one for all), checked:
/// zip lists of one length, no path twice, at least one axis.
fn axes_of(root: &toml_edit::Table, lc: &Lc<'_>, errs: &mut Vec<LoadError>, file: &Path) -> Vec<Axis> {
    let err = |at, field: &str, message: String| LoadError {
        file: file.to_path_buf(),
        at,
        field: Some(field.to_string()),
        message,
    };
    let mut axes = Vec::new();
    if let Some(g) = root.get("grid") {
        for f in fields(g, "grid", lc, errs, file) {
            axes.push(Axis { fields: vec![f] });
        }
    }
    if let Some(z) = root.get("zip") {
        let fs = fields(z, "zip", lc, errs, file);
        if let Some(first) = fs.first() {
            for f in &fs[1..] {
                if f.values.len() != first.values.len() {
                    let at = f.at.first().copied().flatten();
                    errs.push(err(
                        at,
                        &format!("zip.\"{}\"", f.path),
                        format!(
                            "the lists of [zip] are paired, so they must have one length: \"{}\" has {}; found {}",
                            first.path,
                            first.values.len(),
                            f.values.len()
                        ),
                    ));
                }
            }
            axes.push(Axis { fields: fs });
        }
    }
    if axes.is_empty() && errs.is_empty() {
        errs.push(LoadError::new(
            file,
            "nothing to sweep: add a [grid] (or [zip]) of field paths and their values",
        ));
    }
    // No path twice.
    let mut seen = std::collections::BTreeSet::new();
    for f in axes.iter().flat_map(|a| a.fields.iter()) {
        if !seen.insert(f.path.clone()) {
            errs.push(err(
                f.at.first().copied().flatten(),
                &format!("{}.\"{}\"", f.table, f.path),
                "swept twice (in [grid] and [zip]); sweep a field once".into(),
            ));
        }
    }
    axes
}

fn item_kind(item: &Item) -> &'static str {
    match item {
        Item::Value(v) => kind(v),
        Item::Table(_) => "a table",
        Item::ArrayOfTables(_) => "a list of tables",
        Item::None => "nothing",
    }
}

type Lc<'a> = dyn Fn(Option<std::ops::Range<usize>>) -> Option<(usize, usize)> + 'a;

/// A list of strings at `k`, each with its place.
fn strings(
    root: &toml_edit::Table,
    k: &str,
    lc: &Lc<'_>,
    errs: &mut Vec<LoadError>,
    file: &Path,
) -> Option<Vec<Located>> {
    let item = root.get(k)?;
    let bad = |at, found: &str| LoadError {
        file: file.to_path_buf(),
        at,
        field: Some(k.to_string()),
        message: format!("expected a list of strings; found {found}"),
    };
    let Some(arr) = item.as_array() else {
        errs.push(bad(lc(item.span()), item_kind(item)));
        return None;
    };
    let mut out = Vec::new();
    for v in arr.iter() {
        match v.as_str() {
            Some(s) => out.push((s.to_string(), lc(v.span()))),
            None => errs.push(bad(lc(v.span()), kind(v))),
        }
    }
    if out.is_empty() && arr.is_empty() {
        errs.push(bad(lc(item.span()), "an empty list"));
    }
    Some(out)
}

/// The fields of `[grid]` or `[zip]`.
fn fields(
    item: &Item,
    table: &'static str,
    lc: &Lc<'_>,
    errs: &mut Vec<LoadError>,
    file: &Path,
) -> Vec<Field> {
    let err = |at, field: String, message: String| LoadError {
        file: file.to_path_buf(),
        at,
        field: Some(field),
        message,
    };
    let Some(t) = item.as_table_like() else {
        errs.push(err(
            lc(item.span()),
            table.into(),
            format!("expected a table of field paths; found {}", item_kind(item)),
        ));
        return Vec::new();
    };
    let mut out = Vec::new();
    for (path, v) in t.iter() {
        let field = format!("{table}.\"{path}\"");
        let segs = match parse_path(path) {
            Ok(s) => s,
            Err(m) => {
                let at = lc(t.key(path).and_then(|k| k.span()).or_else(|| v.span()));
                errs.push(err(at, field, m));
                continue;
            }
        };
        let Some(arr) = v.as_array() else {
            errs.push(err(lc(v.span()), field, format!("expected a list of values; found {}", item_kind(v))));
            continue;
        };
        if arr.is_empty() {
            errs.push(err(
                lc(v.span()),
                field,
                "expected a list of at least one value; found an empty list".into(),
            ));
            continue;
        }
        let mut values = Vec::new();
        let mut at = Vec::new();
        for x in arr.iter() {
            let mut clean = x.clone();
            clean.decor_mut().clear();
            if let Value::Array(a) = &mut clean {
                a.fmt();
            }
            values.push(clean);
            at.push(lc(x.span()));
        }
        // One column type: numbers (whole or not), strings, booleans, or TOML text.
        let kinds: std::collections::BTreeSet<&str> = values
            .iter()
            .map(|v| match v {
                Value::Integer(_) | Value::Float(_) => "a number",
                other => kind(other),
            })
            .collect();
        if kinds.len() > 1 {
            let found: Vec<&str> = kinds.into_iter().collect();
            errs.push(err(
                at[0],
                field,
                format!("the values of one field must be of one kind; found {}", found.join(" and ")),
            ));
            continue;
        }
        out.push(Field { path: path.to_string(), segs, values, at, table });
    }
    out
}

/// Where the top-level `key` of sweep `text` is (for errors found later).
pub fn locate(text: &str, key: &str) -> Option<(usize, usize)> {
    let doc = ImDocument::parse(text.to_string()).ok()?;
    let span = doc.as_table().get(key)?.span()?;
    Some(line_col(text, span.start))
}
