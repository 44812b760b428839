//! Field paths into a scenario document: `run.*.workload.*.tax`,
//! `run.0.cpu.0.mhz`, `net.governor`. A segment is a key, an index into a
//! list (`0`), or `*`: every element of a list (or every entry of a table).
//!
//! **What a path sets.** Every segment but the last must exist in the base
//! (a `*` must match at least one element). The last key is set in every
//! table the path reaches that has it; if none has it, it is added to every
//! one (a field the base leaves at its default, such as `cpus_per_node`),
//! and the scenario's own validation judges it like any field it reads.
//! So `run.*.workload.*.tax` changes the programs that have a tax and
//! leaves the others alone.

use toml_edit::{DocumentMut, Item, TableLike, Value};

/// One segment of a field path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seg {
    Key(String),
    Index(usize),
    Any,
}

/// `a.*.b.0.c` as segments; the last must be a key.
pub fn parse_path(path: &str) -> Result<Vec<Seg>, String> {
    let segs: Vec<Seg> = path
        .split('.')
        .map(|s| match s {
            "*" => Seg::Any,
            _ => match s.parse::<usize>() {
                Ok(i) => Seg::Index(i),
                Err(_) => Seg::Key(s.to_string()),
            },
        })
        .collect();
    let bad = segs.iter().zip(path.split('.')).find(|(_, s)| s.is_empty() || s.contains(char::is_whitespace));
    if bad.is_some() || path.is_empty() {
        return Err(format!(
            "expected a field path such as \"run.*.workload.*.tax\" (keys, list indices or `*`, joined by dots); found \"{path}\""
        ));
    }
    if !matches!(segs.last(), Some(Seg::Key(_))) {
        return Err(format!("a field path ends with a field's name, not an index or `*`; found \"{path}\""));
    }
    Ok(segs)
}

/// Whether `field` (a validation error's dotted path, `run[0].workload[1].tax`)
/// is one that `segs` reaches.
pub fn matches(segs: &[Seg], field: &str) -> bool {
    let parts: Vec<String> = field
        .replace('[', ".")
        .replace(']', "")
        .split('.')
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect();
    parts.len() == segs.len()
        && segs.iter().zip(&parts).all(|(s, p)| match s {
            Seg::Any => true,
            Seg::Index(i) => p.parse::<usize>().ok() == Some(*i),
            Seg::Key(k) => k == p,
        })
}

/// What a node of the document is, in a path error.
fn describe(item: &Item) -> String {
    match item {
        Item::Table(t) => format!("a table with {}", keys(t.iter().map(|(k, _)| k))),
        Item::Value(Value::InlineTable(t)) => format!("a table with {}", keys(t.iter().map(|(k, _)| k))),
        Item::ArrayOfTables(a) => format!("a list of {} tables", a.len()),
        Item::Value(Value::Array(a)) => format!("a list of {} values", a.len()),
        Item::Value(_) => "a value".into(),
        Item::None => "nothing".into(),
    }
}

fn keys<'a>(it: impl Iterator<Item = &'a str>) -> String {
    let v: Vec<String> = it.map(|k| format!("`{k}`")).collect();
    if v.is_empty() { "no fields".into() } else { v.join(", ") }
}

/// The tables `segs` (the path without its last key) reaches from `item`,
/// in document order.
fn into<'a>(
    item: &'a mut Item,
    segs: &[Seg],
    at: &str,
    out: &mut Vec<&'a mut dyn TableLike>,
) -> Result<(), String> {
    let shown = describe(item);
    let Some((first, rest)) = segs.split_first() else {
        return match item.as_table_like_mut() {
            Some(t) => {
                out.push(t);
                Ok(())
            }
            None => Err(format!("{} is {shown}, not a table of fields", show(at))),
        };
    };
    match (first, item) {
        (Seg::Key(_), item) => match item.as_table_like_mut() {
            Some(t) => walk(t, segs, at, out),
            None => Err(format!("{} is {shown}; it has no fields", show(at))),
        },
        (Seg::Index(i), Item::ArrayOfTables(a)) => {
            let n = a.len();
            let t = a.get_mut(*i).ok_or_else(|| format!("{} has {n} entries; no index {i}", show(at)))?;
            walk(t, rest, &format!("{at}[{i}]"), out)
        }
        (Seg::Any, Item::ArrayOfTables(a)) => {
            if a.is_empty() {
                return Err(format!("`*` matches nothing: {} is empty", show(at)));
            }
            for (i, t) in a.iter_mut().enumerate() {
                walk(t, rest, &format!("{at}[{i}]"), out)?;
            }
            Ok(())
        }
        (Seg::Index(_) | Seg::Any, Item::Value(Value::Array(a))) => {
            let n = a.len();
            let picked: Vec<(usize, &mut Value)> = match first {
                Seg::Index(i) => a.iter_mut().enumerate().filter(|(k, _)| k == i).collect(),
                _ => a.iter_mut().enumerate().collect(),
            };
            if picked.is_empty() {
                return Err(format!("{} has {n} entries; `{}` matches none", show(at), seg_text(first)));
            }
            for (i, v) in picked {
                let here = format!("{at}[{i}]");
                match v.as_inline_table_mut() {
                    Some(t) => walk(t, rest, &here, out)?,
                    None => return Err(format!("`{here}` is a value, not a table of fields")),
                }
            }
            Ok(())
        }
        (s, _) => Err(format!("{} is {shown}; `{}` does not apply", show(at), seg_text(s))),
    }
}

fn walk<'a>(
    t: &'a mut dyn TableLike,
    segs: &[Seg],
    at: &str,
    out: &mut Vec<&'a mut dyn TableLike>,
) -> Result<(), String> {
    let Some((first, rest)) = segs.split_first() else {
        out.push(t);
        return Ok(());
    };
    let here = |k: &str| if at.is_empty() { k.to_string() } else { format!("{at}.{k}") };
    match first {
        Seg::Key(k) => {
            let shown = keys(t.iter().map(|(k, _)| k));
            match t.get_mut(k) {
                Some(c) => into(c, rest, &here(k), out),
                None => Err(format!("no field `{k}` in {} (it has {shown})", show(at))),
            }
        }
        Seg::Any => {
            for (k, v) in t.iter_mut() {
                let p = here(k.get());
                into(v, rest, &p, out)?;
            }
            Ok(())
        }
        Seg::Index(i) => Err(format!("{} is a table; index {i} needs a list", show(at))),
    }
}

fn show(at: &str) -> String {
    if at.is_empty() { "the top".into() } else { format!("`{at}`") }
}

fn seg_text(s: &Seg) -> String {
    match s {
        Seg::Key(k) => k.clone(),
        Seg::Index(i) => i.to_string(),
        Seg::Any => "*".into(),
    }
}

/// Sets the field `segs` (see the module doc) to `value` in `doc`; returns
/// how many places it set, or why the path does not exist in the base.
pub fn set(doc: &mut DocumentMut, segs: &[Seg], value: &Value) -> Result<usize, String> {
    let (last, walk_segs) = segs.split_last().expect("a parsed path has a segment");
    let Seg::Key(key) = last else { unreachable!("parse_path ends every path with a key") };
    let mut targets = Vec::new();
    walk(doc.as_table_mut(), walk_segs, "", &mut targets)?;
    let any = targets.iter().any(|t| t.contains_key(key));
    let mut n = 0;
    for t in targets {
        if any && !t.contains_key(key) {
            continue;
        }
        t.insert(key, Item::Value(value.clone()));
        n += 1;
    }
    if n == 0 {
        return Err("the path reaches no table".into());
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = "name = \"x\"\n[[run]]\nlabel = \"a\"\n[[run.workload]]\nprogram = \"p\"\n[[run.workload]]\n\
                        program = \"q\"\ntax = 1.0\n[[run]]\nlabel = \"b\"\n[[run.workload]]\nprogram = \"q\"\ntax = 2.0\n\
                        [net]\ngovernor = \"menu\"\n";

    fn doc() -> DocumentMut {
        BASE.parse().unwrap()
    }

    #[test]
    fn a_wildcard_sets_the_field_where_it_exists_and_leaves_the_rest() {
        let mut d = doc();
        let n = set(&mut d, &parse_path("run.*.workload.*.tax").unwrap(), &Value::from(5.0)).unwrap();
        assert_eq!(n, 2, "the two programs with a tax");
        let text = d.to_string();
        assert_eq!(text.matches("tax = 5.0").count(), 2, "{text}");
        assert!(!text.contains("tax = 1.0") && !text.contains("tax = 2.0"));
    }

    #[test]
    fn a_field_the_base_leaves_out_is_added_everywhere_the_path_reaches() {
        let mut d = doc();
        assert_eq!(set(&mut d, &parse_path("run.*.nodes").unwrap(), &Value::from(3)).unwrap(), 2);
        assert_eq!(d.to_string().matches("nodes = 3").count(), 2);
        assert_eq!(set(&mut d, &parse_path("run.1.label").unwrap(), &Value::from("z")).unwrap(), 1);
        assert_eq!(set(&mut d, &parse_path("net.governor").unwrap(), &Value::from("always-c6")).unwrap(), 1);
    }

    #[test]
    fn a_path_that_is_not_in_the_base_says_what_is_there() {
        let e = set(&mut doc(), &parse_path("run.*.worklod.*.tax").unwrap(), &Value::from(1)).unwrap_err();
        assert!(e.contains("no field `worklod` in `[0]`") || e.contains("worklod"), "{e}");
        assert!(e.contains("`label`") && e.contains("`workload`"), "{e}");
        let e = set(&mut doc(), &parse_path("run.5.label").unwrap(), &Value::from(1)).unwrap_err();
        assert!(e.contains("2 entries; no index 5"), "{e}");
        assert!(parse_path("run.*").is_err() && parse_path("run..x").is_err() && parse_path("").is_err());
    }

    #[test]
    fn an_error_field_is_matched_to_its_path() {
        let s = parse_path("run.*.workload.*.tax").unwrap();
        assert!(matches(&s, "run[1].workload[0].tax"));
        assert!(!matches(&s, "run[1].workload[0].program"));
        assert!(!matches(&s, "run[1].tax"));
    }
}
