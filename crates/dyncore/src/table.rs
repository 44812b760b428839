//! A table printed to the terminal (comfy-table) and written as Markdown into
//! reports, from the same rows, so the two never disagree.

use comfy_table::{ContentArrangement, Table as Comfy, presets::UTF8_FULL_CONDENSED};

#[derive(Debug, Clone, Default)]
pub struct Table {
    pub title: String,
    pub headers: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new(title: impl Into<String>, headers: &[&str]) -> Self {
        Table {
            title: title.into(),
            headers: headers.iter().map(|h| h.to_string()).collect(),
            rows: Vec::new(),
        }
    }

    pub fn row(&mut self, cells: Vec<String>) {
        debug_assert_eq!(cells.len(), self.headers.len(), "row width must match headers");
        self.rows.push(cells);
    }

    /// The table as terminal text, titled.
    pub fn to_terminal(&self) -> String {
        let mut t = Comfy::new();
        t.load_preset(UTF8_FULL_CONDENSED).set_content_arrangement(ContentArrangement::Dynamic);
        t.set_header(self.headers.clone());
        for r in &self.rows {
            t.add_row(r.clone());
        }
        format!("{}\n{t}", self.title)
    }

    /// The table as GitHub-flavoured Markdown (no title).
    pub fn to_markdown(&self) -> String {
        let esc = |s: &str| s.replace('|', "\\|");
        let mut s = format!("| {} |\n", self.headers.iter().map(|h| esc(h)).collect::<Vec<_>>().join(" | "));
        s += &format!("|{}\n", "---|".repeat(self.headers.len()));
        for r in &self.rows {
            s += &format!("| {} |\n", r.iter().map(|c| esc(c)).collect::<Vec<_>>().join(" | "));
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_has_header_separator_and_escapes_pipes() {
        let mut t = Table::new("T", &["a", "b"]);
        t.row(vec!["1".into(), "x|y".into()]);
        assert_eq!(t.to_markdown(), "| a | b |\n|---|---|\n| 1 | x\\|y |\n");
        assert!(t.to_terminal().starts_with("T\n"));
    }
}
