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
