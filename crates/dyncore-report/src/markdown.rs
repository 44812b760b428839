//! The Markdown our own reports are written in, as HTML, for the bench
//! reports shown on the page (`out/bench-*/report.md`, written by the
//! benchmarks). It covers what those reports use and no more: headings,
//! paragraphs (a line ending in two spaces breaks), `*`/`-` lists, pipe
//! tables, fenced code, images, links, `code` and **bold**. Everything else
//! is escaped text, so a report can never inject markup into the page.

use crate::table::escape_html;

/// `md` as HTML; headings are pushed down `shift` levels (to nest under the
/// page's own), and relative image and link targets get `base` in front.
pub fn to_html(md: &str, shift: usize, base: &str) -> String {
    let lines: Vec<&str> = md.lines().collect();
    let mut out = String::new();
    let mut i = 0;
    while i < lines.len() {
        let t = lines[i].trim_start();
        i = if t.is_empty() {
            i + 1
        } else if t.starts_with("```") {
            code_block(&lines, i, &mut out)
        } else if let Some(level) = heading_level(t) {
            let n = (level + shift).min(6);
            out += &format!("<h{n}>{}</h{n}>\n", inline(t[level..].trim(), base));
            i + 1
        } else if t.starts_with('|') {
            let end = run_end(&lines, i, |l| l.trim_start().starts_with('|'));
            out += &table(&lines[i..end], base);
            end
        } else if is_item(t) {
            list(&lines, i, base, &mut out)
        } else {
            paragraph(&lines, i, base, &mut out)
        };
    }
    out
}

/// A fenced block from line `i`; returns the line after its closing fence.
fn code_block(lines: &[&str], i: usize, out: &mut String) -> usize {
    let end = run_end(lines, i, |l| !l.trim_start().starts_with("```"));
    *out += "<pre><code>";
    for l in &lines[i + 1..end] {
        *out += &escape_html(l);
        out.push('\n');
    }
    *out += "</code></pre>\n";
    end + 1
}

/// A list from line `i` (an indented line continues the item before it).
fn list(lines: &[&str], i: usize, base: &str, out: &mut String) -> usize {
    let end = run_end(lines, i, |l| is_item(l.trim_start()) || l.starts_with("  ") && !l.trim().is_empty());
    let mut items: Vec<String> = Vec::new();
    for l in &lines[i..end] {
        match (l.trim_start(), items.last_mut()) {
            (item, _) if is_item(item) => items.push(inline(&item[2..], base)),
            (more, Some(last)) => *last += &format!(" {}", inline(more, base)),
            (more, None) => items.push(inline(more, base)),
        }
    }
    *out += "<ul>\n";
    for item in items {
        *out += &format!("<li>{item}</li>\n");
    }
    *out += "</ul>\n";
    end
}

/// A paragraph from line `i`, up to a blank line or another block.
fn paragraph(lines: &[&str], i: usize, base: &str, out: &mut String) -> usize {
    let end = run_end(lines, i, |l| {
        let t = l.trim_start();
        !t.is_empty()
            && heading_level(t).is_none()
            && !t.starts_with('|')
            && !is_item(t)
            && !t.starts_with("```")
    });
    let parts: Vec<String> = lines[i..end]
        .iter()
        .map(|l| {
            let text = inline(l.trim(), base);
            if l.ends_with("  ") { format!("{text}<br>") } else { text }
        })
        .collect();
    *out += &format!("<p>{}</p>\n", parts.join("\n"));
    end
}

fn heading_level(t: &str) -> Option<usize> {
    let n = t.chars().take_while(|&c| c == '#').count();
    ((1..=6).contains(&n) && t[n..].starts_with(' ')).then_some(n)
}

fn is_item(t: &str) -> bool {
    t.starts_with("* ") || t.starts_with("- ")
}

/// The first line at or after `i` (past `i` itself) that `keep` refuses.
fn run_end(lines: &[&str], i: usize, keep: impl Fn(&str) -> bool) -> usize {
    lines[i + 1..].iter().position(|l| !keep(l)).map_or(lines.len(), |e| i + 1 + e)
}

fn cells(row: &str) -> Vec<String> {
    let row = row.trim().trim_start_matches('|');
    let row = row.strip_suffix('|').unwrap_or(row);
    // `\|` is a pipe inside a cell.
    let mut out = vec![String::new()];
    let mut chars = row.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&'|') => {
                out.last_mut().expect("one cell").push('|');
                chars.next();
            }
            '|' => out.push(String::new()),
            c => out.last_mut().expect("one cell").push(c),
        }
    }
    out.into_iter().map(|c| c.trim().to_string()).collect()
}

fn table(rows: &[&str], base: &str) -> String {
    let is_rule =
        |r: &str| cells(r).iter().all(|c| !c.is_empty() && c.chars().all(|ch| matches!(ch, '-' | ':')));
    let (head, body) = match rows {
        [h, rule, rest @ ..] if is_rule(rule) => (Some(*h), rest),
        _ => (None, rows),
    };
    let mut s = String::from("<table>\n");
    if let Some(h) = head {
        s += "<thead><tr>";
        for c in cells(h) {
            s += &format!("<th>{}</th>", inline(&c, base));
        }
        s += "</tr></thead>\n";
    }
    s += "<tbody>\n";
    for r in body {
        s += "<tr>";
        for c in cells(r) {
            let numeric = crate::table::is_numeric(&c);
            s += &format!("<td{}>{}</td>", if numeric { " class=\"num\"" } else { "" }, inline(&c, base));
        }
        s += "</tr>\n";
    }
    s + "</tbody>\n</table>\n"
}

/// A link or image target: relative ones are made relative to `base`.
fn target(url: &str, base: &str) -> String {
    let external =
        url.contains("://") || url.starts_with('#') || url.starts_with('/') || url.starts_with("mailto:");
    escape_html(&if external { url.to_string() } else { format!("{base}{url}") })
}

/// Inline spans: images, links, `<autolinks>`, `code`, **bold**.
pub fn inline(text: &str, base: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while !rest.is_empty() {
        let (img, link) = (rest.starts_with("!["), rest.starts_with('['));
        if img || link {
            let open = if img { 2 } else { 1 };
            if let Some((label, url, used)) = bracket_link(&rest[open..]) {
                if img {
                    out += &format!("<img src=\"{}\" alt=\"{}\">", target(url, base), escape_html(label));
                } else {
                    out += &format!("<a href=\"{}\">{}</a>", target(url, base), inline(label, base));
                }
                rest = &rest[open + used..];
                continue;
            }
        }
        if let Some(r) = rest.strip_prefix('<')
            && let Some(end) = r.find('>')
            && (r.starts_with("http://") || r.starts_with("https://"))
        {
            let url = &r[..end];
            out += &format!("<a href=\"{}\">{}</a>", escape_html(url), escape_html(url));
            rest = &r[end + 1..];
            continue;
        }
        if let Some(r) = rest.strip_prefix('`')
            && let Some(end) = r.find('`')
        {
            out += &format!("<code>{}</code>", escape_html(&r[..end]));
            rest = &r[end + 1..];
            continue;
        }
        if let Some(r) = rest.strip_prefix("**")
            && let Some(end) = r.find("**")
        {
            out += &format!("<strong>{}</strong>", inline(&r[..end], base));
            rest = &r[end + 2..];
            continue;
        }
        let c = rest.chars().next().expect("not empty");
        out += &escape_html(&c.to_string());
        rest = &rest[c.len_utf8()..];
    }
    out
}

/// `label](url)` at the start of `s`: (label, url, bytes used).
fn bracket_link(s: &str) -> Option<(&str, &str, usize)> {
    let close = s.find("](")?;
    if s[..close].contains(']') {
        return None;
    }
    let end = s[close + 2..].find(')')? + close + 2;
    Some((&s[..close], &s[close + 2..end], end + 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn converts_the_subset_our_reports_use() {
        let md = "# Bench\n\nMachine: 2 CPUs  \nTimer: TSC\n\n## Goals\n\n| goal | ratio |\n|---|---|\n| a \\| b | 1.5× |\n\n![lat](latency.png)\n\n* one `x<y`\n* **two** [docs](../docs/results.md)\n  continued\n\n```\nlet a = <b>;\n```\nSee <https://ui.perfetto.dev>.\n";
        let h = to_html(md, 1, "bench-sim/");
        assert!(h.contains("<h2>Bench</h2>") && h.contains("<h3>Goals</h3>"), "{h}");
        assert!(h.contains("<p>Machine: 2 CPUs<br>\nTimer: TSC</p>"), "{h}");
        assert!(h.contains("<thead><tr><th>goal</th><th>ratio</th></tr></thead>"), "{h}");
        assert!(h.contains("<td>a | b</td><td class=\"num\">1.5×</td>"), "{h}");
        assert!(h.contains("<img src=\"bench-sim/latency.png\" alt=\"lat\">"), "{h}");
        assert!(h.contains("<li>one <code>x&lt;y</code></li>"), "{h}");
        assert!(
            h.contains(
                "<li><strong>two</strong> <a href=\"bench-sim/../docs/results.md\">docs</a> continued</li>"
            ),
            "{h}"
        );
        assert!(h.contains("<pre><code>let a = &lt;b&gt;;\n</code></pre>"), "{h}");
        assert!(h.contains("<a href=\"https://ui.perfetto.dev\">https://ui.perfetto.dev</a>"), "{h}");
    }

    #[test]
    fn raw_html_is_escaped() {
        let h = to_html("<script>alert(1)</script>\n", 0, "");
        assert!(!h.contains("<script>"), "{h}");
    }
}
