//! What a Markdown file offers to point at (headings, their anchors and section numbers) and
//! the links it makes. Pure: text in, positions out.

/// One ATX heading (`## 3.1 The seam`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Heading {
    /// The text after the `#`s, trimmed.
    pub text: String,
    /// The anchor GitHub gives it (`3-1-the-seam`… see [`slug`]), duplicates suffixed `-1`, `-2`.
    pub anchor: String,
    /// The leading section number (`3.1`), if the heading has one.
    pub number: Option<String>,
    /// 1-based line.
    pub line: usize,
}

/// `text` with every code span and fenced code block replaced by spaces (newlines kept), so
/// that byte offsets and line numbers stay those of the original.
pub fn mask_code(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut fence: Option<(char, usize)> = None;
    for line in text.split_inclusive('\n') {
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        let marker = trimmed.chars().next().filter(|c| *c == '`' || *c == '~');
        let run = marker.map_or(0, |m| trimmed.chars().take_while(|c| *c == m).count());
        match fence {
            Some((m, n)) => {
                if marker == Some(m) && run >= n && trimmed[run..].trim().is_empty() {
                    fence = None;
                }
                out.push_str(&blank(line));
            }
            None if indent <= 3 && run >= 3 => {
                fence = marker.map(|m| (m, run));
                out.push_str(&blank(line));
            }
            None => out.push_str(&mask_spans(line)),
        }
    }
    out
}

/// `s` with every character but its line ends replaced by as many spaces as it has bytes.
fn blank(s: &str) -> String {
    s.chars()
        .map(|c| match c {
            '\n' | '\r' => c.to_string(),
            c => " ".repeat(c.len_utf8()),
        })
        .collect()
}

/// One line with its code spans (a run of backticks up to the next run of the same length)
/// blanked; an unclosed run is kept as it is.
fn mask_spans(line: &str) -> String {
    let chars: Vec<char> = line.chars().collect();
    let mut out = String::with_capacity(line.len());
    let mut i = 0;
    while i < chars.len() {
        if chars[i] != '`' {
            out.push(chars[i]);
            i += 1;
            continue;
        }
        let open = chars[i..].iter().take_while(|c| **c == '`').count();
        let mut j = i + open;
        let mut close = None;
        while j < chars.len() {
            if chars[j] == '`' {
                let run = chars[j..].iter().take_while(|c| **c == '`').count();
                if run == open {
                    close = Some(j + run);
                    break;
                }
                j += run;
            } else {
                j += 1;
            }
        }
        let end = close.unwrap_or(i + open);
        if close.is_some() {
            out.push_str(&blank(&chars[i..end].iter().collect::<String>()));
        } else {
            out.extend(&chars[i..end]);
        }
        i = end;
    }
    out
}

/// The anchor GitHub derives from a heading's text: lower case, every character that is not a
/// letter, a digit, `-` or `_` dropped, spaces turned into `-`.
pub fn slug(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_alphanumeric() || c == '-' || c == '_' {
            out.extend(c.to_lowercase());
        } else if c == ' ' {
            out.push('-');
        }
    }
    out
}

/// The leading section number of a heading: `3` of `3. The runner`, `3.1` of `3.1 The seam`.
pub fn section_number(text: &str) -> Option<String> {
    let digits_and_dots: String = text
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.')
        .collect();
    let rest = &text[digits_and_dots.len()..];
    let number = digits_and_dots.trim_end_matches('.');
    let well_formed = !number.is_empty()
        && number.split('.').all(|part| !part.is_empty())
        && rest.starts_with(char::is_whitespace);
    well_formed.then(|| number.to_owned())
}

/// Every ATX heading outside code blocks, with its anchor and number.
pub fn headings(text: &str) -> Vec<Heading> {
    let masked = mask_code(text);
    let mut seen: Vec<String> = Vec::new();
    let mut out = Vec::new();
    for (i, (line, original)) in masked.lines().zip(text.lines()).enumerate() {
        let trimmed = line.trim_start();
        if line.len() - trimmed.len() > 3 || !trimmed.starts_with('#') {
            continue;
        }
        let level = trimmed.chars().take_while(|c| *c == '#').count();
        let after = &trimmed[level..];
        if level > 6 || !(after.is_empty() || after.starts_with(char::is_whitespace)) {
            continue;
        }
        // The anchor comes from the text as written, code spans included.
        let start = original.len() - original.trim_start().len() + level;
        let text = original[start..].trim().trim_end_matches('#').trim_end();
        let base = slug(text);
        let dups = seen.iter().filter(|s| **s == base).count();
        seen.push(base.clone());
        out.push(Heading {
            text: text.to_owned(),
            anchor: if dups == 0 {
                base
            } else {
                format!("{base}-{dups}")
            },
            number: section_number(text),
            line: i + 1,
        });
    }
    out
}

/// An inline link or image, `[text](target)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    /// The target as written, without an optional title.
    pub target: String,
    /// 1-based line.
    pub line: usize,
}

/// Every inline link outside code.
pub fn links(text: &str) -> Vec<Link> {
    let masked = mask_code(text);
    let mut out = Vec::new();
    for (i, line) in masked.lines().enumerate() {
        let mut from = 0;
        while let Some(at) = line[from..].find("](") {
            let open = from + at + 2;
            from = open;
            if !line[..open].contains('[') {
                continue;
            }
            let mut depth = 1;
            let mut end = None;
            for (j, c) in line[open..].char_indices() {
                match c {
                    '(' => depth += 1,
                    ')' => {
                        depth -= 1;
                        if depth == 0 {
                            end = Some(open + j);
                            break;
                        }
                    }
                    _ => {}
                }
            }
            let Some(end) = end else { break };
            let inner = line[open..end].trim();
            let target = inner
                .strip_prefix('<')
                .and_then(|t| t.split_once('>'))
                .map_or_else(|| inner.split_whitespace().next().unwrap_or(""), |(t, _)| t);
            if !target.is_empty() {
                out.push(Link {
                    target: target.to_owned(),
                    line: i + 1,
                });
            }
            from = end;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs_are_githubs() {
        assert_eq!(slug("3.1 The seam"), "31-the-seam");
        assert_eq!(slug("1. The parts"), "1-the-parts");
        assert_eq!(
            slug("`dcs-runner check`: what run would do"),
            "dcs-runner-check-what-run-would-do"
        );
        assert_eq!(slug("Stream Load (2PC) — état"), "stream-load-2pc--état");
    }

    #[test]
    fn section_numbers_are_the_leading_digits() {
        assert_eq!(section_number("3. The runner").as_deref(), Some("3"));
        assert_eq!(section_number("3.1 The seam").as_deref(), Some("3.1"));
        assert_eq!(section_number("3.1. The seam").as_deref(), Some("3.1"));
        assert_eq!(section_number("7.3.1 OK packets").as_deref(), Some("7.3.1"));
        assert_eq!(section_number("2PC"), None);
        assert_eq!(section_number("3..1 x"), None);
        assert_eq!(section_number("Run"), None);
    }

    #[test]
    fn headings_skip_code_and_number_duplicates() {
        let text =
            "# Title\n\n```sh\n# not a heading\n```\n## 1. Parts\n### Notes\n### Notes\n#nope\n";
        let h = headings(text);
        let got: Vec<(&str, &str, Option<&str>, usize)> = h
            .iter()
            .map(|h| {
                (
                    h.text.as_str(),
                    h.anchor.as_str(),
                    h.number.as_deref(),
                    h.line,
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                ("Title", "title", None, 1),
                ("1. Parts", "1-parts", Some("1"), 6),
                ("Notes", "notes", None, 7),
                ("Notes", "notes-1", None, 8),
            ]
        );
    }

    #[test]
    fn links_outside_code_with_their_lines() {
        let text = "See [a](docs/a.md#x) and ![img](i.png \"title\").\n\
                    `[not](a-link.md)` and\n```\n[nor](this.md)\n```\n\
                    [b](<with space.md>) [c](https://example.com/(x)) | [d](f(1).md)\n";
        let got: Vec<(String, usize)> = links(text)
            .into_iter()
            .map(|l| (l.target, l.line))
            .collect();
        assert_eq!(
            got,
            vec![
                ("docs/a.md#x".to_owned(), 1),
                ("i.png".to_owned(), 1),
                ("with space.md".to_owned(), 6),
                ("https://example.com/(x)".to_owned(), 6),
                ("f(1).md".to_owned(), 6),
            ]
        );
    }

    #[test]
    fn masking_keeps_offsets() {
        let text = "a `b` c\n```\nx\n```\nd ``e ` f`` g `§`\n";
        let masked = mask_code(text);
        assert_eq!(masked.len(), text.len());
        assert_eq!(masked, "a     c\n   \n \n   \nd           g     \n");
    }
}
