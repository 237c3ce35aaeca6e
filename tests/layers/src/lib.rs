//! The import layers of a crate, read from its sources (docs/ARCHITECTURE.md §1.1): every
//! `crate::…` path (grouped `use crate::{a, b}` included) and every `super::…` path is an edge
//! from the file's module to the module it names. [`problems`] lists a circle among the
//! top-level modules, a circle among the children of one module, and an import that goes up or
//! sideways across the layers given, naming the files. Each crate's layer test calls it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The layers of one module's children, lowest first: a child may use those of lower layers
/// only. `module` is a path inside the crate, `""` for the top-level modules.
pub struct Layers<'a> {
    /// The module whose children are layered, e.g. `"reconcile"`; `""` for the crate.
    pub module: &'a str,
    /// Its children, lowest layer first.
    pub layers: &'a [&'a [&'a str]],
}

/// Which code of a crate is read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Read {
    /// The shipped code: without unit tests (a `#[cfg(test)] mod tests` block, last in a file by
    /// convention) and test-only modules (`testing.rs`), which may reach for fixtures anywhere.
    Shipped,
    /// Every line, unit tests included.
    All,
}

/// What breaks the layers of the crate whose sources are `root` (shown as `shown` in the
/// messages): a circle among the top-level modules or among the children of any module, an
/// import that goes up or sideways across one of `layered`, a child of a layered module in no
/// layer. Empty when the crate is layered.
///
/// # Panics
/// When `root` cannot be read.
pub fn problems(root: &Path, shown: &str, read: Read, layered: &[Layers<'_>]) -> Vec<String> {
    let (modules, all) = edges(root, shown, read);
    let mut problems = Vec::new();
    // No circle among the top-level modules, nor among the children of any module.
    for parent in &modules {
        let edges = child_edges(parent, &all);
        if let Some(circle) = find_circle(&edges) {
            let at = if parent.is_empty() {
                "the crate".to_owned()
            } else {
                parent.join("::")
            };
            problems.push(format!("a circle in {at}: {}", describe(&circle, &edges)));
        }
    }
    for Layers { module, layers } in layered {
        let parent: ModPath = module
            .split("::")
            .filter(|p| !p.is_empty())
            .map(str::to_owned)
            .collect();
        let at = if parent.is_empty() {
            shown.to_owned()
        } else {
            format!("{shown} {module}")
        };
        // Imports go down the layers only.
        let layer_of = |m: &str| layers.iter().position(|l| l.contains(&m));
        for ((from, to), files) in child_edges(&parent, &all) {
            match (layer_of(&from), layer_of(&to)) {
                (Some(a), Some(b)) if b < a => {}
                (Some(_), Some(_)) => problems.push(format!(
                    "{at}: {from} uses {to}, which is not in a lower layer ({})",
                    files.into_iter().collect::<Vec<_>>().join(", ")
                )),
                _ => problems.push(format!(
                    "{at}: {from} -> {to}: add the new module to its layers (the layer test and docs/ARCHITECTURE.md)"
                )),
            }
        }
        let children: BTreeSet<&str> = modules
            .iter()
            .filter(|m| m.len() > parent.len() && m.starts_with(&parent))
            .map(|m| m[parent.len()].as_str())
            .collect();
        for m in children {
            if layer_of(m).is_none() {
                problems.push(format!(
                    "{at}: the module {m} is in no layer: add it to the layer test"
                ));
            }
        }
    }
    problems
}

/// One use of a module: the module of the file, the module it names (its longest prefix that is a
/// module of the crate), and the file, as shown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Use {
    /// The module of the file, e.g. `["pipeline", "loads"]`.
    pub from: Vec<String>,
    /// The module it names, e.g. `["sink", "doris", "schema"]`.
    pub to: Vec<String>,
    /// The file, e.g. `runner/src/pipeline/loads.rs`.
    pub file: String,
}

/// Every use of a module by a file of the crate whose sources are `root` (shown as `shown`), for
/// a crate's own rules beside its layers (the binaries left out, as in [`problems`]).
///
/// # Panics
/// When `root` cannot be read.
pub fn uses(root: &Path, shown: &str, read: Read) -> Vec<Use> {
    edges(root, shown, read)
        .1
        .into_iter()
        .map(|(from, to, file)| Use { from, to, file })
        .collect()
}

/// A module path, e.g. `["sink", "doris", "schema"]`.
type ModPath = Vec<String>;

/// Edges between module paths, each with the files that make it.
type Edges = BTreeMap<(String, String), BTreeSet<String>>;

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// `sink/doris/mod.rs` → `sink::doris`; `pipeline.rs` → `pipeline`; the crate root → empty.
fn module_of(relative: &Path) -> ModPath {
    let mut parts: Vec<String> = relative
        .with_extension("")
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    if parts.last().is_some_and(|p| p == "mod") || parts == ["lib"] || parts == ["main"] {
        parts.pop();
    }
    parts
}

/// The text without comments (line comments and doc comments; block comments are not used), and
/// for [`Read::Shipped`] without its unit tests.
fn code_of(text: &str, read: Read) -> String {
    let text = match text.find("#[cfg(test)]\nmod tests") {
        Some(i) if read == Read::Shipped => &text[..i],
        _ => text,
    };
    text.lines()
        .map(|line| match line.find("//") {
            // `//` inside a string literal ("http://…") only cuts a line short: it hides no path.
            Some(i) => &line[..i],
            None => line,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The paths after every `prefix` (`crate::` or `super::`): `a::b::c`, and for a group
/// `prefix{a::b, c}` each of its members.
fn paths_after(code: &str, prefix: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let bytes = code.as_bytes();
    let mut from = 0;
    while let Some(i) = code[from..].find(prefix) {
        let start = from + i;
        from = start + prefix.len();
        let word_before = start > 0 && {
            let c = bytes[start - 1];
            c.is_ascii_alphanumeric() || c == b'_'
        };
        if word_before {
            continue;
        }
        if code[from..].starts_with('{') {
            let mut depth = 0;
            let mut end = from;
            for (j, c) in code[from..].char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' => {
                        depth -= 1;
                        if depth == 0 {
                            end = from + j;
                            break;
                        }
                    }
                    _ => {}
                }
            }
            let mut depth = 0;
            let mut member = String::new();
            for c in code[from + 1..end].chars().chain([',']) {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        out.push(split_path(&member));
                        member.clear();
                        continue;
                    }
                    _ => {}
                }
                member.push(c);
            }
        } else {
            let rest: String = code[from..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == ':')
                .collect();
            out.push(split_path(&rest));
        }
    }
    out.retain(|p| !p.is_empty());
    out
}

fn split_path(text: &str) -> Vec<String> {
    text.split("::")
        .map(|s| {
            s.trim()
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect::<String>()
        })
        .take_while(|s| !s.is_empty())
        .collect()
}

/// The module a path names: its longest prefix that is a module of the crate.
fn resolve(path: &[String], modules: &BTreeSet<ModPath>) -> ModPath {
    (0..=path.len())
        .rev()
        .map(|n| path[..n].to_vec())
        .find(|p| modules.contains(p))
        .unwrap_or_default()
}

/// Every module-to-module edge of the sources under `root` (a crate's `src`), the files named
/// from `shown` (e.g. `operator/src`). The binaries (`main.rs`, `bin/`) are left out: they are no
/// layer of the library; so are test-only modules (`testing.rs`) for [`Read::Shipped`].
fn edges(
    root: &Path,
    shown: &str,
    read: Read,
) -> (BTreeSet<ModPath>, Vec<(ModPath, ModPath, String)>) {
    let mut files = Vec::new();
    rust_files(root, &mut files);
    files.retain(|f| {
        let relative = f.strip_prefix(root).unwrap();
        relative != Path::new("main.rs")
            && !relative.starts_with("bin")
            && (read == Read::All || relative.file_name().is_some_and(|n| n != "testing.rs"))
    });
    let modules: BTreeSet<ModPath> = files
        .iter()
        .map(|f| module_of(f.strip_prefix(root).unwrap()))
        .collect();
    let mut out = Vec::new();
    for file in &files {
        let relative = file.strip_prefix(root).unwrap();
        let name = format!("{shown}/{}", relative.display());
        let from = module_of(relative);
        let code = code_of(&std::fs::read_to_string(file).unwrap(), read);
        for path in paths_after(&code, "crate::") {
            out.push((from.clone(), resolve(&path, &modules), name.clone()));
        }
        for path in paths_after(&code, "super::") {
            let mut full = from[..from.len().saturating_sub(1)].to_vec();
            full.extend(path);
            out.push((from.clone(), resolve(&full, &modules), name.clone()));
        }
    }
    (modules, out)
}

/// The edges between the children of `parent` (top level when empty): `a -> b` when a file in or
/// under `parent::a` names something in or under `parent::b`.
fn child_edges(parent: &[String], all: &[(ModPath, ModPath, String)]) -> Edges {
    let mut out = Edges::new();
    let depth = parent.len();
    for (from, to, file) in all {
        let (Some(a), Some(b)) = (from.get(depth), to.get(depth)) else {
            continue;
        };
        if from.starts_with(parent) && to.starts_with(parent) && a != b {
            out.entry((a.clone(), b.clone()))
                .or_default()
                .insert(file.clone());
        }
    }
    out
}

/// A circle through the graph's nodes, if there is one, as the list of its nodes.
fn find_circle(edges: &Edges) -> Option<Vec<String>> {
    let mut next: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (a, b) in edges.keys() {
        next.entry(a).or_default().push(b);
    }
    fn visit<'a>(
        node: &'a str,
        next: &BTreeMap<&'a str, Vec<&'a str>>,
        stack: &mut Vec<&'a str>,
        done: &mut BTreeSet<&'a str>,
    ) -> Option<Vec<String>> {
        if let Some(i) = stack.iter().position(|n| *n == node) {
            let mut circle: Vec<String> = stack[i..].iter().map(|s| (*s).to_owned()).collect();
            circle.push(node.to_owned());
            return Some(circle);
        }
        if !done.insert(node) {
            return None;
        }
        stack.push(node);
        for n in next.get(node).into_iter().flatten() {
            if let Some(c) = visit(n, next, stack, done) {
                return Some(c);
            }
        }
        stack.pop();
        None
    }
    let mut done = BTreeSet::new();
    next.keys()
        .find_map(|n| visit(n, &next, &mut Vec::new(), &mut done))
}

fn describe(circle: &[String], edges: &Edges) -> String {
    circle
        .windows(2)
        .map(|w| {
            let files = &edges[&(w[0].clone(), w[1].clone())];
            format!(
                "{} -> {} ({})",
                w[0],
                w[1],
                files.iter().cloned().collect::<Vec<_>>().join(", ")
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_finder_sees_grouped_and_relative_imports_and_circles() {
        let code = code_of(
            "use crate::{sink::encode::{A, B}, settings};\nlet x = crate::source::tso::now(); // crate::demo\nuse super::batcher::Batcher;",
            Read::All,
        );
        let path = |p: &[&str]| p.iter().map(|s| (*s).to_owned()).collect::<Vec<String>>();
        assert_eq!(
            paths_after(&code, "crate::"),
            vec![
                path(&["sink", "encode"]),
                path(&["settings"]),
                path(&["source", "tso", "now"]),
            ]
        );
        assert_eq!(
            paths_after(&code, "super::"),
            vec![path(&["batcher", "Batcher"])]
        );
        let mut circle = Edges::new();
        for (a, b) in [("a", "b"), ("b", "c"), ("c", "a"), ("c", "d")] {
            circle.insert((a.into(), b.into()), BTreeSet::from(["f.rs".to_owned()]));
        }
        assert_eq!(
            find_circle(&circle),
            Some(vec!["a".into(), "b".into(), "c".into(), "a".into()])
        );
        circle.remove(&("c".to_owned(), "a".to_owned()));
        assert_eq!(find_circle(&circle), None);
    }

    #[test]
    fn an_import_up_the_layers_and_a_circle_are_named_with_their_files() {
        let root = std::env::temp_dir().join(format!("dcs-layers-{}", std::process::id()));
        let write = |path: &str, text: &str| {
            let path = root.join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        };
        write("lib.rs", "pub mod low;\npub mod high;\n");
        write("low.rs", "use crate::high::Thing; // up\n");
        write("high.rs", "pub struct Thing;\n");
        write("high/mod_a.rs", "");
        write("testing.rs", "use crate::high::Thing;\n");
        let layers = [Layers {
            module: "",
            layers: &[&["low"], &["high"]],
        }];
        assert_eq!(
            problems(&root, "x/src", Read::Shipped, &layers),
            vec!["x/src: low uses high, which is not in a lower layer (x/src/low.rs)".to_owned()]
        );
        write("high.rs", "pub struct Thing;\nuse crate::low;\n");
        let found = problems(&root, "x/src", Read::Shipped, &layers);
        assert!(
            found[0].starts_with(
                "a circle in the crate: high -> low (x/src/high.rs); low -> high (x/src/low.rs)"
            ),
            "{found:?}"
        );
        write(
            "low.rs",
            "pub struct Low;\n#[cfg(test)]\nmod tests {\n    use crate::high::Thing;\n}\n",
        );
        assert_eq!(
            problems(&root, "x/src", Read::Shipped, &layers),
            Vec::<String>::new()
        );
        // Read whole, the unit test's import closes the circle again and goes up the layers.
        std::fs::remove_file(root.join("testing.rs")).unwrap();
        assert_eq!(
            problems(&root, "x/src", Read::All, &layers),
            vec![
                "a circle in the crate: high -> low (x/src/high.rs); low -> high (x/src/low.rs)"
                    .to_owned(),
                "x/src: low uses high, which is not in a lower layer (x/src/low.rs)".to_owned()
            ]
        );
        std::fs::remove_dir_all(&root).unwrap();
    }
}
