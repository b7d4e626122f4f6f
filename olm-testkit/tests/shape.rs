//! The workspace's shape, checked on its sources: no crate has a module cycle,
//! and every `main.rs` stays a thin entry point.
//!
//! A module *uses* another when it names it or an item in it through a path:
//! `use crate::a::b`, `super::X`, `self::child::f()`, or a child module's name.
//! Uses that form a cycle make the modules one room in all but name, so they
//! fail this test. A module may use its ancestors' items (a parent owns its
//! children and may hold what they share): those uses close no cycle.
//! `#[cfg(test)]` modules are left out.

use std::{
    collections::{BTreeMap, BTreeSet},
    path::{Path, PathBuf},
};

use petgraph::{algo::tarjan_scc, graph::DiGraph};
use syn::visit::Visit;

/// The longest a `main.rs` may be, in lines of code.
const MAIN_LINES: usize = 20;

/// A module's path from its crate root, e.g. `["controllers", "csv"]`.
type ModPath = Vec<String>;

/// One crate root's modules: each with the paths its code names.
#[derive(Default)]
struct Modules {
    /// Every module, with the paths named in its own items (not its children's).
    named: BTreeMap<ModPath, Vec<Vec<String>>>,
}

impl Modules {
    /// Reads the module tree rooted at `file` (a `lib.rs`, `main.rs` or `src/bin/*.rs`).
    fn read(file: &Path) -> Modules {
        let mut modules = Modules::default();
        let dir = file.parent().expect("a root file's directory").to_path_buf();
        let ast = parse(file);
        modules.add(Vec::new(), &ast.items, &dir);
        modules
    }

    /// Adds module `path` with `items`, whose `mod x;` files are found under `dir`.
    fn add(&mut self, path: ModPath, items: &[syn::Item], dir: &Path) {
        let mut names = PathNames::default();
        for item in items {
            match item {
                syn::Item::Mod(m) if is_cfg_test(&m.attrs) => {}
                syn::Item::Mod(m) => self.add_child(&path, m, dir),
                other => names.visit_item(other),
            }
        }
        self.named.insert(path, names.paths);
    }

    fn add_child(&mut self, parent: &ModPath, m: &syn::ItemMod, dir: &Path) {
        let name = m.ident.to_string();
        let mut path = parent.clone();
        path.push(name.clone());
        let child_dir = dir.join(&name);
        match &m.content {
            Some((_, items)) => self.add(path, items, &child_dir),
            None => {
                let file = [dir.join(format!("{name}.rs")), child_dir.join("mod.rs")]
                    .into_iter()
                    .find(|f| f.is_file())
                    .unwrap_or_else(|| panic!("no file for `mod {name};` in {}", dir.display()));
                let items = parse(&file).items;
                self.add(path, &items, &child_dir);
            }
        }
    }

    /// The module a path named in `from` leads to: the deepest module its
    /// leading segments name, or `None` for paths outside the crate.
    fn target(&self, from: &ModPath, segments: &[String]) -> Option<ModPath> {
        let (mut base, rest): (ModPath, &[String]) = match segments.first()?.as_str() {
            "crate" => (Vec::new(), &segments[1..]),
            "self" => (from.clone(), &segments[1..]),
            "super" => {
                let mut base = from.clone();
                let supers = segments.iter().take_while(|s| *s == "super").count();
                for _ in 0..supers {
                    base.pop()?;
                }
                (base, &segments[supers..])
            }
            _ => (from.clone(), segments),
        };
        let relative = !matches!(segments[0].as_str(), "crate" | "self" | "super");
        for segment in rest {
            let mut deeper = base.clone();
            deeper.push(segment.clone());
            if !self.named.contains_key(&deeper) {
                break;
            }
            base = deeper;
        }
        // A plain path names a child module first, or else something outside the crate.
        (!relative || base.len() > from.len()).then_some(base)
    }

    /// The module graph's cycles, each as its modules and the uses between them.
    fn cycles(&self) -> Vec<String> {
        let mut graph = DiGraph::<ModPath, ()>::new();
        let nodes: BTreeMap<&ModPath, _> = self
            .named
            .keys()
            .map(|m| (m, graph.add_node(m.clone())))
            .collect();
        let mut uses = BTreeSet::new();
        for (from, paths) in &self.named {
            for segments in paths {
                let target = self.target(from, segments);
                if let Some(to) = target.filter(|to| !from.starts_with(to)) {
                    uses.insert((from.clone(), to));
                }
            }
        }
        for (from, to) in &uses {
            graph.update_edge(nodes[from], nodes[to], ());
        }
        tarjan_scc(&graph)
            .into_iter()
            .filter(|scc| scc.len() > 1)
            .map(|scc| {
                let members: BTreeSet<ModPath> = scc.iter().map(|n| graph[*n].clone()).collect();
                let edges: Vec<String> = uses
                    .iter()
                    .filter(|(a, b)| members.contains(a) && members.contains(b))
                    .map(|(a, b)| format!("{} uses {}", show(a), show(b)))
                    .collect();
                edges.join(", ")
            })
            .collect()
    }
}

/// The paths an item names: `use` trees expanded, and every other path.
#[derive(Default)]
struct PathNames {
    paths: Vec<Vec<String>>,
}

impl<'ast> Visit<'ast> for PathNames {
    fn visit_item_use(&mut self, item: &'ast syn::ItemUse) {
        let mut prefix = Vec::new();
        if item.leading_colon.is_none() {
            use_tree(&item.tree, &mut prefix, &mut self.paths);
        }
    }

    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        // Inline modules inside functions or blocks: their test ones stay out.
        if !is_cfg_test(&m.attrs) {
            syn::visit::visit_item_mod(self, m);
        }
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        if path.leading_colon.is_none() && path.segments.len() > 1 {
            self.paths
                .push(path.segments.iter().map(|s| s.ident.to_string()).collect());
        }
        syn::visit::visit_path(self, path);
    }
}

/// Expands a `use` tree into its full paths.
fn use_tree(tree: &syn::UseTree, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    match tree {
        syn::UseTree::Path(p) => {
            prefix.push(p.ident.to_string());
            use_tree(&p.tree, prefix, out);
            prefix.pop();
        }
        syn::UseTree::Name(n) => out.push(with(prefix, n.ident.to_string())),
        syn::UseTree::Rename(r) => out.push(with(prefix, r.ident.to_string())),
        syn::UseTree::Glob(_) => out.push(prefix.clone()),
        syn::UseTree::Group(g) => g.items.iter().for_each(|t| use_tree(t, prefix, out)),
    }
}

fn with(prefix: &[String], last: String) -> Vec<String> {
    let mut path = prefix.to_vec();
    path.push(last);
    path
}

fn is_cfg_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg")
            && a.parse_args::<syn::Meta>()
                .is_ok_and(|m| m.path().is_ident("test"))
    })
}

fn parse(file: &Path) -> syn::File {
    let text = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("read {}: {e}", file.display()));
    syn::parse_file(&text).unwrap_or_else(|e| panic!("parse {}: {e}", file.display()))
}

fn show(path: &ModPath) -> String {
    if path.is_empty() {
        "crate".into()
    } else {
        path.join("::")
    }
}

/// The workspace's crate directories, from its `Cargo.toml`.
fn members() -> Vec<PathBuf> {
    let root = olm_testkit::repo_root();
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).expect("the workspace Cargo.toml");
    let members = manifest
        .split("members = [")
        .nth(1)
        .and_then(|rest| rest.split(']').next())
        .expect("the workspace's members");
    let dirs: Vec<PathBuf> = members
        .split(',')
        .map(|m| m.trim().trim_matches('"'))
        .filter(|m| !m.is_empty())
        .map(|m| root.join(m))
        .collect();
    assert!(dirs.len() > 5, "the workspace's members: {dirs:?}");
    dirs
}

/// Every crate root of a member: `src/lib.rs`, `src/main.rs`, `src/bin/*.rs`.
fn roots(member: &Path) -> Vec<PathBuf> {
    let src = member.join("src");
    let mut roots: Vec<PathBuf> = ["lib.rs", "main.rs"]
        .iter()
        .map(|f| src.join(f))
        .filter(|f| f.is_file())
        .collect();
    if let Ok(bins) = std::fs::read_dir(src.join("bin")) {
        roots.extend(
            bins.map(|e| e.expect("a bin entry").path())
                .filter(|p| p.extension().is_some_and(|x| x == "rs")),
        );
    }
    roots
}

fn code_lines(file: &Path) -> usize {
    let text = std::fs::read_to_string(file).expect("a main.rs");
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("//"))
        .count()
}

#[test]
fn no_crate_has_a_module_cycle() {
    let mut found = Vec::new();
    let mut crates = 0;
    for member in members() {
        for root in roots(&member) {
            crates += 1;
            for cycle in Modules::read(&root).cycles() {
                found.push(format!("{}: {cycle}", root.display()));
            }
        }
    }
    assert!(crates > 5, "crate roots read: {crates}");
    assert!(
        found.is_empty(),
        "module cycles: move what both sides need into a module that neither uses back.\n{}",
        found.join("\n")
    );
}

#[test]
fn every_main_rs_is_a_thin_entry_point() {
    let long: Vec<String> = members()
        .iter()
        .map(|m| m.join("src/main.rs"))
        .filter(|f| f.is_file())
        .map(|f| (code_lines(&f), f))
        .filter(|(lines, _)| *lines > MAIN_LINES)
        .map(|(lines, f)| format!("{}: {lines} lines of code", f.display()))
        .collect();
    assert!(
        long.is_empty(),
        "a main.rs has at most {MAIN_LINES} lines of code; move the rest into the crate's library:\n{}",
        long.join("\n")
    );
}

#[test]
fn a_cycle_between_siblings_is_found_and_a_use_of_a_parent_is_not_one() {
    let dir = tempdir();
    std::fs::write(dir.join("lib.rs"), "mod a;\nmod b;\nuse a::X;\npub struct Y;\n").unwrap();
    std::fs::write(dir.join("a.rs"), "pub struct X(super::Y);\n").unwrap();
    std::fs::write(
        dir.join("b.rs"),
        "pub fn f() {}\n#[cfg(test)]\nmod tests { use crate::a::X; }\n",
    )
    .unwrap();
    assert!(Modules::read(&dir.join("lib.rs")).cycles().is_empty());
    std::fs::write(dir.join("b.rs"), "use crate::a::X;\npub fn f() {}\n").unwrap();
    std::fs::write(
        dir.join("a.rs"),
        "pub struct X(super::Y);\nfn g() { crate::b::f() }\n",
    )
    .unwrap();
    let cycles = Modules::read(&dir.join("lib.rs")).cycles();
    assert_eq!(cycles, ["a uses b, b uses a"]);
}

fn tempdir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("olm-rs-shape-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
