//! The sweep's table: one row per point × seed × run × series, a column per
//! swept field and per figure, as an Arrow record batch, written as Parquet
//! and as CSV beside it.
//!
//! Columns: `point` (u32), `seed` (u64), `run`, `series` (strings), then
//! each swept field under its path (whole numbers as i64, other numbers as
//! f64, strings, booleans; a list or table value as its TOML text), then
//! each figure (f64, null where it does not apply).
//!
//! **Invariants:** the same rows give the same bytes: the rows come in unit
//! order, the Parquet writer's properties are fixed (no compression, one
//! row group per 65 536 rows, a fixed `created_by`), the CSV prints floats
//! as Rust's shortest round-tripping decimal.

use std::sync::Arc;

use anyhow::{Context, Result};
use arrow_array::builder::{
    BooleanBuilder, Float64Builder, Int64Builder, StringBuilder, UInt32Builder, UInt64Builder,
};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field as ArrowField, Schema};
use parquet::arrow::ArrowWriter;
use parquet::file::properties::WriterProperties;
use toml_edit::Value;

use super::exec::{Row, figures};
use super::{Sweep, spec};

/// A swept field's column type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColumnKind {
    Int,
    Float,
    Str,
    Bool,
    /// A list or table: its TOML text.
    Toml,
}

/// The column type of `f`'s values (one kind, checked when parsed).
pub fn column_kind(f: &spec::Field) -> ColumnKind {
    if f.values.iter().all(|v| matches!(v, Value::Integer(_))) {
        ColumnKind::Int
    } else if f.values.iter().all(|v| matches!(v, Value::Integer(_) | Value::Float(_))) {
        ColumnKind::Float
    } else if f.values.iter().all(|v| matches!(v, Value::String(_))) {
        ColumnKind::Str
    } else if f.values.iter().all(|v| matches!(v, Value::Boolean(_))) {
        ColumnKind::Bool
    } else {
        ColumnKind::Toml
    }
}

/// A value as the report and the CSV show it: a string without quotes.
pub fn value_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.value().clone(),
        other => other.to_string().trim().to_string(),
    }
}

fn as_f64(v: &Value) -> f64 {
    match v {
        Value::Integer(i) => *i.value() as f64,
        Value::Float(x) => *x.value(),
        _ => f64::NAN,
    }
}

/// The Arrow schema of `sweep`'s table.
pub fn schema(sweep: &Sweep) -> Schema {
    let mut fields = vec![
        ArrowField::new("point", DataType::UInt32, false),
        ArrowField::new("seed", DataType::UInt64, false),
        ArrowField::new("run", DataType::Utf8, false),
        ArrowField::new("series", DataType::Utf8, false),
    ];
    for f in sweep.spec.fields() {
        let t = match column_kind(f) {
            ColumnKind::Int => DataType::Int64,
            ColumnKind::Float => DataType::Float64,
            ColumnKind::Bool => DataType::Boolean,
            ColumnKind::Str | ColumnKind::Toml => DataType::Utf8,
        };
        fields.push(ArrowField::new(f.path.clone(), t, false));
    }
    for name in figures(sweep.kind) {
        fields.push(ArrowField::new(*name, DataType::Float64, true));
    }
    Schema::new(fields)
}

/// The table of `units`: (point, seed, its rows), in unit order.
pub fn batch(sweep: &Sweep, units: &[(usize, u64, Vec<Row>)]) -> Result<RecordBatch> {
    let n: usize = units.iter().map(|(_, _, r)| r.len()).sum();
    let mut point = UInt32Builder::with_capacity(n);
    let mut seed = UInt64Builder::with_capacity(n);
    let mut run = StringBuilder::new();
    let mut series = StringBuilder::new();
    for (p, s, rows) in units {
        for r in rows {
            point.append_value(u32::try_from(*p).context("more points than a u32 holds")?);
            seed.append_value(*s);
            run.append_value(&r.run);
            series.append_value(&r.series);
        }
    }
    let mut cols: Vec<ArrayRef> = vec![
        Arc::new(point.finish()),
        Arc::new(seed.finish()),
        Arc::new(run.finish()),
        Arc::new(series.finish()),
    ];
    // Each swept field's value at each row's point.
    let fields: Vec<(usize, &spec::Field)> = sweep
        .spec
        .axes
        .iter()
        .enumerate()
        .flat_map(|(a, ax)| ax.fields.iter().map(move |f| (a, f)))
        .collect();
    for (a, f) in fields {
        let value_at = |p: usize| &f.values[sweep.spec.coords(p)[a]];
        let each = || units.iter().flat_map(|(p, _, rows)| std::iter::repeat_n(*p, rows.len()));
        let col: ArrayRef = match column_kind(f) {
            ColumnKind::Int => {
                let mut b = Int64Builder::with_capacity(n);
                each().for_each(|p| b.append_value(value_at(p).as_integer().expect("an int column")));
                Arc::new(b.finish())
            }
            ColumnKind::Float => {
                let mut b = Float64Builder::with_capacity(n);
                each().for_each(|p| b.append_value(as_f64(value_at(p))));
                Arc::new(b.finish())
            }
            ColumnKind::Bool => {
                let mut b = BooleanBuilder::with_capacity(n);
                each().for_each(|p| b.append_value(value_at(p).as_bool().expect("a bool column")));
                Arc::new(b.finish())
            }
            ColumnKind::Str | ColumnKind::Toml => {
                let mut b = StringBuilder::new();
                each().for_each(|p| b.append_value(value_text(value_at(p))));
                Arc::new(b.finish())
            }
        };
        cols.push(col);
    }
    for k in 0..figures(sweep.kind).len() {
        let mut b = Float64Builder::with_capacity(n);
        for (_, _, rows) in units {
            for r in rows {
                b.append_option(r.figures[k]);
            }
        }
        cols.push(Arc::new(b.finish()));
    }
    RecordBatch::try_new(Arc::new(schema(sweep)), cols).context("assembling the sweep's table")
}

/// The Parquet bytes of `batch`, the same for the same table.
pub fn parquet_bytes(batch: &RecordBatch) -> Result<Vec<u8>> {
    let props = WriterProperties::builder()
        .set_created_by(format!("dyncore {}", env!("CARGO_PKG_VERSION")))
        .set_max_row_group_size(65_536)
        .build();
    let mut out = Vec::new();
    let mut w =
        ArrowWriter::try_new(&mut out, batch.schema(), Some(props)).context("starting the Parquet file")?;
    w.write(batch).context("writing the Parquet file")?;
    w.close().context("closing the Parquet file")?;
    Ok(out)
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) { format!("\"{}\"", s.replace('"', "\"\"")) } else { s.to_string() }
}

/// The same table as CSV: a header of the column names, one line per row,
/// nulls empty.
pub fn csv(sweep: &Sweep, units: &[(usize, u64, Vec<Row>)]) -> String {
    let mut s = String::new();
    let mut head: Vec<String> = ["point", "seed", "run", "series"].iter().map(|x| x.to_string()).collect();
    head.extend(sweep.spec.fields().map(|f| csv_field(&f.path)));
    head.extend(figures(sweep.kind).iter().map(|x| x.to_string()));
    s += &head.join(",");
    s.push('\n');
    for (p, seed, rows) in units {
        let coords = sweep.spec.coords(*p);
        let swept: Vec<String> = sweep
            .spec
            .axes
            .iter()
            .zip(&coords)
            .flat_map(|(a, &c)| a.fields.iter().map(move |f| csv_field(&value_text(&f.values[c]))))
            .collect();
        for r in rows {
            let mut line = vec![p.to_string(), seed.to_string(), csv_field(&r.run), csv_field(&r.series)];
            line.extend(swept.iter().cloned());
            line.extend(r.figures.iter().map(|f| f.map(|x| x.to_string()).unwrap_or_default()));
            s += &line.join(",");
            s.push('\n');
        }
    }
    s
}
