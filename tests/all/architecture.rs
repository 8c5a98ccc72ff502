//! The shape of the code, checked: the module graph of each crate has no cycle (at file
//! granularity, the same rule as `modcycles.py`), one function builds every wasmtime store,
//! each WIT interface is written once, and the build resolves every WIT package.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

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

type Module = Vec<String>;

/// The modules of a crate's `src/`, by path (`lib.rs`, `main.rs` and `mod.rs` name their
/// directory's module).
fn modules(src: &Path) -> BTreeMap<Module, PathBuf> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    files
        .into_iter()
        .map(|f| {
            let rel = f.strip_prefix(src).unwrap().with_extension("");
            let mut m: Module = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            if matches!(m.last().map(String::as_str), Some("mod" | "lib" | "main")) {
                m.pop();
            }
            (m, f)
        })
        .collect()
}

/// The longest prefix of `path` that is a module.
fn resolve(path: &[String], mods: &BTreeMap<Module, PathBuf>) -> Option<Module> {
    (1..=path.len())
        .rev()
        .map(|n| path[..n].to_vec())
        .find(|p| mods.contains_key(p))
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The `a::b::c` path that follows `at` in `text`.
fn path_after(text: &str) -> Vec<String> {
    let mut parts = Vec::new();
    let mut rest = text;
    while let Some(r) = rest.strip_prefix("::") {
        let ident: String = r.chars().take_while(|c| is_ident(*c)).collect();
        if ident.is_empty() {
            break;
        }
        rest = &r[ident.len()..];
        parts.push(ident);
    }
    parts
}

/// The child modules a file declares (`mod c;`, `pub(crate) mod c;`), not inline ones.
fn declared_children(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|line| {
            let mut l = line.trim_start();
            if let Some(rest) = l.strip_prefix("pub") {
                l = rest.trim_start();
                if l.starts_with('(') {
                    l = l[l.find(')')? + 1..].trim_start();
                }
            }
            let name = l.strip_prefix("mod ")?.trim_end().strip_suffix(';')?.trim();
            name.chars().all(is_ident).then(|| name.to_string())
        })
        .collect()
}

/// The modules a file names through `crate::` paths (groups expanded), `super::` paths, and
/// paths into the children it declares (`mod process;` then `use process::Stdio`). Text
/// after `#[cfg(test)]` is left out, as test modules may reach anywhere.
fn edges(module: &Module, file: &Path, mods: &BTreeMap<Module, PathBuf>) -> BTreeSet<Module> {
    let text = std::fs::read_to_string(file).unwrap();
    let text = text.split("#[cfg(test)]").next().unwrap();
    let mut out = BTreeSet::new();
    let word_at = |i: usize, w: &str| {
        text[i..].starts_with(w) && (i == 0 || !is_ident(text[..i].chars().last().unwrap()))
    };
    for (i, _) in text.match_indices("crate::") {
        if !word_at(i, "crate") {
            continue;
        }
        let base = path_after(&text[i + "crate".len()..]);
        let after = &text[i + "crate".len() + base.iter().map(|p| p.len() + 2).sum::<usize>()..];
        if let Some(group) = after.strip_prefix("::{") {
            let group = &group[..group.find('}').unwrap_or(group.len())];
            for item in group.split(',') {
                let item = item.trim().split(" as ").next().unwrap_or("");
                let mut parts = base.clone();
                parts.extend(
                    item.split("::")
                        .filter(|p| !p.is_empty() && *p != "self")
                        .map(str::to_string),
                );
                out.extend(resolve(&parts, mods));
            }
        }
        out.extend(resolve(&base, mods));
    }
    let dir_module = matches!(
        file.file_name().and_then(|n| n.to_str()),
        Some("mod.rs" | "lib.rs" | "main.rs")
    );
    let parent: Module = if dir_module {
        module.clone()
    } else {
        module[..module.len().saturating_sub(1)].to_vec()
    };
    for (i, _) in text.match_indices("super::") {
        if !word_at(i, "super") {
            continue;
        }
        let rest = path_after(&text[i + "super".len()..]);
        // `super::*` and `super::{..}` name no module of their own (as in modcycles.py): an
        // edge to the parent from every child that takes its items would fold sibling
        // cycles into the parent's family, where they are forgiven.
        if rest.is_empty() {
            continue;
        }
        let mut base = if dir_module {
            parent[..parent.len().saturating_sub(1)].to_vec()
        } else {
            parent.clone()
        };
        base.extend(rest);
        out.extend(resolve(&base, mods));
    }
    for child in declared_children(text) {
        for (i, _) in text.match_indices(&format!("{child}::")) {
            let before = text[..i].strip_suffix("self::").unwrap_or(&text[..i]);
            if before.ends_with(|c: char| is_ident(c) || c == ':') {
                continue;
            }
            let mut path = module.clone();
            path.push(child.clone());
            path.extend(path_after(&text[i + child.len()..]));
            out.extend(resolve(&path, mods));
        }
    }
    out.remove(module);
    out.remove(&Vec::new());
    out
}

/// Strongly connected sets of more than one module (Tarjan), less those that stay inside
/// one family: a parent and the children it declares may use each other (they are one unit),
/// a circle that reaches outside one such family may not.
fn cycles(graph: &BTreeMap<Module, BTreeSet<Module>>) -> Vec<Vec<Module>> {
    struct State<'a> {
        graph: &'a BTreeMap<Module, BTreeSet<Module>>,
        index: BTreeMap<&'a Module, usize>,
        low: BTreeMap<&'a Module, usize>,
        stack: Vec<&'a Module>,
        on: BTreeSet<&'a Module>,
        next: usize,
        found: Vec<Vec<Module>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a Module) {
        s.index.insert(v, s.next);
        s.low.insert(v, s.next);
        s.next += 1;
        s.stack.push(v);
        s.on.insert(v);
        for w in s.graph.get(v).into_iter().flatten() {
            let Some((w, _)) = s.graph.get_key_value(w) else {
                continue;
            };
            if !s.index.contains_key(w) {
                visit(s, w);
                let lw = s.low[w];
                let lv = s.low.get_mut(v).unwrap();
                *lv = (*lv).min(lw);
            } else if s.on.contains(w) {
                let iw = s.index[w];
                let lv = s.low.get_mut(v).unwrap();
                *lv = (*lv).min(iw);
            }
        }
        if s.low[v] == s.index[v] {
            let mut comp = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on.remove(w);
                comp.push(w.clone());
                if w == v {
                    break;
                }
            }
            if comp.len() > 1 {
                s.found.push(comp);
            }
        }
    }
    let mut s = State {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        next: 0,
        found: Vec::new(),
    };
    for v in graph.keys() {
        if !s.index.contains_key(v) {
            visit(&mut s, v);
        }
    }
    s.found
        .into_iter()
        .filter(|c| !c.iter().any(|m| c.iter().all(|o| o.starts_with(m))))
        .collect()
}

#[test]
fn module_graphs_have_no_cycle() {
    for krate in ["runtime/src", "server/src"] {
        let src = repo().join(krate);
        let mods = modules(&src);
        assert!(mods.len() > 5, "{krate}: too few modules found");
        let graph: BTreeMap<Module, BTreeSet<Module>> = mods
            .iter()
            .map(|(m, f)| (m.clone(), edges(m, f, &mods)))
            .collect();
        let found = cycles(&graph);
        assert!(
            found.is_empty(),
            "{krate}: module cycles: {:?}",
            found
                .iter()
                .map(|c| c.iter().map(|m| m.join("::")).collect::<Vec<_>>())
                .collect::<Vec<_>>()
        );
    }
}

#[test]
fn the_cycle_check_finds_cycles() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path();
    std::fs::create_dir_all(src.join("a")).unwrap();
    std::fs::write(src.join("lib.rs"), "mod a; mod b;").unwrap();
    std::fs::write(src.join("a/mod.rs"), "mod c; use crate::b::X;").unwrap();
    std::fs::write(src.join("a/c.rs"), "fn f() { crate::b::g() }").unwrap();
    std::fs::write(src.join("b.rs"), "use crate::{a::c::Y, z};").unwrap();
    let mods = modules(src);
    let graph: BTreeMap<Module, BTreeSet<Module>> = mods
        .iter()
        .map(|(m, f)| (m.clone(), edges(m, f, &mods)))
        .collect();
    assert_eq!(
        graph[&vec!["b".to_string()]],
        BTreeSet::from([vec!["a".to_string(), "c".to_string()]])
    );
    let found = cycles(&graph);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].len(), 2, "{found:?}");
}

/// A parent's own paths into its children count: `host` uses `job`, `job` uses
/// `host::process`, and `host::process` reaches back to `job` is a cycle even though no
/// `crate::` path names the child; a parent and its children using each other is not.
#[test]
fn the_cycle_check_follows_a_parent_into_its_children() {
    let graph_of = |files: &[(&str, &str)]| {
        let dir = tempfile::tempdir().unwrap();
        for (name, text) in files {
            let path = dir.path().join(name);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        let mods = modules(dir.path());
        let graph: BTreeMap<Module, BTreeSet<Module>> = mods
            .iter()
            .map(|(m, f)| (m.clone(), edges(m, f, &mods)))
            .collect();
        graph
    };
    let m = |s: &str| s.split("::").map(str::to_string).collect::<Module>();
    let family = [
        ("lib.rs", "mod host; mod job;"),
        (
            "host/mod.rs",
            "mod process;\nmod quota;\npub(crate) use process::{Stdio, run};\nfn f(q: self::quota::Q) {}",
        ),
        ("host/process.rs", "pub struct Stdio;"),
        (
            "host/quota.rs",
            "use super::Launch;\nuse super::process::Stdio;",
        ),
        ("job.rs", "use crate::host::run;"),
    ];
    let graph = graph_of(&family);
    assert!(graph[&m("host")].contains(&m("host::process")), "{graph:?}");
    assert!(graph[&m("host")].contains(&m("host::quota")), "{graph:?}");
    assert!(graph[&m("host::quota")].contains(&m("host")), "{graph:?}");
    assert!(cycles(&graph).is_empty(), "a family alone: {graph:?}");
    let mut reaching_out = family.to_vec();
    reaching_out[2] = ("host/process.rs", "use crate::job::StartReport;");
    let graph = graph_of(&reaching_out);
    let found = cycles(&graph);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].contains(&m("job")), "{found:?}");
    // Two siblings that use each other are a cycle, even when both take their parent's
    // items with a glob.
    let siblings = [
        ("lib.rs", "mod e2b;"),
        (
            "e2b/mod.rs",
            "mod control;\nmod lifecycle;\nfn r() { control::a(); lifecycle::b(); }",
        ),
        (
            "e2b/control.rs",
            "use super::*;\nuse super::lifecycle::resume;",
        ),
        (
            "e2b/lifecycle.rs",
            "use super::*;\nuse super::control::{start, Start};",
        ),
    ];
    let found = cycles(&graph_of(&siblings));
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].len(), 2, "{found:?}");
}

/// Lines of the project's Rust code (outside `target/` and test code) that contain `needle`.
fn rust_lines_with(needle: &str) -> Vec<String> {
    let mut files = Vec::new();
    for dir in ["runtime/src", "server/src", "benches"] {
        rust_files(&repo().join(dir), &mut files);
    }
    let mut hits = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        for (n, line) in text.lines().enumerate() {
            if line.contains(needle) && !line.trim_start().starts_with("//") {
                hits.push(format!("{}:{}", f.display(), n + 1));
            }
        }
    }
    hits
}

#[test]
fn one_function_builds_every_store() {
    let hits = rust_lines_with("Store::new(");
    assert_eq!(hits.len(), 1, "{hits:?}");
    assert!(hits[0].contains("runtime/src/host/mod.rs"), "{hits:?}");
}

fn wit_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        // `deps/` holds links to packages that live elsewhere in `wit/`.
        if path.is_dir() && !path.is_symlink() {
            wit_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "wit") {
            out.push(path);
        }
    }
}

#[test]
fn every_wit_interface_is_written_once() {
    let mut files = Vec::new();
    wit_files(&repo().join("wit"), &mut files);
    let mut seen: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        let package = text
            .lines()
            .find_map(|l| l.trim().strip_prefix("package "))
            .unwrap_or("?")
            .trim_end_matches(';')
            .to_string();
        let package_name = package.split('@').next().unwrap().to_string();
        for line in text.lines() {
            if let Some(name) = line.trim().strip_prefix("interface ") {
                let name = name.trim_end_matches('{').trim().to_string();
                seen.entry(name.clone()).or_default().push(package.clone());
                if name == "llm" {
                    assert_eq!(package_name, "wasbox:llm", "{}", f.display());
                }
            }
        }
    }
    assert_eq!(seen["llm"].len(), 1, "{seen:?}");
    assert!(seen.contains_key("process"), "{seen:?}");
}

/// Each package of `wit/` is the `path` of a `bindgen!` in the runtime, which resolves the
/// package on its own (with its `deps/`) while the runtime compiles: one that does not
/// resolve fails the build, and none is left out of it.
#[test]
fn every_wit_package_is_resolved_by_the_build() {
    let wit = repo().join("wit");
    let bindings = std::fs::read_to_string(repo().join("runtime/src/bindings.rs")).unwrap();
    let bound: BTreeSet<String> = bindings
        .lines()
        .filter_map(|l| l.trim().strip_prefix("path: \"../wit/"))
        .map(|rest| rest.split('"').next().unwrap().to_string())
        .collect();
    let mut packages = BTreeSet::new();
    for entry in std::fs::read_dir(&wit).unwrap() {
        let dir = entry.unwrap().path();
        if dir.is_dir() {
            packages.insert(dir.file_name().unwrap().to_string_lossy().into_owned());
        }
    }
    assert!(packages.len() >= 4, "{packages:?}");
    let unbound: Vec<_> = packages.difference(&bound).collect();
    assert!(
        unbound.is_empty(),
        "WIT packages no `bindgen!` in runtime/src/bindings.rs resolves: {unbound:?}"
    );
}

/// `docs/ARCHITECTURE.md` names every module of both crates, so that a new module is placed
/// in the picture when it is made.
#[test]
fn the_architecture_document_names_every_module() {
    let doc = std::fs::read_to_string(repo().join("docs/ARCHITECTURE.md")).unwrap();
    let words: BTreeSet<&str> = doc
        .split(|c: char| !is_ident(c))
        .filter(|w| !w.is_empty())
        .collect();
    let mut missing = Vec::new();
    for krate in ["runtime/src", "server/src"] {
        for module in modules(&repo().join(krate)).keys() {
            if let Some(name) = module.last()
                && !words.contains(name.as_str())
            {
                missing.push(format!("{krate}: {}", module.join("::")));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "not in docs/ARCHITECTURE.md: {missing:?}"
    );
}

/// Every guest crate with unit tests is among those `.ci/run` tests natively, so that a
/// guest's new test cannot be left out of CI.
#[test]
fn ci_runs_every_guest_crate_that_has_unit_tests() {
    let ci = std::fs::read_to_string(repo().join(".ci/run")).unwrap();
    let guests = repo().join("guest-components");
    let workspace = std::fs::read_to_string(guests.join("Cargo.toml")).unwrap();
    let members: Vec<&str> = workspace
        .split("members = [")
        .nth(1)
        .and_then(|m| m.split(']').next())
        .unwrap()
        .split(',')
        .map(|m| m.trim().trim_matches('"'))
        .filter(|m| !m.is_empty())
        .collect();
    assert!(members.len() > 5, "{members:?}");
    for member in members {
        let mut files = Vec::new();
        rust_files(&guests.join(member).join("src"), &mut files);
        let tested = files
            .iter()
            .any(|f| std::fs::read_to_string(f).unwrap().contains("#[test]"));
        if !tested {
            continue;
        }
        let manifest = std::fs::read_to_string(guests.join(member).join("Cargo.toml")).unwrap();
        let name = manifest
            .lines()
            .find_map(|l| l.strip_prefix("name = "))
            .unwrap()
            .trim_matches('"');
        assert!(
            ci.contains(&format!("-p {name} ")) || ci.contains(&format!("-p {name}\n")),
            "guest crate {name} has unit tests that .ci/run does not run"
        );
    }
}
