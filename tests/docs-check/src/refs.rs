//! References written in prose or comments: section citations (`docs/ARCHITECTURE.md §n.m`),
//! section numbers that name no document, references to files outside the repository, and
//! repository paths in backticks. Pure: text in, positions out.

/// The documents sections are cited from, by file name; they live in `docs/`.
pub const CITED_DOCS: [&str; 2] = ["ARCHITECTURE.md", "doris-protocols.md"];

/// References to files that are not in the repository (the background the design was first
/// written from), with what to cite instead. Spelled in pieces so this file does not match them.
pub const OUTSIDE: [(&str, &str); 4] = [
    (
        concat!("DESIGN", ".md"),
        "the design is docs/ARCHITECTURE.md",
    ),
    (
        concat!("../", "shared"),
        "a path outside the repository; point into docs/",
    ),
    (
        concat!("shared/", "doris-protocols.md"),
        "the protocol facts are docs/doris-protocols.md",
    ),
    (
        concat!("shared/", "STYLE.md"),
        "a file outside the repository",
    ),
];

/// One cited section, `doc` `§section`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Citation {
    /// The document's file name, one of [`CITED_DOCS`].
    pub doc: &'static str,
    /// `3` or `3.2`.
    pub section: String,
    /// Byte offset of the `§` (or of the number, in `§n–m`).
    pub offset: usize,
}

/// The 1-based line of a byte offset.
pub fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].matches('\n').count() + 1
}

/// A section number at the start of `s`: `3`, `3.2`, `1.3.1` (a trailing dot is punctuation).
fn number_at(s: &str) -> Option<&str> {
    let bytes = s.as_bytes();
    let digits = |from: usize| {
        bytes[from..]
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .count()
    };
    let mut end = digits(0);
    if end == 0 {
        return None;
    }
    while bytes.get(end) == Some(&b'.') && digits(end + 1) > 0 {
        end += 1 + digits(end + 1);
    }
    Some(&s[..end])
}

/// A chain of sections starting at `from` (which points at a `§`): `§a.b–§c.d, §e.f and §g`.
/// Returns the sections with their offsets, and where the chain ends.
fn section_chain(text: &str, from: usize) -> (Vec<(String, usize)>, usize) {
    let mut out = Vec::new();
    let mut at = from;
    let mut needs_mark = true;
    loop {
        let rest = &text[at..];
        let (skip, marked) = match rest.strip_prefix('§') {
            Some(_) => ('§'.len_utf8(), true),
            None => (0, false),
        };
        if needs_mark && !marked {
            break;
        }
        let Some(number) = number_at(&rest[skip..]) else {
            break;
        };
        out.push((number.to_owned(), at));
        at += skip + number.len();
        // What may join two sections: a range dash (the second `§` optional) or a list.
        let rest = &text[at..];
        let joins: [(&str, bool); 7] = [
            ("–", false),
            ("—", false),
            ("-", false),
            (", and ", true),
            (", ", true),
            (" and ", true),
            (" or ", true),
        ];
        match joins.iter().find(|(j, _)| rest.starts_with(j)) {
            Some((j, mark)) => {
                at += j.len();
                needs_mark = *mark;
            }
            None => break,
        }
    }
    (out, at)
}

/// Characters allowed between a document's name and its `§`: spaces, the line break of a
/// comment and the comment's markers, a closing backtick.
fn is_filler(c: char) -> bool {
    matches!(
        c,
        ' ' | '\t' | '\r' | '\n' | '/' | '!' | '#' | '*' | '>' | '`'
    )
}

/// Every section cited as `<doc> §n[.m]` (with any path before the name, backticks, a line
/// break of a comment in between, and chains: `§a.b–§c.d, §e.f`).
pub fn citations(text: &str) -> Vec<Citation> {
    let mut out = Vec::new();
    for doc in CITED_DOCS {
        let mut from = 0;
        while let Some(at) = text[from..].find(doc) {
            let start = from + at;
            from = start + doc.len();
            let before = text[..start].chars().next_back();
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '-') {
                continue;
            }
            let gap = text[from..]
                .char_indices()
                .find(|(_, c)| !is_filler(*c))
                .map_or(text.len() - from, |(i, _)| i);
            let mark = from + gap;
            if !text[mark..].starts_with('§') {
                continue;
            }
            let (sections, _) = section_chain(text, mark);
            out.extend(sections.into_iter().map(|(section, offset)| Citation {
                doc,
                section,
                offset,
            }));
        }
    }
    out.sort_by_key(|c| c.offset);
    out
}

/// Byte offsets of every `§<digit>` that is not part of a citation: a section number that
/// names no document.
pub fn bare_sections(text: &str, cited: &[Citation]) -> Vec<usize> {
    text.match_indices('§')
        .map(|(i, _)| i)
        .filter(|i| {
            text[i + '§'.len_utf8()..].starts_with(|c: char| c.is_ascii_digit())
                && !cited.iter().any(|c| c.offset == *i)
        })
        .collect()
}

/// Every reference to a file outside the repository: (byte offset, what it is).
pub fn outside_references(text: &str) -> Vec<(usize, &'static str)> {
    let mut out: Vec<(usize, &'static str)> = OUTSIDE
        .iter()
        .flat_map(|(needle, why)| text.match_indices(needle).map(move |(i, _)| (i, *why)))
        .collect();
    out.sort();
    out.dedup_by_key(|(i, _)| *i);
    out
}

/// Repository paths written in backticks, one line at a time: a span without spaces whose
/// first segment is one of `top_dirs` (`runner/README.md`), without a trailing `:line` or
/// `#anchor`. Spans with placeholders or globs (`<name>`, `*`,
/// `{a,b}`, `$X`, `…`) are not paths. Returns (byte offset, path).
pub fn code_paths(text: &str, top_dirs: &[String]) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut line_start = 0;
    for line in text.split_inclusive('\n') {
        let mut pieces = line.split('`');
        let mut offset = line_start;
        // Odd pieces are inside backticks.
        let mut inside = false;
        for piece in pieces.by_ref() {
            if inside && let Some(path) = as_path(piece, top_dirs) {
                out.push((offset, path));
            }
            offset += piece.len() + 1;
            inside = !inside;
        }
        line_start += line.len();
    }
    out
}

fn as_path(span: &str, top_dirs: &[String]) -> Option<String> {
    if span.is_empty()
        || span.contains(|c: char| c.is_whitespace() || "*<>{}$…|()[]=,;'\"\\".contains(c))
    {
        return None;
    }
    let (first, _) = span.split_once('/')?;
    if !top_dirs.iter().any(|d| d == first) {
        return None;
    }
    let path = span.split('#').next().unwrap_or(span);
    let path = match path.rsplit_once(':') {
        Some((p, line)) if line.is_empty() || line.chars().all(|c| c.is_ascii_digit()) => p,
        _ => path,
    };
    Some(path.trim_end_matches('/').to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `@` stands for the section sign, so that this file cites nothing itself.
    fn s(text: &str) -> String {
        text.replace('@', "§")
    }

    fn cited(text: &str) -> Vec<(&'static str, String)> {
        citations(text)
            .into_iter()
            .map(|c| (c.doc, c.section))
            .collect()
    }

    #[test]
    fn citations_with_paths_backticks_chains_and_line_breaks() {
        let text = s(
            "see docs/ARCHITECTURE.md @3.2, and (`doris-protocols.md` @1.3–@1.7, @2.4).\n\
             //! The changelog (doris-protocols.md\n//! @3.5) and doris-protocols.md @1–2 or @4.\n\
             ARCHITECTURE.md @3. Then @9 alone; myARCHITECTURE.md @8; doris-protocols.md without one.",
        );
        assert_eq!(
            cited(&text),
            vec![
                ("ARCHITECTURE.md", "3.2".to_owned()),
                ("doris-protocols.md", "1.3".to_owned()),
                ("doris-protocols.md", "1.7".to_owned()),
                ("doris-protocols.md", "2.4".to_owned()),
                ("doris-protocols.md", "3.5".to_owned()),
                ("doris-protocols.md", "1".to_owned()),
                ("doris-protocols.md", "2".to_owned()),
                ("doris-protocols.md", "4".to_owned()),
                ("ARCHITECTURE.md", "3".to_owned()),
            ]
        );
        let bare: Vec<usize> = bare_sections(&text, &citations(&text))
            .into_iter()
            .map(|o| line_of(&text, o))
            .collect();
        assert_eq!(bare, vec![4, 4], "@9 and the @8 of another name");
    }

    #[test]
    fn a_list_does_not_swallow_plain_numbers() {
        assert_eq!(
            cited(&s("ARCHITECTURE.md @3, 12 rows; ARCHITECTURE.md @4-5")),
            vec![
                ("ARCHITECTURE.md", "3".to_owned()),
                ("ARCHITECTURE.md", "4".to_owned()),
                ("ARCHITECTURE.md", "5".to_owned()),
            ]
        );
    }

    #[test]
    fn outside_references_are_found_once_each() {
        let text = format!(
            "See [x]({}/{}) and `{}`.\n",
            concat!("..", "/shared"),
            concat!("DESIGN", ".md"),
            concat!("shared/", "doris-protocols.md")
        );
        let got: Vec<usize> = outside_references(&text)
            .into_iter()
            .map(|(o, _)| o)
            .collect();
        assert_eq!(got, vec![8, 18, 34]);
    }

    #[test]
    fn code_paths_are_spans_rooted_at_a_top_directory() {
        let dirs = vec!["runner".to_owned(), "tests".to_owned()];
        // `^` stands for a backtick, so that this file names no such paths itself.
        let text = "^runner/src/lib.rs:12^ and ^tests/x/README.md#run^, not ^src/a.rs^,\n\
                    ^runner/<name>^, ^cargo test -p x^, ^runner/*.rs^, ^runner^, ^tests/dir/^."
            .replace('^', "`");
        let found = code_paths(&text, &dirs);
        let got: Vec<&str> = found.iter().map(|(_, p)| p.as_str()).collect();
        assert_eq!(
            got,
            vec!["runner/src/lib.rs", "tests/x/README.md", "tests/dir"]
        );
        assert!(text[found[1].0..].starts_with("tests/x/README.md#run"));
    }
}
