//! The repository's references all lead somewhere; and the check finds each kind of dangling
//! reference in a tree made to have them.

use std::path::{Path, PathBuf};

use dcs_docs_check::{Problem, check};

fn repository_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("the repository root")
}

#[test]
fn every_reference_in_the_repository_leads_somewhere() {
    let problems = check(&repository_root()).expect("the repository is readable");
    let list: Vec<String> = problems.iter().map(Problem::to_string).collect();
    assert!(
        problems.is_empty(),
        "{} references lead nowhere:\n{}",
        problems.len(),
        list.join("\n")
    );
}

/// A directory under the system's temporary directory, removed on drop.
struct Tree(PathBuf);

impl Tree {
    fn new(name: &str) -> Self {
        let dir =
            std::env::temp_dir().join(format!("dcs-docs-check-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("temporary directory");
        Self(dir)
    }

    /// Writes `text` with `@` standing for the section sign and `^` for a backtick (so that
    /// this file cites and names nothing itself).
    fn file(&self, rel: &str, text: &str) {
        let path = self.0.join(rel);
        std::fs::create_dir_all(path.parent().expect("a parent")).expect("directories");
        std::fs::write(path, placeholders(text)).expect("written");
    }
}

/// `@` → the section sign, `^` → a backtick, `OUT` → a path outside the repository.
fn placeholders(text: &str) -> String {
    text.replace('@', "§")
        .replace('^', "`")
        .replace("OUT", concat!("..", "/shared/", "DESIGN", ".md"))
}

impl Drop for Tree {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn each_kind_of_dangling_reference_is_reported_with_its_line() {
    let tree = Tree::new("dangling");
    tree.file(
        "docs/ARCHITECTURE.md",
        "# Architecture\n\n## 1. The parts\n\n### 1.1 Crates\n\nAs @1.1 says; @2 is not here.\n\n## 1. Again\n",
    );
    tree.file(
        "docs/doris-protocols.md",
        "# Doris\n\n## 4. Stream Load\n\n### 4.3 2PC\n",
    );
    tree.file("runner/src/lib.rs", "//! The runner.\n");
    tree.file(
        "README.md",
        "# dcs\n\n\
             [good](docs/ARCHITECTURE.md#11-crates) [gone](docs/missing.md)\n\
             [no anchor](docs/ARCHITECTURE.md#9-nothing) [self](#dcs) [web](https://example.com/x.md)\n\
             ^[in code](nowhere.md)^\n\
             docs/doris-protocols.md @4.3 and @4.1–@4.3; ARCHITECTURE.md @1.2\n\
             See OUT and ^runner/src/lib.rs^, ^runner/src/gone.rs:3^.\n\
             Bare @3.5 here.\n",
    );
    tree.file(
        "runner/src/sink.rs",
        "//! Loads (doris-protocols.md\n//! @4.4), see ^src/lib.rs^ and ^runner/src/lib.rs^.\n",
    );

    let problems = check(&tree.0).expect("readable");
    let got: Vec<String> = problems.iter().map(Problem::to_string).collect();
    // With the placeholders of the tree.
    let expected: Vec<String> = [
        "README.md:3: link to docs/missing.md: docs/missing.md does not exist",
        "README.md:4: link to docs/ARCHITECTURE.md#9-nothing: docs/ARCHITECTURE.md has no heading #9-nothing",
        "README.md:6: ARCHITECTURE.md @1.2: docs/ARCHITECTURE.md has no section 1.2",
        "README.md:6: doris-protocols.md @4.1: docs/doris-protocols.md has no section 4.1",
        "README.md:7: OUT is not in the repository: a path outside the repository; point into docs/",
        "README.md:7: ^runner/src/gone.rs^ does not exist",
        "README.md:8: @3.5 names no document: write docs/ARCHITECTURE.md @3.5 or docs/doris-protocols.md @3.5",
        "docs/ARCHITECTURE.md:7: ARCHITECTURE.md @2: docs/ARCHITECTURE.md has no section 2",
        "docs/ARCHITECTURE.md:9: section 1 is numbered twice (first at line 3)",
        "runner/src/sink.rs:2: doris-protocols.md @4.4: docs/doris-protocols.md has no section 4.4",
    ]
    .into_iter()
    .map(placeholders)
    .collect();
    assert_eq!(got, expected);
}
