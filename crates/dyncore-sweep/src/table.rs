//! The sweep's table: one row per point × seed × run × series, a column per
//! swept field and per figure, written as Parquet (with the `parquet`
//! crate's own column writers, no Arrow) and as CSV beside it.
//!
//! Columns, in this order: `point` (INT32 as UINT_32), `seed` (INT64 as
//! UINT_64), `run`, `series` (BYTE_ARRAY as String), then each swept field
//! under its path (whole numbers as INT64, other numbers as DOUBLE, strings
//! as String, booleans as BOOLEAN; a list or table value as its TOML
//! text), all required; then each figure (DOUBLE, optional: null where it
//! does not apply). pandas, pyarrow and polars read them as uint32, uint64,
//! string, int64, float64 and bool.
//!
//! **Invariants:** the same rows give the same bytes: the rows come in unit
//! order, the Parquet writer's properties are fixed (no compression, one
//! row group per 65 536 rows, a fixed `created_by`), the CSV prints floats
//! as Rust's shortest round-tripping decimal. Every engine (the command,
//! the Python package's local and Dask engines) writes its table through
//! [`parquet_bytes`], so their bytes are the same by construction.

use std::sync::Arc;

use anyhow::{Context, Result};
use parquet::basic::{Compression, LogicalType, Repetition, Type as Physical};
use parquet::data_type::{BoolType, ByteArray, ByteArrayType, DataType, DoubleType, Int32Type, Int64Type};
use parquet::file::properties::WriterProperties;
use parquet::file::writer::{SerializedFileWriter, SerializedRowGroupWriter};
use parquet::schema::types::{Type, TypePtr};
use toml_edit::Value;

use super::exec::{Row, figures};
use super::{Sweep, spec};

/// The most rows in one Parquet row group.
pub const ROW_GROUP: usize = 65_536;

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

/// One column of the schema: `name`, stored as `physical`, read as
/// `logical`, required unless `optional`.
fn column(name: &str, physical: Physical, logical: Option<LogicalType>, optional: bool) -> Result<TypePtr> {
    let repetition = if optional { Repetition::OPTIONAL } else { Repetition::REQUIRED };
    let t = Type::primitive_type_builder(name, physical)
        .with_repetition(repetition)
        .with_logical_type(logical)
        .build()
        .with_context(|| format!("the Parquet type of column `{name}`"))?;
    Ok(Arc::new(t))
}

/// The Parquet schema of `sweep`'s table (see the module's doc).
pub fn parquet_schema(sweep: &Sweep) -> Result<Type> {
    let unsigned = |bit_width| Some(LogicalType::Integer { bit_width, is_signed: false });
    let mut cols = vec![
        column("point", Physical::INT32, unsigned(32), false)?,
        column("seed", Physical::INT64, unsigned(64), false)?,
        column("run", Physical::BYTE_ARRAY, Some(LogicalType::String), false)?,
        column("series", Physical::BYTE_ARRAY, Some(LogicalType::String), false)?,
    ];
    for f in sweep.spec.fields() {
        let (physical, logical) = match column_kind(f) {
            ColumnKind::Int => (Physical::INT64, None),
            ColumnKind::Float => (Physical::DOUBLE, None),
            ColumnKind::Bool => (Physical::BOOLEAN, None),
            ColumnKind::Str | ColumnKind::Toml => (Physical::BYTE_ARRAY, Some(LogicalType::String)),
        };
        cols.push(column(&f.path, physical, logical, false)?);
    }
    for name in figures(sweep.kind) {
        cols.push(column(name, Physical::DOUBLE, None, true)?);
    }
    Type::group_type_builder("schema").with_fields(cols).build().context("the table's Parquet schema")
}

/// The Parquet bytes of the table of `units` ((point, seed, its rows), in
/// unit order): the same bytes for the same rows.
pub fn parquet_bytes(sweep: &Sweep, units: &[(usize, u64, Vec<Row>)]) -> Result<Vec<u8>> {
    let schema = Arc::new(parquet_schema(sweep)?);
    let props = WriterProperties::builder()
        .set_created_by(format!("dyncore {}", env!("CARGO_PKG_VERSION")))
        .set_compression(Compression::UNCOMPRESSED)
        .set_max_row_group_size(ROW_GROUP)
        .build();
    let mut rows: Vec<(usize, u64, &Row)> = Vec::new();
    for (p, seed, unit) in units {
        u32::try_from(*p).context("more points than a u32 holds")?;
        rows.extend(unit.iter().map(|r| (*p, *seed, r)));
    }
    let mut out = Vec::new();
    let mut w =
        SerializedFileWriter::new(&mut out, schema, Arc::new(props)).context("starting the Parquet file")?;
    for group in rows.chunks(ROW_GROUP) {
        let mut rg = w.next_row_group().context("starting a row group")?;
        write_group(sweep, group, &mut rg).context("writing the Parquet file")?;
        rg.close().context("closing a row group")?;
    }
    w.close().context("closing the Parquet file")?;
    Ok(out)
}

/// Writes the next column of `rg`: `values` (the non-null ones), with
/// `defined` (1 a value, 0 a null) for an optional column.
fn put<T: DataType>(
    rg: &mut SerializedRowGroupWriter<'_, &mut Vec<u8>>,
    values: &[T::T],
    defined: Option<&[i16]>,
) -> Result<()> {
    let mut c = rg.next_column()?.context("a column the schema does not have")?;
    c.typed::<T>().write_batch(values, defined, None)?;
    c.close()?;
    Ok(())
}

/// One row group: `rows` (point, seed, row), every column in schema order.
fn write_group(
    sweep: &Sweep,
    rows: &[(usize, u64, &Row)],
    rg: &mut SerializedRowGroupWriter<'_, &mut Vec<u8>>,
) -> Result<()> {
    // Checked to fit in a u32 above; stored as INT32 bits, read as UINT_32.
    put::<Int32Type>(rg, &rows.iter().map(|(p, _, _)| *p as u32 as i32).collect::<Vec<_>>(), None)?;
    put::<Int64Type>(rg, &rows.iter().map(|(_, s, _)| *s as i64).collect::<Vec<_>>(), None)?;
    let text =
        |f: &dyn Fn(&Row) -> &str| rows.iter().map(|(_, _, r)| ByteArray::from(f(r))).collect::<Vec<_>>();
    put::<ByteArrayType>(rg, &text(&|r| &r.run), None)?;
    put::<ByteArrayType>(rg, &text(&|r| &r.series), None)?;
    // Each swept field's value at each row's point.
    for (a, ax) in sweep.spec.axes.iter().enumerate() {
        for f in &ax.fields {
            let at = |p: usize| &f.values[sweep.spec.coords(p)[a]];
            let each = || rows.iter().map(|(p, _, _)| at(*p));
            match column_kind(f) {
                ColumnKind::Int => {
                    let v: Vec<i64> = each().map(|v| v.as_integer().expect("an int column")).collect();
                    put::<Int64Type>(rg, &v, None)?
                }
                ColumnKind::Float => put::<DoubleType>(rg, &each().map(as_f64).collect::<Vec<_>>(), None)?,
                ColumnKind::Bool => {
                    let v: Vec<bool> = each().map(|v| v.as_bool().expect("a bool column")).collect();
                    put::<BoolType>(rg, &v, None)?
                }
                ColumnKind::Str | ColumnKind::Toml => {
                    let v: Vec<ByteArray> =
                        each().map(|v| ByteArray::from(value_text(v).into_bytes())).collect();
                    put::<ByteArrayType>(rg, &v, None)?
                }
            }
        }
    }
    for k in 0..figures(sweep.kind).len() {
        let values: Vec<f64> = rows.iter().filter_map(|(_, _, r)| r.figures[k]).collect();
        let defined: Vec<i16> = rows.iter().map(|(_, _, r)| i16::from(r.figures[k].is_some())).collect();
        put::<DoubleType>(rg, &values, Some(&defined))?;
    }
    anyhow::ensure!(rg.next_column()?.is_none(), "a column of the schema left unwritten");
    Ok(())
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

#[cfg(test)]
pub(crate) mod tests {
    use parquet::basic::{ConvertedType, LogicalType, Type as Physical};
    use parquet::file::reader::FileReader;
    use parquet::file::serialized_reader::SerializedFileReader;
    use parquet::record::{Field as Cell, RowAccessor};
    use std::io::{Seek, Write};
    use std::path::Path;

    use super::*;
    use crate::exec::NET_FIGURES;

    /// A sweep of the network-stack model: 2 points, seeds 7 and 8.
    pub(crate) fn small() -> Sweep {
        let base = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/newtos/governors.toml");
        let text = format!(
            "base = \"{}\"\nruns = [\"menu 1600/600\"]\nseed = 7\nseeds = 2\n[grid]\n\"run.*.cpu.0.mhz\" = [1600, 800]\n",
            base.display()
        );
        Sweep::parse(Path::new("small.toml"), &text, &dyncore_core::policies::Registry::builtin()).unwrap()
    }

    /// `small()` with a column of every kind, on one axis of two values.
    fn every_kind() -> Sweep {
        let mut s = small();
        let template = s.spec.axes[0].fields[0].clone();
        let field = |path: &str, values: &str| {
            let doc: toml_edit::DocumentMut = format!("v = {values}").parse().unwrap();
            let values: Vec<Value> = doc["v"].as_array().unwrap().iter().cloned().collect();
            spec::Field { path: path.into(), at: vec![None; values.len()], values, ..template.clone() }
        };
        s.spec.axes[0].fields = vec![
            field("int", "[1, -2]"),
            field("float", "[1, 2.5]"),
            field("str", "[\"a\", \"b,\\\"c\"]"),
            field("bool", "[true, false]"),
            field("toml", "[[1, 2], { a = 1 }]"),
        ];
        s
    }

    fn read(bytes: &[u8]) -> SerializedFileReader<std::fs::File> {
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(bytes).unwrap();
        f.rewind().unwrap();
        SerializedFileReader::new(f).unwrap()
    }

    fn row(run: &str, figures: Vec<Option<f64>>) -> Row {
        Row { run: run.into(), series: "stack".into(), figures }
    }

    #[test]
    fn the_parquet_table_has_the_columns_types_and_rows() {
        let s = every_kind();
        let f = |x: f64| vec![Some(x), None, Some(-0.5), None, Some(1e300), Some(0.0)];
        let units =
            vec![(0, 7, vec![row("r", f(1.0)), row("q", f(2.0))]), (1, u64::MAX, vec![row("r", f(3.0))])];
        let bytes = parquet_bytes(&s, &units).unwrap();
        assert_eq!(bytes, parquet_bytes(&s, &units).unwrap(), "the same rows, the same bytes");
        let r = read(&bytes);
        let meta = r.metadata().file_metadata();
        assert_eq!(meta.created_by(), Some(format!("dyncore {}", env!("CARGO_PKG_VERSION")).as_str()));
        let cols = meta.schema_descr().columns().to_vec();
        let names: Vec<&str> = cols.iter().map(|c| c.name()).collect();
        assert_eq!(names[..9], ["point", "seed", "run", "series", "int", "float", "str", "bool", "toml"]);
        assert_eq!(&names[9..], NET_FIGURES);
        let kinds: Vec<(Physical, ConvertedType)> =
            cols.iter().map(|c| (c.physical_type(), c.converted_type())).collect();
        assert_eq!(kinds[0], (Physical::INT32, ConvertedType::UINT_32));
        assert_eq!(kinds[1], (Physical::INT64, ConvertedType::UINT_64));
        assert_eq!(cols[2].logical_type_ref(), Some(&LogicalType::String));
        assert_eq!(kinds[2..9].iter().map(|k| k.0).collect::<Vec<_>>(), {
            use Physical::*;
            [BYTE_ARRAY, BYTE_ARRAY, INT64, DOUBLE, BYTE_ARRAY, BOOLEAN, BYTE_ARRAY]
        });
        assert!(cols[..9].iter().all(|c| !c.self_type().is_optional()));
        assert!(
            cols[9..].iter().all(|c| c.self_type().is_optional() && c.physical_type() == Physical::DOUBLE)
        );
        let rows: Vec<_> = r.get_row_iter(None).unwrap().map(Result::unwrap).collect();
        assert_eq!(rows.len(), 3);
        let last = &rows[2];
        assert_eq!((last.get_uint(0).unwrap(), last.get_ulong(1).unwrap()), (1, u64::MAX));
        assert_eq!(last.get_string(2).unwrap(), "r");
        assert_eq!(last.get_long(4).unwrap(), -2);
        assert_eq!(last.get_double(5).unwrap(), 2.5);
        assert_eq!(last.get_string(6).unwrap(), "b,\"c");
        assert!(!last.get_bool(7).unwrap());
        assert_eq!(last.get_string(8).unwrap(), "{ a = 1 }");
        assert_eq!(rows[1].get_string(8).unwrap(), "[1, 2]");
        assert_eq!(rows[1].get_double(9).unwrap(), 2.0);
        let cells: Vec<&Cell> = last.get_column_iter().map(|(_, c)| c).collect();
        assert_eq!(cells[10], &Cell::Null);
        assert_eq!(last.get_double(13).unwrap(), 1e300);
    }

    #[test]
    fn a_row_group_holds_at_most_65536_rows() {
        let s = small();
        let many: Vec<Row> = (0..ROW_GROUP + 1).map(|i| row(&i.to_string(), vec![Some(1.0); 6])).collect();
        let bytes = parquet_bytes(&s, &[(0, 7, many)]).unwrap();
        let r = read(&bytes);
        let groups: Vec<i64> = r.metadata().row_groups().iter().map(|g| g.num_rows()).collect();
        assert_eq!(groups, [ROW_GROUP as i64, 1]);
    }
}
