//! Where a command writes: a file or standard output, and the refusal of an output file that
//! is the input file.

use std::fs::{self, File};
use std::io::{self, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::service::CliError;

/// Refuses `-in` and `-out` naming the same regular file, by canonical path or by device and
/// inode (a hard link, a bind mount), before anything is opened for writing. `-` and absent
/// options (standard input and output) are never the same file; neither are an input that is
/// not a regular file (a terminal, a pipe) and an output.
///
/// # Errors
/// A usage error naming the file.
pub fn refuse_same_file(input: Option<&Path>, output: Option<&Path>) -> Result<(), CliError> {
    let (Some(input), Some(output)) = (named_file(input), named_file(output)) else {
        return Ok(());
    };
    // An input that cannot be read is reported when it is opened.
    let Ok(in_meta) = fs::metadata(input) else {
        return Ok(());
    };
    if !in_meta.is_file() {
        return Ok(());
    }
    let same_path = matches!(
        (fs::canonicalize(input), fs::canonicalize(output)),
        (Ok(a), Ok(b)) if a == b
    );
    let same_inode = fs::metadata(output)
        .is_ok_and(|out| out.dev() == in_meta.dev() && out.ino() == in_meta.ino());
    if same_path || same_inode {
        return Err(CliError::usage(format!(
            "-in {} and -out {} are the same file: the output would overwrite the input; \
             write to another file",
            input.display(),
            output.display()
        )));
    }
    Ok(())
}

/// The path of an option that names a file: not absent, not `-`.
fn named_file(path: Option<&Path>) -> Option<&Path> {
    path.filter(|p| p.as_os_str() != "-")
}

/// Opens (creates or truncates) the output: a file, or stdout for none or `-`.
pub fn open_output(path: Option<&PathBuf>) -> Result<Box<dyn Write>, CliError> {
    match path {
        Some(p) if p.as_os_str() != "-" => File::create(p)
            .map(|f| Box::new(f) as Box<dyn Write>)
            .map_err(|e| CliError::usage(format!("-out {}: {e}", p.display()))),
        _ => Ok(Box::new(io::stdout().lock())),
    }
}
