//! The layers stay apart: each may name only the layers below it (`packet` ← `crypto`, `sched`
//! ← `runtime`, `sim`), so the scheduler core stands alone and the simulator never touches real
//! cryptography. Read from the source text, so a new `use` that crosses a layer fails here.

use std::fs;
use std::path::Path;

/// Every `crate::<module>` a layer's files name, with the file that names it.
fn crate_paths(dir: &Path, found: &mut Vec<(String, String)>) {
    for entry in fs::read_dir(dir).expect("source folder") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            crate_paths(&path, found);
            continue;
        }
        let text = fs::read_to_string(&path).expect("source file");
        for (i, _) in text.match_indices("crate::") {
            let module: String = text[i + "crate::".len()..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            found.push((path.display().to_string(), module));
        }
    }
}

fn assert_layer(layer: &str, allowed: &[&str]) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("src")
        .join(layer);
    let mut found = Vec::new();
    crate_paths(&dir, &mut found);
    assert!(!found.is_empty(), "{layer} names no crate module at all");
    let crossing: Vec<_> = found
        .iter()
        .filter(|(_, m)| !allowed.contains(&m.as_str()))
        .collect();
    assert!(
        crossing.is_empty(),
        "{layer} may name only {allowed:?}, but: {crossing:?}"
    );
}

#[test]
fn the_scheduler_core_knows_packets_and_itself_only() {
    assert_layer("sched", &["packet", "sched"]);
}

#[test]
fn the_cryptography_knows_packets_and_itself_only() {
    assert_layer("crypto", &["packet", "crypto"]);
}

#[test]
fn the_simulator_touches_no_real_cryptography_and_no_threads() {
    assert_layer("sim", &["packet", "sched", "sim"]);
}

#[test]
fn the_runtime_builds_on_the_layers_below() {
    assert_layer("runtime", &["packet", "crypto", "sched", "runtime"]);
}

/// The files of `runtime/` in their dependency order, as `runtime/mod.rs` lists them: each
/// may import only files before it.
const RUNTIME_ORDER: &[&str] = &[
    "context",
    "ids",
    "job",
    "error",
    "keys",
    "store",
    "backlog",
    "tenant",
    "metrics",
    "fault",
    "health",
    "slow",
    "work",
    "cut",
    "layout",
    "exec",
    "hand",
    "handle",
    "engine",
    "worker",
    "supervisor",
    "inline",
    "stream",
    "service",
    "builder",
];

/// The `crate::runtime::<file>` paths a runtime file's code names (comments and unit tests
/// left out: a test may reach further than the code it tests).
fn runtime_imports(text: &str) -> Vec<String> {
    let code = text.split("#[cfg(test)]").next().unwrap_or("");
    let mut found = Vec::new();
    for line in code.lines() {
        let line = line.trim_start();
        if line.starts_with("//") {
            continue;
        }
        for (i, _) in line.match_indices("crate::runtime::") {
            let rest = &line[i + "crate::runtime::".len()..];
            let names: Vec<String> = if let Some(group) = rest.strip_prefix('{') {
                // `use crate::runtime::{a, b::C}` on one line.
                group
                    .split('}')
                    .next()
                    .unwrap_or("")
                    .split(',')
                    .map(|s| s.trim().split("::").next().unwrap_or("").to_string())
                    .collect()
            } else {
                vec![
                    rest.chars()
                        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                        .collect(),
                ]
            };
            found.extend(names.into_iter().filter(|n| !n.is_empty()));
        }
    }
    found
}

#[test]
fn the_runtime_files_import_only_files_below_them() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/runtime");
    let mut files: Vec<String> = fs::read_dir(&dir)
        .expect("runtime folder")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "rs"))
        .filter_map(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .filter(|name| name != "mod")
        .collect();
    files.sort();
    let mut ordered: Vec<String> = RUNTIME_ORDER.iter().map(|s| s.to_string()).collect();
    ordered.sort();
    assert_eq!(
        files, ordered,
        "every runtime file has its place in the order"
    );
    let mut wrong = Vec::new();
    for (rank, file) in RUNTIME_ORDER.iter().enumerate() {
        let text = fs::read_to_string(dir.join(format!("{file}.rs"))).expect("source file");
        for name in runtime_imports(&text) {
            match RUNTIME_ORDER.iter().position(|f| *f == name) {
                Some(at) if at < rank => {}
                Some(_) => wrong.push(format!("{file} imports {name}, which is not below it")),
                // A re-export through `runtime/mod.rs` hides where a name lives.
                None => wrong.push(format!("{file} names crate::runtime::{name}, not a file")),
            }
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
    // `runtime/mod.rs` declares the same files, and lists each in its layout notes.
    let module = fs::read_to_string(dir.join("mod.rs")).expect("runtime/mod.rs");
    let mut declared: Vec<String> = module
        .lines()
        .filter_map(|l| l.trim().strip_prefix("mod "))
        .map(|m| m.trim_end_matches(';').to_string())
        .collect();
    declared.sort();
    assert_eq!(declared, ordered);
    for file in RUNTIME_ORDER {
        assert!(
            module.contains(&format!("`{file}`")),
            "runtime/mod.rs does not place {file}"
        );
    }
}

#[test]
fn the_runtime_order_check_sees_imports() {
    let text = "use crate::runtime::engine::Engine;\nuse crate::runtime::{cut::A, work};\n\
                // crate::runtime::ignored\nfn f() { crate::runtime::fault::x(); }\n\
                #[cfg(test)]\nmod tests { use crate::runtime::builder; }";
    assert_eq!(runtime_imports(text), ["engine", "cut", "work", "fault"]);
}
