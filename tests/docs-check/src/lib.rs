//! Every reference in the repository leads somewhere: a check run as a test.
//!
//! [`check`] reads the repository's text files (those git tracks or would track; every file
//! outside `target/`, `.git/` and `node_modules/` when git is not there) and reports, with
//! `file:line`:
//!
//! - a relative Markdown link (`[..](path#anchor)`) to a file that does not exist, or to a
//!   heading anchor the Markdown file does not have;
//! - a section citation (`docs/ARCHITECTURE.md §n[.m]`, `docs/doris-protocols.md §n[.m]`, ranges
//!   and lists included) of a section the document does not number, a section number that names
//!   no document (outside those two documents, where it means the document itself), and a
//!   section number a document gives twice;
//! - a repository path in backticks (`runner/src/pipeline.rs`) that exists neither from the
//!   root nor from the file's directory or one above it;
//! - a reference to a file outside the repository ([`refs::OUTSIDE`]).
//!
//! Pure parsing lives in [`markdown`] and [`refs`]; this module reads files and resolves paths.

pub mod markdown;
pub mod refs;

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Component, Path, PathBuf};
use std::process::Command;

/// Directories never read: build output, git's own, downloaded packages.
const SKIPPED_DIRS: [&str; 4] = ["target", ".git", "node_modules", "__pycache__"];
/// Files larger than this are data, not documentation.
const MAX_TEXT_BYTES: u64 = 4 * 1024 * 1024;
/// Where the cited documents live.
const DOCS_DIR: &str = "docs";

/// A reference that leads nowhere.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Problem {
    /// The file, relative to the repository root, with `/` separators.
    pub file: String,
    /// 1-based line.
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.file, self.line, self.message)
    }
}

/// The repository's text files, by path relative to the root.
struct Repo {
    root: PathBuf,
    files: BTreeMap<String, String>,
}

/// Checks every reference in the repository at `root`; the problems sorted by file and line.
///
/// # Errors
/// When the repository cannot be read.
pub fn check(root: &Path) -> std::io::Result<Vec<Problem>> {
    let repo = Repo::read(root)?;
    let top_dirs = repo.top_dirs();
    let mut problems: Vec<Problem> = repo
        .files
        .iter()
        .flat_map(|(file, text)| {
            repo.check_file(file, text, &top_dirs)
                .into_iter()
                .map(|(line, message)| Problem {
                    file: file.clone(),
                    line,
                    message,
                })
        })
        .collect();
    problems.sort();
    problems.dedup();
    Ok(problems)
}

/// The cited document a file is, if it is one (its bare `§n` mean itself).
fn own_document(file: &str) -> Option<&'static str> {
    refs::CITED_DOCS
        .into_iter()
        .find(|doc| file == format!("{DOCS_DIR}/{doc}"))
}

impl Repo {
    /// The problems of one file, as (line, message).
    fn check_file(&self, file: &str, text: &str, top_dirs: &[String]) -> Vec<(usize, String)> {
        let mut out = Vec::new();
        let at = |offset: usize| refs::line_of(text, offset);
        if file.ends_with(".md") {
            for link in markdown::links(text) {
                if let Some(message) = self.follow_link(file, &link.target) {
                    out.push((link.line, message));
                }
            }
        }
        let cited = refs::citations(text);
        for c in &cited {
            if let Some(message) = self.find_section(c.doc, &c.section) {
                out.push((at(c.offset), message));
            }
        }
        let own = own_document(file);
        for offset in refs::bare_sections(text, &cited) {
            let number = text[offset + '§'.len_utf8()..]
                .split(|c: char| !(c.is_ascii_digit() || c == '.'))
                .next()
                .unwrap_or("")
                .trim_end_matches('.');
            let problem = match own {
                Some(doc) => self.find_section(doc, number),
                None => Some(format!(
                    "§{number} names no document: write docs/ARCHITECTURE.md §{number} or docs/doris-protocols.md §{number}"
                )),
            };
            out.extend(problem.map(|message| (at(offset), message)));
        }
        // One problem per reference: a path outside is not reported again for the file name in it.
        let mut reported_to = 0;
        for (offset, why) in refs::outside_references(text) {
            if offset < reported_to {
                continue;
            }
            let what: String = text[offset..]
                .chars()
                .take_while(|c| !c.is_whitespace() && !"`)]'\"".contains(*c))
                .collect();
            reported_to = offset + what.len();
            out.push((
                at(offset),
                format!("{what} is not in the repository: {why}"),
            ));
        }
        for (offset, path) in refs::code_paths(text, top_dirs) {
            if !self.resolves_from(file, &path) {
                out.push((at(offset), format!("`{path}` does not exist")));
            }
        }
        if own.is_some() {
            let mut seen: BTreeMap<String, usize> = BTreeMap::new();
            for h in markdown::headings(text) {
                let Some(number) = h.number else { continue };
                if let Some(first) = seen.insert(number.clone(), h.line) {
                    out.push((
                        h.line,
                        format!("section {number} is numbered twice (first at line {first})"),
                    ));
                }
            }
        }
        out
    }

    fn read(root: &Path) -> std::io::Result<Self> {
        let paths = match git_files(root) {
            Some(paths) => paths,
            None => {
                let mut paths = Vec::new();
                walk(root, root, &mut paths)?;
                paths
            }
        };
        let mut files = BTreeMap::new();
        for rel in paths {
            let path = root.join(&rel);
            let Ok(meta) = std::fs::metadata(&path) else {
                continue; // deleted in the work tree, still in the index
            };
            if !meta.is_file() || meta.len() > MAX_TEXT_BYTES {
                continue;
            }
            let bytes = std::fs::read(&path)?;
            if bytes.contains(&0) {
                continue;
            }
            if let Ok(text) = String::from_utf8(bytes) {
                files.insert(rel, text);
            }
        }
        Ok(Self {
            root: root.to_owned(),
            files,
        })
    }

    /// The repository's top-level directories.
    fn top_dirs(&self) -> Vec<String> {
        let mut dirs: Vec<String> = self
            .files
            .keys()
            .filter_map(|f| f.split_once('/').map(|(d, _)| d.to_owned()))
            .collect();
        dirs.dedup();
        dirs
    }

    fn exists(&self, rel: &Path) -> bool {
        self.root.join(rel).exists()
    }

    /// Whether `path` exists from the root, or from `file`'s directory or one above it.
    fn resolves_from(&self, file: &str, path: &str) -> bool {
        let mut dir = Path::new(file).parent();
        while let Some(d) = dir {
            if normalize(&d.join(path)).is_some_and(|p| self.exists(&p)) {
                return true;
            }
            dir = d.parent();
        }
        false
    }

    /// Why a link from `file` leads nowhere, if it does.
    fn follow_link(&self, file: &str, target: &str) -> Option<String> {
        let is_external =
            target.contains("://") || target.starts_with("mailto:") || target.starts_with("//");
        if is_external {
            return None;
        }
        let (path, anchor) = match target.split_once('#') {
            Some((p, a)) => (p, Some(a)),
            None => (target, None),
        };
        let path = path.split('?').next().unwrap_or(path).replace("%20", " ");
        let rel = if path.is_empty() {
            PathBuf::from(file)
        } else if let Some(from_root) = path.strip_prefix('/') {
            PathBuf::from(from_root)
        } else {
            Path::new(file)
                .parent()
                .unwrap_or(Path::new(""))
                .join(&path)
        };
        let Some(rel) = normalize(&rel) else {
            return Some(format!("link to {target} leaves the repository"));
        };
        if !self.exists(&rel) {
            return Some(format!(
                "link to {target}: {} does not exist",
                slashed(&rel)
            ));
        }
        let anchor = anchor.filter(|a| !a.is_empty())?;
        let key = slashed(&rel);
        let text = self.files.get(&key).filter(|_| key.ends_with(".md"))?;
        let anchors: Vec<String> = markdown::headings(text)
            .into_iter()
            .map(|h| h.anchor)
            .collect();
        (!anchors.iter().any(|a| a == anchor))
            .then(|| format!("link to {target}: {key} has no heading #{anchor}"))
    }

    /// Why `doc §section` leads nowhere, if it does.
    fn find_section(&self, doc: &str, section: &str) -> Option<String> {
        let key = format!("{DOCS_DIR}/{doc}");
        let Some(text) = self.files.get(&key) else {
            return Some(format!("{doc} §{section}: {key} does not exist"));
        };
        let found = markdown::headings(text)
            .iter()
            .any(|h| h.number.as_deref() == Some(section));
        (!found).then(|| format!("{doc} §{section}: {key} has no section {section}"))
    }
}

/// `git ls-files` (tracked, and untracked but not ignored), or `None` without git or outside a
/// work tree.
fn git_files(root: &Path) -> Option<Vec<String>> {
    let output = Command::new("git")
        .arg("-C")
        .arg(root)
        .args([
            "ls-files",
            "-z",
            "--cached",
            "--others",
            "--exclude-standard",
        ])
        .output()
        .ok()?;
    if !output.status.success() {
        return None;
    }
    let listing = String::from_utf8(output.stdout).ok()?;
    let mut files: Vec<String> = listing
        .split('\0')
        .filter(|f| !f.is_empty())
        .filter(|f| !f.split('/').any(|part| SKIPPED_DIRS.contains(&part)))
        .map(str::to_owned)
        .collect();
    files.sort();
    files.dedup();
    Some(files)
}

fn walk(root: &Path, dir: &Path, out: &mut Vec<String>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name();
        let kind = entry.file_type()?;
        if kind.is_dir() {
            if !SKIPPED_DIRS.iter().any(|s| name == *s) {
                walk(root, &entry.path(), out)?;
            }
        } else if kind.is_file()
            && let Ok(rel) = entry.path().strip_prefix(root)
        {
            out.push(slashed(rel));
        }
    }
    out.sort();
    Ok(())
}

/// `a/./b/../c` → `a/c`; `None` when it climbs above the root.
fn normalize(path: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            Component::Normal(p) => out.push(p),
            Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    Some(out)
}

fn slashed(path: &Path) -> String {
    path.components()
        .map(|c| c.as_os_str().to_string_lossy())
        .collect::<Vec<_>>()
        .join("/")
}
