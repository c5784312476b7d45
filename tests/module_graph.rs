//! ARCHITECTURE.md's dependency list, held to the code: the rooms of every crate, which
//! rooms each imports, and that no module imports a sibling that imports it back.
//!
//! Cargo keeps the crates in order (a crate cannot name one above it); inside a crate
//! nothing but this test does. For each room (a top-level module of a crate: its file and
//! its folder) the production code is read (comments and test-only modules aside) and
//! every path into another room is collected: `crate::ROOM`, `edgesight_CRATE::ROOM` and
//! `edgesight::ROOM`. The test fails when a room imports a room its line does not name, or
//! names one it no longer imports, or when a line names a room above it: the list is read
//! top to bottom, so that no two rooms import each other. Inside each crate, a module that
//! imports a sibling (neither is the other's ancestor) which imports it back, directly or
//! through others, fails it too.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// The workspace's crates, top to bottom: each crate's package name and source folder.
const CRATES: &[(&str, &str)] = &[
    ("edgesight", "src"),
    ("edgesight-http", "crates/http/src"),
    ("edgesight-capture", "crates/capture/src"),
    ("edgesight-core", "crates/core/src"),
    ("edgesight-frame", "crates/frame/src"),
];

/// The binary's files, which reach the library only as `edgesight::…`: one line of the
/// list, not rooms of their own.
const BINARY: &[&str] = &["main", "cli", "commands", "bench"];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// One room as ARCHITECTURE.md lists it.
#[derive(Debug)]
struct Listed {
    krate: String,
    /// Its place in the list, top first.
    line: usize,
    imports: BTreeSet<String>,
}

/// The dependency list: the fenced block under "## Dependency direction". A line that
/// starts in the first column names a crate; the indented lines under it are
/// `room[, room] ─► room (why), room…` or `─► nothing`.
fn listed() -> BTreeMap<String, Listed> {
    let text = std::fs::read_to_string(root().join("ARCHITECTURE.md")).expect("ARCHITECTURE.md");
    let section = text
        .split("## Dependency direction")
        .nth(1)
        .expect("ARCHITECTURE.md has a section \"Dependency direction\"");
    let block = section
        .split("```")
        .nth(1)
        .expect("the dependency list is a fenced block");
    let mut rooms = BTreeMap::new();
    let mut krate = String::new();
    for (line, text) in block.lines().filter(|l| !l.trim().is_empty()).enumerate() {
        if !text.starts_with(' ') {
            krate = text
                .split_whitespace()
                .next()
                .unwrap_or_default()
                .to_string();
            continue;
        }
        let (names, imports) = text
            .split_once('─')
            .map(|(a, b)| (a, b.trim_start_matches(['─', '►', ' '])))
            .unwrap_or_else(|| panic!("dependency list: no ─► in {text:?}"));
        let imports: BTreeSet<String> = if imports.starts_with("nothing") {
            BTreeSet::new()
        } else {
            without_parentheses(imports)
                .split(',')
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
                .collect()
        };
        for name in names.split(',').map(str::trim) {
            if is_binary_file(name) {
                continue;
            }
            let previous = rooms.insert(
                name.to_string(),
                Listed {
                    krate: krate.clone(),
                    line,
                    imports: imports.clone(),
                },
            );
            assert!(
                previous.is_none(),
                "dependency list: {name} is listed twice"
            );
        }
    }
    rooms
}

fn is_binary_file(name: &str) -> bool {
    let stem = name.trim_end_matches('/').trim_end_matches(".rs");
    BINARY.contains(&stem)
}

fn without_parentheses(text: &str) -> String {
    let mut depth = 0;
    text.chars()
        .filter(|&c| {
            match c {
                '(' => depth += 1,
                ')' => {
                    depth -= 1;
                    return false;
                }
                _ => {}
            }
            depth == 0
        })
        .collect()
}

/// A source file of a crate and its module path (`pipeline::motion::control`).
struct Source {
    krate: &'static str,
    module: Vec<String>,
    /// The file's production code: comments and test-only modules taken out.
    code: String,
}

fn rs_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            rs_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The module path of `file` under a crate's `src`.
fn module_of(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).expect("a file of the crate");
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    let last = parts.pop().expect("a file name");
    match last.as_str() {
        "lib.rs" | "main.rs" if parts.is_empty() => {
            if last == "main.rs" {
                parts.push("main".into());
            }
        }
        "mod.rs" => {}
        _ => parts.push(last.trim_end_matches(".rs").to_string()),
    }
    parts
}

/// `code` without comments (a doc link is no import) and without the modules it declares
/// under `#[cfg(test)]`, whose names are added to `test_only`.
fn production(code: &str, test_only: &mut BTreeSet<String>) -> String {
    let lines: Vec<&str> = code
        .lines()
        .map(|l| match l.find("//") {
            Some(at) if !l[..at].contains('"') => &l[..at],
            _ => l,
        })
        .collect();
    let mut out = String::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i].trim();
        if line == "#[cfg(test)]" {
            let mut j = i + 1;
            while j < lines.len() && lines[j].trim().starts_with("#[") {
                j += 1;
            }
            let item = lines.get(j).map(|l| l.trim()).unwrap_or_default();
            let item = item.strip_prefix("pub(crate) ").unwrap_or(item);
            if let Some(name) = item.strip_prefix("mod ") {
                if let Some(name) = name.strip_suffix(';') {
                    test_only.insert(name.trim().to_string());
                    i = j + 1;
                    continue;
                }
                // An inline module: skipped to its closing brace.
                let mut depth = 0i32;
                let mut k = j;
                loop {
                    for c in lines[k].chars() {
                        match c {
                            '{' => depth += 1,
                            '}' => depth -= 1,
                            _ => {}
                        }
                    }
                    k += 1;
                    if depth <= 0 || k >= lines.len() {
                        break;
                    }
                }
                i = k;
                continue;
            }
        }
        out.push_str(lines[i]);
        out.push('\n');
        i += 1;
    }
    out
}

/// Every crate's production files.
fn sources() -> Vec<Source> {
    let mut out = Vec::new();
    for &(krate, dir) in CRATES {
        let src = root().join(dir);
        let mut files = Vec::new();
        rs_files(&src, &mut files);
        files.sort();
        // Declarations under #[cfg(test)], by the folder their files are in.
        let mut test_only: BTreeSet<PathBuf> = BTreeSet::new();
        let mut read = Vec::new();
        for file in files {
            let text = std::fs::read_to_string(&file).expect("a source file");
            let mut names = BTreeSet::new();
            let code = production(&text, &mut names);
            let folder = match file.file_name().and_then(|n| n.to_str()) {
                Some("mod.rs" | "lib.rs" | "main.rs") => file.parent().unwrap().to_path_buf(),
                _ => file.with_extension(""),
            };
            for name in names {
                test_only.insert(folder.join(&name));
            }
            read.push((file, code));
        }
        for (file, code) in read {
            let tested = test_only
                .iter()
                .any(|t| file.starts_with(t) || file == t.with_extension("rs"));
            if !tested {
                out.push(Source {
                    krate,
                    module: module_of(&src, &file),
                    code,
                });
            }
        }
    }
    out
}

/// Each path's segments after `prefix` (`crate::a::b` → `[a, b]`), `{a, b}` groups opened.
fn paths_after<'a>(code: &'a str, prefix: &str) -> Vec<Vec<&'a str>> {
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(at) = code[from..].find(prefix).map(|at| from + at) {
        let before = code[..at].chars().next_back();
        from = at + prefix.len();
        let rest = &code[from..];
        // Inside a longer path (`$crate::`, `super::super::`): not a path of its own.
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$' || c == ':') {
            continue;
        }
        let mut segments = Vec::new();
        let mut tail = rest;
        loop {
            let end = tail
                .find(|c: char| !(c.is_alphanumeric() || c == '_'))
                .unwrap_or(tail.len());
            if end == 0 {
                if let Some(group) = tail.strip_prefix('{') {
                    let close = group.find('}').unwrap_or(group.len());
                    for item in group[..close].split(',') {
                        let name = item.trim().split("::").next().unwrap_or_default().trim();
                        if !name.is_empty() {
                            let mut s = segments.clone();
                            s.push(name);
                            out.push(s);
                        }
                    }
                }
                break;
            }
            segments.push(&tail[..end]);
            tail = &tail[end..];
            match tail.strip_prefix("::") {
                Some(t) => tail = t,
                None => break,
            }
        }
        if !segments.is_empty() {
            out.push(segments);
        }
    }
    out
}

fn lib_name(krate: &str) -> String {
    krate.replace('-', "_")
}

/// Which rooms each room imports, from the code: room → (crate, imports).
fn imports(sources: &[Source]) -> BTreeMap<String, (String, BTreeSet<String>)> {
    let rooms_of: BTreeMap<&str, BTreeSet<String>> = CRATES
        .iter()
        .map(|&(krate, _)| {
            let rooms = sources
                .iter()
                .filter(|s| s.krate == krate && !s.module.is_empty())
                .map(|s| s.module[0].clone())
                .filter(|m| !(krate == "edgesight" && BINARY.contains(&m.as_str())))
                .collect();
            (krate, rooms)
        })
        .collect();
    let every_room: BTreeSet<&String> = rooms_of.values().flatten().collect();
    let mut out: BTreeMap<String, (String, BTreeSet<String>)> = BTreeMap::new();
    for s in sources {
        let Some(room) = s.module.first() else {
            continue;
        };
        if !rooms_of[s.krate].contains(room) {
            continue;
        }
        let entry = out
            .entry(room.clone())
            .or_insert_with(|| (s.krate.to_string(), BTreeSet::new()));
        let mut found: Vec<String> = paths_after(&s.code, "crate::")
            .into_iter()
            .filter_map(|p| p.first().map(|r| r.to_string()))
            .filter(|r| rooms_of[s.krate].contains(r))
            .collect();
        for &(krate, _) in CRATES {
            let prefix = format!("{}::", lib_name(krate));
            for p in paths_after(&s.code, &prefix) {
                if let Some(r) = p.first().map(|r| r.to_string()) {
                    if every_room.contains(&r) {
                        found.push(r);
                    }
                }
            }
        }
        entry.1.extend(found.into_iter().filter(|r| r != room));
    }
    out
}

#[test]
fn the_dependency_list_is_the_code() {
    let listed = listed();
    let sources = sources();
    let actual = imports(&sources);
    let mut problems = String::new();
    for (room, (krate, imports)) in &actual {
        let Some(l) = listed.get(room) else {
            let _ = writeln!(problems, "{room} ({krate}): not in the list");
            continue;
        };
        if l.krate != *krate {
            let _ = writeln!(problems, "{room}: listed under {}, is in {krate}", l.krate);
        }
        let missing: Vec<_> = imports.difference(&l.imports).collect();
        let extra: Vec<_> = l.imports.difference(imports).collect();
        if !missing.is_empty() {
            let _ = writeln!(problems, "{room} also imports {missing:?}");
        }
        if !extra.is_empty() {
            let _ = writeln!(problems, "{room} no longer imports {extra:?}");
        }
        for i in &l.imports {
            match listed.get(i) {
                None => {
                    let _ = writeln!(problems, "{room}'s line names {i}, which is no room");
                }
                Some(below) if below.line <= l.line => {
                    let _ = writeln!(problems, "{room} imports {i}, which is listed above it");
                }
                Some(_) => {}
            }
        }
    }
    for room in listed.keys() {
        if !actual.contains_key(room) {
            let _ = writeln!(problems, "{room} is listed but no crate has it");
        }
    }
    assert!(
        problems.is_empty(),
        "ARCHITECTURE.md's dependency list and the code differ:\n{problems}"
    );
}

/// The module a path names: the longest prefix of `path` that is a module of `krate`.
fn resolve(modules: &BTreeSet<Vec<String>>, path: &[String]) -> Option<Vec<String>> {
    (1..=path.len())
        .rev()
        .map(|n| path[..n].to_vec())
        .find(|p| modules.contains(p))
}

#[test]
fn no_module_imports_a_sibling_that_imports_it_back() {
    let sources = sources();
    let mut cycles = Vec::new();
    for &(krate, _) in CRATES {
        let mine: Vec<&Source> = sources.iter().filter(|s| s.krate == krate).collect();
        let modules: BTreeSet<Vec<String>> = mine.iter().map(|s| s.module.clone()).collect();
        let mut edges: BTreeMap<Vec<String>, BTreeSet<Vec<String>>> = BTreeMap::new();
        for s in &mine {
            let mut targets = Vec::new();
            for p in paths_after(&s.code, "crate::") {
                let p: Vec<String> = p.iter().map(|x| x.to_string()).collect();
                targets.extend(resolve(&modules, &p));
            }
            for p in paths_after(&s.code, "super::") {
                // `super::` from a file is its parent module; `super::super::` one more.
                let mut base = s.module.clone();
                base.pop();
                let mut p: Vec<String> = p.iter().map(|x| x.to_string()).collect();
                while p.first().is_some_and(|x| x == "super") {
                    p.remove(0);
                    base.pop();
                }
                base.extend(p);
                targets.extend(resolve(&modules, &base));
            }
            for t in targets {
                let related = t.starts_with(&s.module) || s.module.starts_with(&t);
                if !related {
                    edges.entry(s.module.clone()).or_default().insert(t);
                }
            }
        }
        // A cycle is a module reachable from one of its own targets.
        for (from, targets) in &edges {
            for t in targets {
                let mut seen = BTreeSet::new();
                let mut stack = vec![t.clone()];
                while let Some(m) = stack.pop() {
                    if &m == from {
                        cycles.push(format!("{krate}: {} ⇄ {}", from.join("::"), t.join("::")));
                        break;
                    }
                    if seen.insert(m.clone()) {
                        stack.extend(edges.get(&m).into_iter().flatten().cloned());
                    }
                }
            }
        }
    }
    assert!(
        cycles.is_empty(),
        "modules that import each other (directly or through others):\n{}",
        cycles.join("\n")
    );
}

/// The test's own reading, on code it is given: comments and test modules are not read,
/// grouped imports are opened, a reason in parentheses names no room, and a path is not
/// read again from inside a longer one.
#[test]
fn the_reading_skips_comments_and_test_modules() {
    let mut test_only = BTreeSet::new();
    let code = "use crate::a::B; // crate::c\n/// [`crate::d`]\n#[cfg(test)]\nmod tests {\n    use crate::e;\n}\n#[cfg(test)]\nmod more;\nfn f() { crate::g::h(); }\n";
    let kept = production(code, &mut test_only);
    let found: Vec<_> = paths_after(&kept, "crate::")
        .into_iter()
        .map(|p| p.join("::"))
        .collect();
    assert_eq!(found, ["a::B", "g::h"]);
    assert_eq!(test_only, BTreeSet::from(["more".to_string()]));
    let grouped: Vec<_> = paths_after("use crate::{x::Y, z};", "crate::")
        .into_iter()
        .map(|p| p.join("::"))
        .collect();
    assert_eq!(grouped, ["x", "z"]);
    let nested: Vec<_> = paths_after("use super::super::a::B;", "super::")
        .into_iter()
        .map(|p| p.join("::"))
        .collect();
    assert_eq!(nested, ["super::a::B"]);
    assert_eq!(
        without_parentheses("a (why, more), b"),
        "a , b",
        "a reason in parentheses is no room"
    );
}
