//! The rooms of `src/` and who may enter them: every file under `src/` belongs to a room (its
//! first path component: `src/<room>/` or `src/<room>.rs`), and a file's `use` lines and
//! `crate::X::` paths (`linegate::X::` in the binary's `cli/` and `main.rs`; `super::` chains
//! that climb out of a room) are its room's edges to other rooms. The rules:
//!
//! - the rooms form no cycle (a cycle is printed room by room, with a file of each edge);
//! - nothing imports `app` (the daemon's wiring) but `cli`, `demo` and `main`;
//! - `parking_lot` is named only under `src/store/` (the store owns its lock).
//!
//! Comments, strings and character literals are not read. The checker's own tests run it on
//! small made-up sources and graphs, so that it fails when it should.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Rooms that may import `app`.
const MAY_IMPORT_APP: [&str; 3] = ["cli", "demo", "main"];

/// The room of `src/`'s file `rel` (a path relative to `src/`), and its module path.
fn room_and_module(rel: &Path) -> (String, Vec<String>) {
    let mut parts: Vec<String> = rel.iter().map(|p| p.to_string_lossy().into_owned()).collect();
    let file = parts.pop().unwrap_or_default();
    let stem = file.strip_suffix(".rs").unwrap_or(&file).to_owned();
    let crate_root = parts.is_empty() && stem == "lib";
    if stem != "mod" && !crate_root {
        parts.push(stem);
    }
    let room = parts.first().cloned().unwrap_or_else(|| "lib".to_owned());
    (room, parts)
}

/// `text` with comments, string literals and character literals blanked out (newlines kept).
fn code_only(text: &str) -> String {
    let c: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < c.len() {
        let at = |k: usize| c.get(i + k).copied().unwrap_or('\0');
        if ident_char(at(0)) {
            let start = i;
            while i < c.len() && ident_char(c[i]) {
                i += 1;
            }
            let word: String = c[start..i].iter().collect();
            let raw = (word == "r" || word == "br") && matches!(c.get(i), Some('#' | '"'));
            if raw {
                i = skip_raw_string(&c, i, &mut out);
            } else {
                out.push_str(&word);
            }
        } else if at(0) == '/' && at(1) == '/' {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if at(0) == '/' && at(1) == '*' {
            let mut depth = 0;
            while i < c.len() {
                if c[i] == '/' && c.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if c[i] == '*' && c.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    blank(&mut out, c[i]);
                    i += 1;
                }
            }
        } else if at(0) == '"' {
            i += 1;
            while i < c.len() && c[i] != '"' {
                let escaped = c[i] == '\\';
                blank(&mut out, c[i]);
                i += 1;
                if escaped && i < c.len() {
                    blank(&mut out, c[i]);
                    i += 1;
                }
            }
            i += 1;
        } else if at(0) == '\'' && (at(1) == '\\' || at(2) == '\'') {
            // A character literal ('x', '\n', '\''); a lifetime ('a) is code.
            i += if at(1) == '\\' { 3 } else { 2 };
            while i < c.len() && c[i] != '\'' {
                i += 1;
            }
            i += 1;
        } else {
            out.push(c[i]);
            i += 1;
        }
    }
    out
}

/// Skips the raw string whose hashes or quote start at `i`; returns where it ends.
fn skip_raw_string(c: &[char], mut i: usize, out: &mut String) -> usize {
    let mut hashes = 0;
    while c.get(i) == Some(&'#') {
        hashes += 1;
        i += 1;
    }
    i += 1; // the opening quote
    while i < c.len() {
        if c[i] == '"' && (1..=hashes).all(|k| c.get(i + k) == Some(&'#')) {
            return i + 1 + hashes;
        }
        blank(out, c[i]);
        i += 1;
    }
    i
}

fn blank(out: &mut String, ch: char) {
    out.push(if ch == '\n' { '\n' } else { ' ' });
}

fn ident_char(ch: char) -> bool {
    ch.is_alphanumeric() || ch == '_'
}

/// The rooms code of module `module` (a module path under the crate root) names: `root::X`
/// paths and groups `root::{X, Y::…}` for each of `roots`, and `super::` chains that climb to
/// the crate root. `rooms`: the names that are rooms (an item of the crate root that is not a
/// room, as `super::*` from a top-level module, is no edge).
fn named_rooms(
    code: &str,
    module: &[String],
    roots: &[&str],
    rooms: &BTreeSet<String>,
) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let tokens = tokens(code);
    for (k, t) in tokens.iter().enumerate() {
        let before = k.checked_sub(1).map(|p| tokens[p].as_str());
        let starts = before != Some("::");
        if roots.contains(&t.as_str())
            && starts
            && tokens.get(k + 1).map(String::as_str) == Some("::")
        {
            match tokens.get(k + 2).map(String::as_str) {
                Some("{") => found.extend(group_heads(&tokens[k + 3..])),
                Some(name) => {
                    found.insert(name.to_owned());
                }
                None => {}
            }
        }
        if t == "super" && starts {
            let mut supers = 0;
            let mut j = k;
            while tokens.get(j).map(String::as_str) == Some("super")
                && tokens.get(j + 1).map(String::as_str) == Some("::")
            {
                supers += 1;
                j += 2;
            }
            if supers >= module.len() {
                match tokens.get(j).map(String::as_str) {
                    Some("{") => found.extend(group_heads(&tokens[j + 1..])),
                    Some(name) => {
                        found.insert(name.to_owned());
                    }
                    None => {}
                }
            }
        }
    }
    found.retain(|r| rooms.contains(r));
    found
}

/// The first name of each path of a `{…}` group (its tokens after the `{`).
fn group_heads(tokens: &[String]) -> Vec<String> {
    let mut heads = Vec::new();
    let mut depth = 0;
    let mut expect_head = true;
    for t in tokens {
        match t.as_str() {
            "{" => depth += 1,
            "}" if depth == 0 => break,
            "}" => depth -= 1,
            "," if depth == 0 => expect_head = true,
            name if expect_head && depth == 0 => {
                heads.push(name.to_owned());
                expect_head = false;
            }
            _ => {}
        }
    }
    heads
}

/// Identifiers, `::`, and single punctuation characters of `code`.
fn tokens(code: &str) -> Vec<String> {
    let c: Vec<char> = code.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < c.len() {
        if ident_char(c[i]) {
            let start = i;
            while i < c.len() && ident_char(c[i]) {
                i += 1;
            }
            out.push(c[start..i].iter().collect());
        } else if c[i] == ':' && c.get(i + 1) == Some(&':') {
            out.push("::".to_owned());
            i += 2;
        } else {
            if !c[i].is_whitespace() {
                out.push(c[i].to_string());
            }
            i += 1;
        }
    }
    out
}

/// Room → (room it names → a file that names it).
type Graph = BTreeMap<String, BTreeMap<String, String>>;

/// A cycle of `graph`, as the rooms along it (the first again at the end), if there is one.
fn find_cycle(graph: &Graph) -> Option<Vec<String>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        Open,
        Done,
    }
    fn visit(
        room: &str,
        graph: &Graph,
        marks: &mut BTreeMap<String, Mark>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        match marks.get(room) {
            Some(Mark::Done) => return None,
            Some(Mark::Open) => {
                let from = path.iter().position(|r| r == room).unwrap_or(0);
                let mut cycle = path[from..].to_vec();
                cycle.push(room.to_owned());
                return Some(cycle);
            }
            None => {}
        }
        marks.insert(room.to_owned(), Mark::Open);
        path.push(room.to_owned());
        for next in graph.get(room).into_iter().flat_map(BTreeMap::keys) {
            if let Some(c) = visit(next, graph, marks, path) {
                return Some(c);
            }
        }
        path.pop();
        marks.insert(room.to_owned(), Mark::Done);
        None
    }
    let mut marks = BTreeMap::new();
    graph.keys().find_map(|room| visit(room, graph, &mut marks, &mut Vec::new()))
}

/// Each edge into `app` from a room not allowed to import it: `(room, file)`.
fn forbidden_app_imports(graph: &Graph) -> Vec<(String, String)> {
    graph
        .iter()
        .filter(|(room, _)| !MAY_IMPORT_APP.contains(&room.as_str()))
        .filter_map(|(room, edges)| edges.get("app").map(|file| (room.clone(), file.clone())))
        .collect()
}

/// A cycle in words: each edge with a file that makes it.
fn describe(cycle: &[String], graph: &Graph) -> String {
    cycle
        .windows(2)
        .map(|w| format!("{} -> {} ({})", w[0], w[1], graph[&w[0]][&w[1]]))
        .collect::<Vec<_>>()
        .join("\n")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The room graph of the crate's `src/`, and each file's text.
fn crate_graph() -> (Graph, Vec<(PathBuf, String)>) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let texts: Vec<(PathBuf, String)> = files
        .into_iter()
        .map(|f| {
            let text =
                std::fs::read_to_string(&f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
            (f.strip_prefix(&src).unwrap().to_path_buf(), text)
        })
        .collect();
    let rooms: BTreeSet<String> = texts.iter().map(|(rel, _)| room_and_module(rel).0).collect();
    let mut graph = Graph::new();
    for (rel, text) in &texts {
        let (room, module) = room_and_module(rel);
        let binary = room == "cli" || room == "main";
        let roots: &[&str] = if binary { &["linegate"] } else { &["crate"] };
        let edges = graph.entry(room.clone()).or_default();
        for named in named_rooms(&code_only(text), &module, roots, &rooms) {
            if named != room {
                edges.entry(named).or_insert_with(|| format!("src/{}", rel.display()));
            }
        }
    }
    (graph, texts)
}

#[test]
fn the_rooms_form_no_cycle() {
    let (graph, _) = crate_graph();
    assert!(graph.len() > 10, "rooms found: {:?}", graph.keys().collect::<Vec<_>>());
    assert!(graph["app"].contains_key("decide"), "the scan finds the wiring's edges: {graph:?}");
    if let Some(cycle) = find_cycle(&graph) {
        panic!("the rooms form a cycle:\n{}", describe(&cycle, &graph));
    }
}

#[test]
fn only_cli_demo_and_main_import_the_wiring() {
    let (graph, _) = crate_graph();
    assert!(graph["cli"].contains_key("app"), "the binary runs the daemon: {:?}", graph["cli"]);
    let forbidden = forbidden_app_imports(&graph);
    assert!(forbidden.is_empty(), "rooms that import app (room, file): {forbidden:?}");
}

#[test]
fn parking_lot_is_named_only_inside_the_store() {
    let (_, texts) = crate_graph();
    let inside: Vec<&PathBuf> =
        texts.iter().filter(|(_, t)| t.contains("parking_lot")).map(|(rel, _)| rel).collect();
    assert!(!inside.is_empty(), "the store names its lock");
    let outside: Vec<&&PathBuf> = inside.iter().filter(|rel| !rel.starts_with("store")).collect();
    assert!(outside.is_empty(), "parking_lot outside src/store/: {outside:?}");
}

/// The checker itself, on made-up sources and graphs.
mod checker {
    use super::*;

    fn graph(edges: &[(&str, &str)]) -> Graph {
        let mut g = Graph::new();
        for (from, to) in edges {
            g.entry((*from).to_owned()).or_default().insert((*to).to_owned(), format!("{from}.rs"));
            g.entry((*to).to_owned()).or_default();
        }
        g
    }

    fn rooms(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|n| (*n).to_owned()).collect()
    }

    #[test]
    fn a_cycle_is_found_and_printed_and_a_tree_has_none() {
        let g = graph(&[("app", "decide"), ("decide", "store"), ("store", "records")]);
        assert_eq!(find_cycle(&g), None);
        let g = graph(&[("a", "b"), ("b", "c"), ("c", "a"), ("c", "d")]);
        let cycle = find_cycle(&g).expect("a -> b -> c -> a");
        assert_eq!(cycle, ["a", "b", "c", "a"]);
        assert_eq!(describe(&cycle, &g), "a -> b (a.rs)\nb -> c (b.rs)\nc -> a (c.rs)");
        let g = graph(&[("x", "y"), ("y", "x")]);
        assert_eq!(find_cycle(&g).map(|c| c.len()), Some(3));
    }

    #[test]
    fn an_import_of_app_is_forbidden_outside_cli_demo_and_main() {
        let g = graph(&[("cli", "app"), ("demo", "app"), ("control", "app"), ("app", "store")]);
        assert_eq!(forbidden_app_imports(&g), [("control".to_owned(), "control.rs".to_owned())]);
        assert!(forbidden_app_imports(&graph(&[("cli", "app")])).is_empty());
    }

    #[test]
    fn paths_groups_and_climbing_supers_are_edges_and_comments_and_strings_are_not() {
        let text = r##"
            //! Uses `crate::telemetry` in a comment only.
            use crate::store::{SharedStore, Store};
            use crate::{decide::input::DecideBatch, records::{ledger, outbox}};
            /* crate::forward::run() in a block comment */
            fn f() -> crate::config::Config {
                let _ = "crate::audit::view";
                let _ = r#"crate::control::x"#;
                let _ = '"';
                let _ = crate::clock::SystemClock::new();
                fn g<'a>(x: &'a str) -> &'a str { x }
                super::super::replay::run();
                super::sibling::f();
            }
        "##;
        let all = rooms(&[
            "store",
            "decide",
            "records",
            "telemetry",
            "forward",
            "config",
            "audit",
            "control",
            "clock",
            "replay",
            "sibling",
            "ingest",
        ]);
        let module = ["ingest".to_owned(), "live".to_owned()];
        let got = named_rooms(&code_only(text), &module, &["crate"], &all);
        let want = rooms(&["store", "decide", "records", "config", "clock", "replay"]);
        assert_eq!(got, want);
        // From a top-level module, `super::` is the crate root.
        let got =
            named_rooms("use super::{sibling, NotARoom};", &["x".to_owned()], &["crate"], &all);
        assert_eq!(got, rooms(&["sibling"]));
    }

    #[test]
    fn a_file_belongs_to_the_room_of_its_first_path_component() {
        let m = |p: &str| room_and_module(Path::new(p));
        assert_eq!(m("store/shared.rs"), ("store".into(), vec!["store".into(), "shared".into()]));
        assert_eq!(
            m("decide/stage/mod.rs"),
            ("decide".into(), vec!["decide".into(), "stage".into()])
        );
        assert_eq!(m("retention.rs"), ("retention".into(), vec!["retention".into()]));
        assert_eq!(m("main.rs"), ("main".into(), vec!["main".into()]));
        assert_eq!(m("lib.rs").0, "lib");
    }
}
