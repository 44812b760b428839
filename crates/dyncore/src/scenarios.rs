//! Finding, reading and validating scenario files, with errors that name the
//! file, the line and column, and the field.

use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};

use dyncore_sim::{Scenario, ScenarioError};

/// The shipped scenarios: `./scenarios` when run from the repository, else
/// the folder next to this crate's sources.
pub fn default_dir() -> PathBuf {
    let here = PathBuf::from("scenarios");
    if here.is_dir() {
        return here;
    }
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios")
}

/// Scenario files named by `args` (files, or folders whose `*.toml` are taken
/// in name order); the shipped scenarios if `args` is empty.
pub fn discover(args: &[PathBuf]) -> Result<Vec<PathBuf>, LoadError> {
    let dirs: Vec<PathBuf> = if args.is_empty() { vec![default_dir()] } else { args.to_vec() };
    let mut out = Vec::new();
    for p in dirs {
        if p.is_dir() {
            let rd = std::fs::read_dir(&p).map_err(|e| LoadError::io(&p, &e))?;
            let mut files: Vec<PathBuf> = rd
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|f| f.extension().is_some_and(|x| x == "toml"))
                .collect();
            files.sort();
            if files.is_empty() {
                return Err(LoadError {
                    file: p.clone(),
                    at: None,
                    field: None,
                    message: "no *.toml scenarios in this folder".into(),
                });
            }
            out.extend(files);
        } else if p.is_file() {
            out.push(p);
        } else {
            return Err(LoadError {
                file: p.clone(),
                at: None,
                field: None,
                message: "no such file or folder".into(),
            });
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
    fn io(file: &Path, e: &std::io::Error) -> Self {
        LoadError { file: file.to_path_buf(), at: None, field: None, message: e.to_string() }
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

/// Reads, parses and validates one scenario file.
pub fn load(path: &Path) -> Result<Scenario, LoadError> {
    let text = std::fs::read_to_string(path).map_err(|e| LoadError::io(path, &e))?;
    parse(path, &text)
}

/// Parses and validates scenario text (`path` names the file in errors, and
/// the folder machine profiles are read from).
pub fn parse(path: &Path, text: &str) -> Result<Scenario, LoadError> {
    let mut scenario = Scenario::from_toml(text).map_err(|e| {
        let at = e.span().map(|s| line_col(text, s.start));
        // toml's message repeats the location in its first lines; keep the
        // message proper.
        let message = e.message().trim().to_string();
        let field = e.span().and_then(|s| field_at(text, s));
        LoadError { file: path.to_path_buf(), at, field, message }
    })?;
    scenario.load_profiles(path).and_then(|()| scenario.validate()).map_err(|e: ScenarioError| {
        let span = span_of_path(text, &e.path);
        LoadError {
            file: path.to_path_buf(),
            at: span.map(|s| line_col(text, s.start)),
            field: Some(e.dotted_path()),
            message: e.message.clone(),
        }
    })?;
    Ok(scenario)
}

/// 1-based (line, column) of byte `offset` (column in characters).
pub fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, col)
}

/// The key written at the start of a syntax-error span, if it is a `key = `
/// line (serde's errors for a wrong type or an unknown field point there).
fn field_at(text: &str, span: Range<usize>) -> Option<String> {
    let line_start = text[..span.start.min(text.len())].rfind('\n').map_or(0, |i| i + 1);
    let line = text[line_start..].lines().next()?;
    let key = line.split('=').next()?.trim();
    let ok = !key.is_empty()
        && line.contains('=')
        && key.chars().all(|c| c.is_alphanumeric() || c == '_' || c == '-');
    ok.then(|| key.to_string())
}

/// The span of the value (or, failing that, the innermost enclosing table)
/// at `path` (`["run", "2", "workload", "0", "program"]`).
fn span_of_path(text: &str, path: &[String]) -> Option<Range<usize>> {
    use toml_edit::{ImDocument, Item, Table, Value};
    #[derive(Clone, Copy)]
    enum Node<'a> {
        Item(&'a Item),
        Table(&'a Table),
        Value(&'a Value),
    }
    let doc = ImDocument::parse(text).ok()?;
    let mut best: Option<Range<usize>> = None;
    let mut node = Node::Table(doc.as_table());
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
        let Some(n) = next else { break };
        let span = match n {
            Node::Item(i) => i.span(),
            Node::Table(t) => t.span(),
            Node::Value(v) => v.span(),
        };
        best = span.or(best);
        node = n;
    }
    best
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
    fn wrong_type_names_line_and_field() {
        let e = err(&GOOD.replacen("program = \"gcc\"", "program = \"gcc\"\ncount = \"two\"", 1));
        assert_eq!(e.at.map(|a| a.0), Some(10));
        assert_eq!(e.field.as_deref(), Some("count"));
    }

    #[test]
    fn unknown_field_is_refused_with_its_line() {
        let e = err(&GOOD.replacen("policy = \"linux\"", "policy = \"linux\"\nspeed = 3", 1));
        assert_eq!(e.at.map(|a| a.0), Some(8));
        assert!(e.message.contains("unknown field"), "{e}");
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
    fn line_col_counts_from_one() {
        assert_eq!(line_col("ab\ncd", 0), (1, 1));
        assert_eq!(line_col("ab\ncd", 4), (2, 2));
    }
}
