//! Output helpers: aligned tables, CSV text and files, numbers. Standard library only, so the
//! scale-out benchmark (`cli/`) shares this file.

use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

/// A text table with a header row, printed with aligned columns.
pub struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new(header: &[&str]) -> Self {
        Table {
            header: header.iter().map(|s| s.to_string()).collect(),
            rows: Vec::new(),
        }
    }

    /// A table whose header is `columns`, comma-separated, as [`Csv::new`] takes its header.
    pub fn with_columns(columns: &str) -> Self {
        Table::new(&columns.split(',').collect::<Vec<_>>())
    }

    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    pub fn render(&self) -> String {
        let cols = self.header.len();
        let mut width = vec![0; cols];
        for r in std::iter::once(&self.header).chain(&self.rows) {
            for (w, c) in width.iter_mut().zip(r) {
                *w = (*w).max(c.chars().count());
            }
        }
        let mut out = String::new();
        let line = |out: &mut String, r: &[String]| {
            let cells: Vec<String> = r
                .iter()
                .zip(&width)
                .map(|(c, w)| format!("{c:>w$}"))
                .collect();
            let _ = writeln!(out, "{}", cells.join("  ").trim_end());
        };
        line(&mut out, &self.header);
        let rule: Vec<String> = width.iter().map(|w| "-".repeat(*w)).collect();
        let _ = writeln!(out, "{}", rule.join("  "));
        for r in &self.rows {
            line(&mut out, r);
        }
        out
    }
}

/// CSV text: a header line and rows (values must not contain commas).
pub struct Csv {
    text: String,
}

impl Csv {
    pub fn new(header: &str) -> Self {
        Csv {
            text: format!("{header}\n"),
        }
    }

    pub fn row(&mut self, cells: &[String]) {
        let _ = writeln!(self.text, "{}", cells.join(","));
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }
}

/// Prints `rows`, each a CSV row's cells: as CSV under `header` when `csv`, else `title` and a
/// table under `columns` of the cells at `picks` (every cell when `picks` is empty).
pub fn print_rows(
    csv: bool,
    header: &str,
    rows: &[Vec<String>],
    title: &str,
    columns: &str,
    picks: &[usize],
) {
    if csv {
        let mut c = Csv::new(header);
        rows.iter().for_each(|r| c.row(r));
        print!("{}", c.as_str());
        return;
    }
    println!("{title}");
    let mut t = Table::with_columns(columns);
    for r in rows {
        let picked = picks.iter().map(|&i| r[i].clone());
        t.row(if picks.is_empty() {
            r.clone()
        } else {
            picked.collect()
        });
    }
    print!("{}", t.render());
}

/// Creates `dir`, where an experiment writes its files, and checks that a file can be made in
/// it: called before the experiment runs, so that a path that cannot take the files (a regular
/// file, a directory without write permission) fails at once rather than after the run.
///
/// # Errors
/// A message naming the directory and what is wrong with it.
pub fn out_dir(dir: &Path) -> Result<(), String> {
    let shown = dir.display();
    if dir.exists() && !dir.is_dir() {
        return Err(format!(
            "cannot write the results to {shown}: it exists and is not a directory"
        ));
    }
    fs::create_dir_all(dir).map_err(|e| format!("cannot create {shown}: {e}"))?;
    let probe = dir.join(format!(".cryptodispatch-bench-{}", std::process::id()));
    fs::write(&probe, b"").map_err(|e| format!("cannot write the results to {shown}: {e}"))?;
    let _ = fs::remove_file(&probe);
    Ok(())
}

/// Creates `dir` and writes `name` into it; returns the path written.
pub fn write_file(dir: &Path, name: &str, contents: &str) -> Result<PathBuf, String> {
    fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let path = dir.join(name);
    fs::write(&path, contents).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    Ok(path)
}

/// `wrote DIR/A, DIR/B, ...`: the report's line naming the files `names` written to `dir`.
pub fn wrote(dir: &Path, names: &[&str]) -> String {
    let paths: Vec<String> = names
        .iter()
        .map(|n| format!("{}/{n}", dir.display()))
        .collect();
    format!("wrote {}", paths.join(", "))
}

/// A number with `d` decimals.
pub fn f(x: f64, d: usize) -> String {
    format!("{x:.d$}")
}

/// A share as a percentage with one decimal.
pub fn pct(x: f64) -> String {
    format!("{:.1}%", 100.0 * x)
}

/// Shares as percentages, separated by spaces.
pub fn pcts(xs: &[f64]) -> String {
    xs.iter().map(|&x| pct(x)).collect::<Vec<_>>().join(" ")
}
