//! A table printed to the terminal (comfy-table) and written as Markdown into
//! reports and as HTML into the page, from the same rows, so they never
//! disagree.

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

    /// The table as an HTML `<table>` (no title). `row_class(i)` may give
    /// row `i` a class; cells that are numbers are right-aligned.
    pub fn to_html(&self, row_class: impl Fn(usize) -> Option<&'static str>) -> String {
        let mut s = String::from("<table>\n<thead><tr>");
        for h in &self.headers {
            s += &format!("<th>{}</th>", escape_html(h));
        }
        s += "</tr></thead>\n<tbody>\n";
        for (i, r) in self.rows.iter().enumerate() {
            match row_class(i) {
                Some(c) => s += &format!("<tr class=\"{c}\">"),
                None => s += "<tr>",
            }
            for c in r {
                let numeric = is_numeric(c);
                s += &format!("<td{}>{}</td>", if numeric { " class=\"num\"" } else { "" }, escape_html(c));
            }
            s += "</tr>\n";
        }
        s + "</tbody>\n</table>\n"
    }
}

/// A cell that reads as a number, a range (`1.2–1.5`) or a signed
/// percentage with a note (`+73% (differs)`): right-aligned in HTML.
pub fn is_numeric(cell: &str) -> bool {
    let first = cell.split_whitespace().next().unwrap_or("");
    let number = |s: &str| s.trim_end_matches(['%', '×']).replace(',', "").parse::<f64>().is_ok();
    !first.is_empty() && first.split('–').all(number)
}

/// Text made safe for HTML element content and quoted attributes.
pub fn escape_html(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
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

    #[test]
    fn html_escapes_cells_and_marks_numbers_and_rows() {
        let mut t = Table::new("T", &["a<b", "n"]);
        t.row(vec!["x & \"y\"".into(), "-1.5".into()]);
        let h = t.to_html(|i| (i == 0).then_some("differs"));
        assert!(h.contains("<th>a&lt;b</th>"), "{h}");
        assert!(
            h.contains(
                "<tr class=\"differs\"><td>x &amp; &quot;y&quot;</td><td class=\"num\">-1.5</td></tr>"
            ),
            "{h}"
        );
    }
}
