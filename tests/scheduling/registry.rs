//! The policy registry (docs/ALGORITHM.md §11): every entry parses by its name and aliases,
//! builds, prints as it parses, describes itself, names its built policy, appears in the
//! README's "Choosing a policy" table, and is listed by both binaries' `--policy` help.

use std::process::Command;

use cryptodispatch::sched::PolicySpec;
use cryptodispatch::sched::policy::{Value, registry};

const README: &str = include_str!("../../README.md");

/// The first cells of the table under the README's "## Choosing a policy".
fn readme_table_names() -> Vec<&'static str> {
    let section = README
        .split("\n## Choosing a policy")
        .nth(1)
        .expect("README.md has a \"Choosing a policy\" section");
    let section = section.split("\n## ").next().unwrap_or(section);
    section
        .lines()
        .filter(|line| line.starts_with('|') && !line.starts_with("|---"))
        .skip(1) // the header
        .filter_map(|line| line.split('|').nth(1))
        .collect()
}

#[test]
fn every_entry_parses_builds_and_round_trips() {
    assert!(!registry().is_empty());
    for entry in registry() {
        let name = entry.name();
        let spec: PolicySpec = name.parse().unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(spec.name(), name);
        assert_eq!(spec, PolicySpec::from(entry), "{name}: defaults");
        let policy = spec.build().unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(policy.name(), name, "the built policy's name");
        assert_eq!(
            spec.to_string().parse::<PolicySpec>().unwrap(),
            spec,
            "{name}: {spec} does not round-trip"
        );
        assert!(
            !entry.description().trim().is_empty(),
            "{name}: no description"
        );
        for alias in entry.aliases() {
            assert_eq!(alias.parse::<PolicySpec>().unwrap(), spec, "alias {alias}");
        }
        for param in entry.params() {
            assert!(
                !param.meaning().trim().is_empty(),
                "{name}:{}",
                param.name()
            );
            // Every parameter given explicitly at its default is the default spec.
            let written = format!("{name}:{}={}", param.name(), param.default_value());
            assert_eq!(written.parse::<PolicySpec>().unwrap(), spec, "{written}");
            assert!(
                spec.to_string()
                    .contains(&format!("{}={}", param.name(), param.default_value())),
                "{spec}"
            );
        }
    }
}

#[test]
fn names_and_aliases_are_unique() {
    let mut seen: Vec<&str> = Vec::new();
    for entry in registry() {
        for name in std::iter::once(&entry.name()).chain(entry.aliases()) {
            assert!(!seen.contains(name), "{name} twice");
            assert_eq!(
                *name,
                name.to_ascii_lowercase(),
                "{name}: names are lower case"
            );
            seen.push(name);
        }
        let params: Vec<&str> = entry.params().iter().map(|p| p.name()).collect();
        for (k, p) in params.iter().enumerate() {
            assert!(!params[..k].contains(p), "{}: {p} twice", entry.name());
        }
    }
    assert_eq!(
        PolicySpec::names(),
        registry().iter().map(|e| e.name()).collect::<Vec<_>>()
    );
    assert_eq!(PolicySpec::all().len(), registry().len());
}

#[test]
fn every_entry_is_in_the_readme_table() {
    let cells = readme_table_names();
    assert!(!cells.is_empty(), "no table under \"Choosing a policy\"");
    for entry in registry() {
        let quoted = format!("`{}`", entry.name());
        assert!(
            cells.iter().any(|cell| cell.contains(&quoted)),
            "README.md's \"Choosing a policy\" table has no row for {quoted}"
        );
    }
}

#[test]
fn the_defaults_are_the_documented_ones() {
    let spec = PolicySpec::default();
    assert_eq!(
        spec.entry().name(),
        cryptodispatch::sched::policy::DEFAULT.name()
    );
    assert_eq!(spec.to_string(), "mct-wait");
    assert_eq!("default".parse::<PolicySpec>().unwrap(), spec);
    let paper = PolicySpec::paper_defaults();
    assert_eq!(paper, PolicySpec::paper(0.05, 0.95));
    assert_eq!(paper.to_string(), "paper:alpha=0.05,beta=0.95");
    let p2c = registry().iter().find(|e| e.name() == "p2c").unwrap();
    assert_eq!(p2c.params()[0].default_value(), Value::Integer(1));
    assert_eq!(PolicySpec::from(p2c), PolicySpec::p2c(1));
}

/// The `--help` text of `bin` with `args`.
fn help(bin: &str, args: &[&str]) -> String {
    let out = Command::new(bin)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{bin}: {e}"));
    assert!(out.status.success(), "{bin} {args:?}: {}", out.status);
    String::from_utf8(out.stdout).unwrap()
}

/// The command-line tool's `enc --help` is checked the same way in `cli/tests/cli.rs`.
#[test]
fn the_benchmark_lists_every_policy_in_its_help() {
    let bench = env!("CARGO_BIN_EXE_cryptodispatch-bench");
    for (bin, args) in [
        (bench, &["sim", "--help"][..]),
        (bench, &["live", "--help"][..]),
        (bench, &["policies", "--help"][..]),
    ] {
        let text = help(bin, args);
        for entry in registry() {
            assert!(
                text.contains(&format!("{entry}")),
                "{args:?} lacks {}: {text}",
                entry.name()
            );
            for param in entry.params() {
                let line = format!(
                    "{}={}: {}",
                    param.name(),
                    param.default_value(),
                    param.meaning()
                );
                assert!(text.contains(&line), "{args:?} lacks {line}");
            }
        }
    }
}
