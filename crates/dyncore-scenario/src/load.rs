//! Finding, reading and validating scenario files, with errors that name the
//! file, the line and column, and the field by its full path
//! (`run[0].workload[1].tax`), in words that say what the field accepts
//! rather than serde's (`expected u32`, `untagged enum TaxSpec`).

use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};

use crate::Scenario;
use crate::scenario::dotted_path;
use crate::scenario::limits::accepted;
use dyncore_core::policies::Registry;
use toml_edit::{ImDocument, Item, Table, Value};

mod read;
pub use read::read_text;

/// The shipped scenarios: `./scenarios` when run from the repository, else
/// the folder next to this crate's sources, as a path relative to where the
/// command runs (so reports and errors show `../../scenarios/fig3.toml`, not
/// the build machine's absolute path).
pub fn default_dir() -> PathBuf {
    let here = PathBuf::from("scenarios");
    if here.is_dir() {
        return here;
    }
    let shipped = lexical(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios"));
    std::env::current_dir().map_or(shipped.clone(), |cwd| relative_to(&shipped, &lexical(&cwd)))
}

/// `path` with `.` and `..` resolved by name (no file system access).
fn lexical(path: &Path) -> PathBuf {
    use std::path::Component;
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir if matches!(out.components().next_back(), Some(Component::Normal(_))) => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

/// The absolute `path` as seen from the absolute folder `from`.
fn relative_to(path: &Path, from: &Path) -> PathBuf {
    let (a, b): (Vec<_>, Vec<_>) = (path.components().collect(), from.components().collect());
    let common = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    if common <= 1 {
        return path.to_path_buf(); // only the root in common: absolute reads better
    }
    let mut out: PathBuf = b[common..].iter().map(|_| "..").collect();
    out.extend(&a[common..]);
    if out.as_os_str().is_empty() { PathBuf::from(".") } else { out }
}

/// Scenario files named by `args` (files, or folders whose `*.toml` are taken
/// in name order); the shipped scenarios if `args` is empty. Anything that
/// exists and is not a folder is taken as a file: reading it says what is
/// wrong with it (a device, a FIFO with no writer, ...).
pub fn discover(args: &[PathBuf]) -> Result<Vec<PathBuf>, LoadError> {
    let dirs: Vec<PathBuf> = if args.is_empty() { vec![default_dir()] } else { args.to_vec() };
    let mut out = Vec::new();
    for p in dirs {
        if p.is_dir() {
            let rd = std::fs::read_dir(&p)
                .map_err(|e| LoadError::new(&p, format!("cannot list the folder: {e}")))?;
            let mut files: Vec<PathBuf> = rd
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|f| f.extension().is_some_and(|x| x == "toml"))
                .collect();
            files.sort();
            if files.is_empty() {
                return Err(LoadError::new(&p, "no *.toml scenarios in this folder"));
            }
            out.extend(files);
        } else if std::fs::symlink_metadata(&p).is_ok() {
            out.push(p);
        } else {
            return Err(LoadError::new(&p, "no such file or folder"));
        }
    }
    Ok(out)
}

/// A scenario that could not be loaded. Displays as
/// `file:line:col: field: message`, like a compiler.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadError {
    pub file: PathBuf,
    /// 1-based line and column.
    pub at: Option<(usize, usize)>,
    /// Dotted path of the field, e.g. `run[2].workload[0].program`.
    pub field: Option<String>,
    pub message: String,
}

impl LoadError {
    /// An error about the file as a whole.
    pub fn new(file: &Path, message: impl Into<String>) -> Self {
        LoadError { file: file.to_path_buf(), at: None, field: None, message: message.into() }
    }
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if let Some((l, c)) = self.at {
            write!(f, ":{l}:{c}")?;
        }
        if let Some(field) = &self.field {
            write!(f, ": {field}")?;
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for LoadError {}

/// Reads, parses and validates one scenario file (its policies from the
/// built-in ones).
pub fn load(path: &Path) -> Result<Scenario, LoadError> {
    load_with(path, &Registry::builtin())
}

/// [`load`], its runs' policies from `registry`.
pub fn load_with(path: &Path, registry: &Registry) -> Result<Scenario, LoadError> {
    let text = read_text(path)?;
    parse_with(path, &text, registry)
}

/// Parses and validates scenario text (`path` names the file in errors, and
/// the folder machine profiles are read from).
pub fn parse(path: &Path, text: &str) -> Result<Scenario, LoadError> {
    parse_with(path, text, &Registry::builtin())
}

/// [`parse`], its runs' policies from `registry`.
pub fn parse_with(path: &Path, text: &str, registry: &Registry) -> Result<Scenario, LoadError> {
    let mut scenario = Scenario::from_toml(text).map_err(|e| syntax_error(path, text, &e))?;
    scenario.registry = registry.clone();
    scenario
        .load_profiles(path)
        .and_then(|()| scenario.validate())
        .map_err(|e| error_in(path, text, &e.path, e.message))?;
    Ok(scenario)
}

/// An error about the field at `path` of `text`, located at its value (or
/// the innermost table of the path that the file has).
pub fn error_in(file: &Path, text: &str, path: &[String], message: String) -> LoadError {
    LoadError {
        file: file.to_path_buf(),
        at: span_of_path(text, path).map(|(s, _)| line_col(text, s.start)),
        field: (!path.is_empty()).then(|| dotted_path(path)),
        message,
    }
}

/// A TOML or serde error: located by its span, with the full path of the
/// field there, and serde's wording replaced by what the field accepts.
pub fn syntax_error(file: &Path, text: &str, e: &toml::de::Error) -> LoadError {
    syntax_error_with(file, text, e, &accepted)
}

/// [`syntax_error`] for a file of another schema (the network-stack
/// scenarios), with its own table of what each field accepts. A field the
/// table does not know gets serde's words translated into ours
/// ([`plain_type_error`]).
pub fn syntax_error_with(
    file: &Path,
    text: &str,
    e: &toml::de::Error,
    accepted: &dyn Fn(&[String]) -> Option<String>,
) -> LoadError {
    let span = e.span();
    let doc = ImDocument::parse(text).ok();
    let path = span.clone().and_then(|s| match &doc {
        Some(doc) => path_in_document(doc.as_table(), s.start),
        None => path_of_key_on_line(text, s.start),
    });
    // When the text parses, serde's span is exactly the value; a syntax
    // error's span is where parsing stopped, so take the whole right-hand side.
    let found =
        span.and_then(|s| if doc.is_some() { short(text.get(s)?) } else { value_on_line(text, s.start) });
    let mut message = e.message().trim().lines().map(str::trim).collect::<Vec<_>>().join("; ");
    let mut path = path;
    // serde names the table a required field is missing from: name the field.
    if let Some(missing) = message.strip_prefix("missing field `").and_then(|m| m.strip_suffix('`')) {
        // The span is the table's; the top level has no table span.
        let table = doc.as_ref().zip(e.span()).and_then(|(d, span)| table_with_span(d.as_table(), &span));
        let mut full = table.unwrap_or_default();
        full.push(missing.to_string());
        message = match accepted(&full) {
            Some(what) => format!("missing; expected {what}"),
            None => "missing".into(),
        };
        path = Some(full);
    } else if is_serde_type_error(&message) {
        let what = path.as_deref().and_then(accepted).or_else(|| plain_type_error(&message));
        if let Some(what) = what {
            message = match found {
                Some(found) => format!("expected {what}; found {found}"),
                None => format!("expected {what}"),
            };
        }
    }
    LoadError {
        file: file.to_path_buf(),
        at: e.span().map(|s| line_col(text, s.start)),
        field: path.filter(|p| !p.is_empty()).map(|p| dotted_path(&p)),
        message,
    }
}

/// serde's and toml's messages about a value of the wrong type or size,
/// which name Rust types (`u32`, `untagged enum TaxSpec`) rather than what
/// the field accepts. Unknown and missing fields keep their own (good)
/// messages.
fn is_serde_type_error(message: &str) -> bool {
    [
        "invalid type",
        "invalid value",
        "unknown variant",
        "data did not match",
        "number too large",
        "invalid length",
        "wanted ",
    ]
    .iter()
    .any(|p| message.starts_with(p))
}

/// What a field accepts, read from serde's message about it when no table
/// says: its Rust type put in words (`u32` → a whole number from 0 to
/// 4294967295), or its list of variants. `None` if the message names
/// nothing we can say better.
pub fn plain_type_error(message: &str) -> Option<String> {
    if let Some(list) = message.split_once("expected one of ").map(|(_, l)| l) {
        let names: Vec<String> =
            list.split(", ").map(|v| format!("\"{}\"", v.trim().trim_matches('`'))).collect();
        return Some(match names.as_slice() {
            [one] => one.clone(),
            [rest @ .., last] => format!("one of {} or {last}", rest.join(", ")),
            [] => return None,
        });
    }
    let expected = message.rsplit_once("expected ").map(|(_, e)| e.trim().trim_end_matches('.'));
    let whole = |max: u128| format!("a whole number from 0 to {max}");
    let signed = |lo: i128, hi: i128| format!("a whole number from {lo} to {hi}");
    let words = match expected {
        Some("u8") => whole(u8::MAX.into()),
        Some("u16") => whole(u16::MAX.into()),
        Some("u32") => whole(u32::MAX.into()),
        Some("u64" | "usize") => whole(u64::MAX.into()),
        Some("i8") => signed(i8::MIN.into(), i8::MAX.into()),
        Some("i16") => signed(i16::MIN.into(), i16::MAX.into()),
        Some("i32") => signed(i32::MIN.into(), i32::MAX.into()),
        Some("i64" | "isize") => signed(i64::MIN.into(), i64::MAX.into()),
        Some("f32" | "f64") => "a number".into(),
        Some("a boolean") => "true or false".into(),
        Some("a string") => "a string".into(),
        Some(e) if e.starts_with("a sequence") || e.starts_with("an array") => "a list".into(),
        Some(e) if e.starts_with("struct ") || e.starts_with("a map") || e.starts_with("a table") => {
            "a table".into()
        }
        // serde's enum from a table: the field takes one of its names.
        _ if message.starts_with("wanted exactly 1 element") => "a name (a string), not a table".into(),
        _ if message.starts_with("number too large") => {
            "a smaller number (this one does not fit the field)".into()
        }
        _ if message.starts_with("data did not match") || message.contains("string or table") => {
            "a string or a table".into()
        }
        _ => return None,
    };
    Some(words)
}

/// The right-hand side of the `key = value` line holding `offset`, without
/// a trailing comment.
fn value_on_line(text: &str, offset: usize) -> Option<String> {
    let line_start = text[..offset.min(text.len())].rfind('\n').map_or(0, |i| i + 1);
    let (_, value) = text[line_start..].lines().next()?.split_once('=')?;
    let mut value = value.trim();
    if !value.starts_with(['"', '\'']) {
        value = value.split('#').next().unwrap_or(value).trim();
    }
    short(value)
}

/// `value` cut to 60 characters for a message (`None` if empty).
fn short(value: &str) -> Option<String> {
    let value = value.trim();
    if value.is_empty() {
        return None;
    }
    let mut s: String = value.chars().take(60).collect();
    if s.len() < value.len() {
        s.push('…');
    }
    Some(s)
}

/// 1-based (line, column) of byte `offset` (column in characters).
pub fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, col)
}

/// The path of the field written at byte `offset` (its key or its value),
/// or of the innermost table whose header is there.
fn path_in_document(root: &Table, offset: usize) -> Option<Vec<String>> {
    let mut path = Vec::new();
    find_in_table(root, offset, &mut path).then_some(path)
}

/// For a text that does not parse: the path of the key on the line holding
/// `offset`, found by parsing the text before that line plus a probe key in
/// its place (a probe, not the key itself, so that a duplicate key is found
/// too).
fn path_of_key_on_line(text: &str, offset: usize) -> Option<Vec<String>> {
    const PROBE: &str = "dyncore-probe-key";
    let line_start = text[..offset.min(text.len())].rfind('\n').map_or(0, |i| i + 1);
    let line = text[line_start..].lines().next()?;
    let (key, _) = line.split_once('=')?;
    let indent = key.len() - key.trim_start().len();
    let key = key.trim();
    if key.is_empty() || !key.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.')) {
        return None;
    }
    let (parents, last) = key.rsplit_once('.').map_or(("", key), |(p, l)| (p, l));
    let probe_key = if parents.is_empty() { PROBE.to_string() } else { format!("{parents}.{PROBE}") };
    let probe = format!("{}{probe_key} = 0\n", &text[..line_start]);
    let doc = ImDocument::parse(probe.as_str()).ok()?;
    let mut path = path_in_document(doc.as_table(), line_start + indent + probe_key.len() - PROBE.len())?;
    *path.last_mut()? = last.to_string();
    Some(path)
}

/// The path of the table (standard, array entry or inline) spanning exactly `span`.
fn table_with_span(t: &Table, span: &Range<usize>) -> Option<Vec<String>> {
    for (k, item) in t.iter() {
        let found = match item {
            Item::Table(sub) if sub.span().as_ref() == Some(span) => Some(vec![]),
            Item::Table(sub) => table_with_span(sub, span),
            Item::ArrayOfTables(a) => a.iter().enumerate().find_map(|(i, sub)| {
                let mut p = if sub.span().as_ref() == Some(span) {
                    Some(vec![])
                } else {
                    table_with_span(sub, span)
                }?;
                p.insert(0, i.to_string());
                Some(p)
            }),
            Item::Value(Value::InlineTable(it)) if it.span().as_ref() == Some(span) => Some(vec![]),
            Item::Value(Value::Array(a)) => a
                .iter()
                .position(|v| v.is_inline_table() && v.span().as_ref() == Some(span))
                .map(|i| vec![i.to_string()]),
            _ => None,
        };
        if let Some(mut p) = found {
            p.insert(0, k.to_string());
            return Some(p);
        }
    }
    None
}

fn contains(span: Option<Range<usize>>, offset: usize) -> bool {
    span.is_some_and(|s| s.contains(&offset))
}

/// Depth-first: a key or value inside `t` that covers `offset`; `path`
/// holds the path to it on success.
fn find_in_table(t: &Table, offset: usize, path: &mut Vec<String>) -> bool {
    for (k, item) in t.iter() {
        path.push(k.to_string());
        let key_span = t.get_key_value(k).and_then(|(key, _)| key.span());
        if contains(key_span, offset) || find_in_item(item, offset, path) {
            return true;
        }
        path.pop();
    }
    false
}

fn find_in_item(item: &Item, offset: usize, path: &mut Vec<String>) -> bool {
    match item {
        Item::Value(v) => find_in_value(v, offset, path),
        // A table's span is its header and its own keys: the table itself
        // when no key inside it matches.
        Item::Table(t) => find_in_table(t, offset, path) || contains(t.span(), offset),
        Item::ArrayOfTables(a) => a.iter().enumerate().any(|(i, t)| {
            path.push(i.to_string());
            let found = find_in_table(t, offset, path) || contains(t.span(), offset);
            if !found {
                path.pop();
            }
            found
        }),
        Item::None => false,
    }
}

fn find_in_value(v: &Value, offset: usize, path: &mut Vec<String>) -> bool {
    let inner = match v {
        Value::Array(a) => a.iter().enumerate().any(|(i, x)| {
            path.push(i.to_string());
            let found = find_in_value(x, offset, path);
            if !found {
                path.pop();
            }
            found
        }),
        Value::InlineTable(t) => t.iter().any(|(k, x)| {
            path.push(k.to_string());
            let key_span = t.get_key_value(k).and_then(|(key, _)| key.span());
            let found = contains(key_span, offset) || find_in_value(x, offset, path);
            if !found {
                path.pop();
            }
            found
        }),
        _ => false,
    };
    inner || contains(v.span(), offset)
}

/// The span of the value (or, failing that, the innermost enclosing table)
/// at `path` (`["run", "2", "workload", "0", "program"]`), and whether the
/// file has the whole path.
fn span_of_path(text: &str, path: &[String]) -> Option<(Range<usize>, bool)> {
    #[derive(Clone, Copy)]
    enum Node<'a> {
        Item(&'a Item),
        Table(&'a Table),
        Value(&'a Value),
    }
    let doc = ImDocument::parse(text).ok()?;
    let mut best: Option<Range<usize>> = None;
    let mut node = Node::Table(doc.as_table());
    let mut complete = true;
    for seg in path {
        let index = seg.parse::<usize>().ok();
        let next = match (node, index) {
            (Node::Item(Item::ArrayOfTables(a)), Some(i)) => a.get(i).map(Node::Table),
            (Node::Item(Item::Value(v)) | Node::Value(v), Some(i)) => {
                v.as_array().and_then(|a| a.get(i)).map(Node::Value)
            }
            (Node::Item(Item::Table(t)) | Node::Table(t), None) => t.get_key_value(seg).map(|(k, v)| {
                best = k.span().or(best.clone());
                Node::Item(v)
            }),
            (Node::Item(Item::Value(v)) | Node::Value(v), None) => {
                v.as_inline_table().and_then(|t| t.get_key_value(seg)).map(|(k, v)| {
                    best = k.span().or(best.clone());
                    Node::Item(v)
                })
            }
            _ => None,
        };
        let Some(n) = next else {
            complete = false;
            break;
        };
        let span = match n {
            Node::Item(i) => i.span(),
            Node::Table(t) => t.span(),
            Node::Value(v) => v.span(),
        };
        best = span.or(best);
        node = n;
    }
    best.map(|b| (b, complete))
}

/// Whether the file sets the field at `path`.
pub fn has_field(text: &str, path: &[String]) -> bool {
    span_of_path(text, path).is_some_and(|(_, complete)| complete)
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "name = \"t\"\ntitle = \"t\"\n\n[[run]]\nlabel = \"a\"\nmachine = \"cmp\"\npolicy = \"linux\"\n[[run.workload]]\nprogram = \"gcc\"\n\n[[run]]\nlabel = \"b\"\nmachine = \"cmp\"\npolicy = \"linux\"\n[[run.workload]]\nprogram = \"gcc\"\n[[run.workload]]\nprogram = \"nosuch\"\n";

    fn err(text: &str) -> LoadError {
        parse(Path::new("x.toml"), text).unwrap_err()
    }

    #[test]
    fn good_scenario_loads() {
        let s = parse(Path::new("x.toml"), GOOD.replace("nosuch", "lbm").as_str()).unwrap();
        assert_eq!(s.runs.len(), 2);
    }

    #[test]
    fn unknown_program_names_line_field_and_known_programs() {
        let e = err(GOOD);
        // `program = "nosuch"` is on line 18 (1-based), its value at column 11.
        assert_eq!(e.at, Some((18, 11)));
        assert_eq!(e.field.as_deref(), Some("run[1].workload[1].program"));
        assert!(e.message.contains("known programs"), "{e}");
        assert!(
            e.to_string().starts_with("x.toml:18:11: run[1].workload[1].program: unknown program"),
            "{e}"
        );
    }

    #[test]
    fn unknown_machine_lists_archs() {
        let e = err(&GOOD.replacen("machine = \"cmp\"", "machine = \"quantum\"", 1));
        assert_eq!(e.at, Some((6, 11)));
        assert_eq!(e.field.as_deref(), Some("run[0].machine"));
        assert!(e.message.contains("acmp-3"), "{e}");
    }

    #[test]
    fn wrong_type_names_line_full_path_and_what_is_accepted() {
        let e = err(&GOOD.replacen("program = \"gcc\"", "program = \"gcc\"\ncount = \"two\"", 1));
        assert_eq!(e.at, Some((10, 9)));
        assert_eq!(e.field.as_deref(), Some("run[0].workload[0].count"));
        assert_eq!(e.message, "expected an integer from 1 to 4096; found \"two\"");
    }

    #[test]
    fn unknown_field_is_refused_with_its_line_and_path() {
        let e = err(&GOOD.replacen("policy = \"linux\"", "policy = \"linux\"\nspeed = 3", 1));
        assert_eq!(e.at, Some((8, 1)));
        assert_eq!(e.field.as_deref(), Some("run[0].speed"));
        assert!(e.message.contains("unknown field"), "{e}");
    }

    /// serde's internals never reach the user: each message says what the
    /// field accepts and what was found, with the field's full path.
    #[test]
    fn serde_internals_are_replaced_by_what_is_accepted() {
        let w =
            |line: &str| err(&GOOD.replacen("program = \"gcc\"", &format!("program = \"gcc\"\n{line}"), 1));
        for (line, field, words) in [
            ("tax = \"x\"", "run[0].workload[0].tax", "or \"auto\"; found \"x\""),
            ("threads = 100000000000000000000", "run[0].workload[0].threads", "found 100000000000000000000"),
            ("nice = 1.5", "run[0].workload[0].nice", "from -20 to 19"),
            ("start_ms = \"soon\"", "run[0].workload[0].start_ms", "a number of ms"),
            ("pin = 3", "run[0].workload[0].pin", "a cpulist"),
        ] {
            let e = w(line);
            assert_eq!(e.field.as_deref(), Some(field), "{line}: {e}");
            assert!(e.message.contains(words), "{line}: {e}");
            for internal in ["u32", "u64", "usize", "i32", "f64", "untagged", "variant", "target type"] {
                assert!(!e.message.contains(internal), "{line}: {e}");
            }
        }
        let e = err(&GOOD.replacen("policy = \"linux\"", "policy = \"cfs\"", 1));
        assert_eq!(
            e.to_string(),
            format!(
                "x.toml:7:10: run[0].policy: unknown policy `cfs`; known policies: {}",
                dyncore_core::policies::Registry::builtin().names().join(", ")
            )
        );
        let e = err(&format!("sim = {{ tick_ns = \"x\" }}\n{GOOD}"));
        assert_eq!((e.field.as_deref(), e.at), (Some("sim.tick_ns"), Some((1, 19))), "{e}");
        assert!(e.message.ends_with("found \"x\""), "{e}");
    }

    #[test]
    fn missing_and_duplicate_fields_name_their_table() {
        let e = err(&GOOD.replacen("label = \"b\"\n", "", 1));
        assert_eq!((e.field.as_deref(), e.at), (Some("run[1].label"), Some((11, 1))), "{e}");
        assert_eq!(e.message, "missing; expected a one-line, non-empty string");
        let e = err(&GOOD.replacen("name = \"t\"\n", "", 1));
        assert_eq!(e.field.as_deref(), Some("name"), "{e}");
        let e = err(
            "name = \"t\"\ntitle = \"t\"\n[[run]]\nlabel = \"a\"\nmachine = \"cmp\"\npolicy = \"linux\"\nworkload = [{ label = \"x\" }]\n",
        );
        assert_eq!(e.field.as_deref(), Some("run[0].workload[0].program"), "{e}");
        let e = err(&GOOD.replacen("program = \"gcc\"", "program = \"gcc\"\nprogram = \"lbm\"", 1));
        assert_eq!(e.field.as_deref(), Some("run[0].workload[0].program"), "{e}");
        assert!(e.message.contains("duplicate key"), "{e}");
    }

    #[test]
    fn syntax_error_has_line() {
        let e = err("name = \"t\"\ntitle = \n");
        assert_eq!(e.at.map(|a| a.0), Some(2));
    }

    #[test]
    fn impossible_machine_is_refused_with_reason() {
        let e = err(&GOOD.replacen("policy = \"linux\"", "policy = \"linux\"\ncpus_per_node = 0", 1));
        assert_eq!(e.field.as_deref(), Some("run[0].cpus_per_node"));
        assert_eq!(e.at.map(|a| a.0), Some(8));
    }

    #[test]
    fn the_shipped_folder_is_shown_relative_to_where_the_command_runs() {
        assert_eq!(lexical(Path::new("/r/crates/d/../../scenarios")), Path::new("/r/scenarios"));
        assert_eq!(
            relative_to(Path::new("/r/scenarios"), Path::new("/r/crates/d")),
            Path::new("../../scenarios")
        );
        assert_eq!(relative_to(Path::new("/r/scenarios"), Path::new("/r")), Path::new("scenarios"));
        assert_eq!(
            relative_to(Path::new("/r/scenarios"), Path::new("/elsewhere")),
            Path::new("/r/scenarios")
        );
        assert!(!default_dir().to_string_lossy().contains("crates/"), "{}", default_dir().display());
    }

    #[test]
    fn line_col_counts_from_one() {
        assert_eq!(line_col("ab\ncd", 0), (1, 1));
        assert_eq!(line_col("ab\ncd", 4), (2, 2));
    }
}
