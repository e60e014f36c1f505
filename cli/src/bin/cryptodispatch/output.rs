//! Where a command writes: standard output, streamed as the output is produced, or a file,
//! written whole or not at all; and the refusal of an output file that is the input file.
//!
//! # Writing a file
//!
//! An output file is written to a temporary file beside it and renamed over it only when the
//! command has succeeded, so a failure (bad padding found at the end of a decryption, an I/O
//! error) leaves no partial output, and an existing file as it was:
//!
//! 1. [`Output::create`] resolves the target (a symbolic link is followed, so the link stays
//!    and the file it points to is replaced) and creates `.NAME.tmp-PID` in the target's
//!    directory with `create_new`, which never opens an existing file. When the target exists,
//!    its permission bits are copied to the temporary file before anything is written, so a
//!    private file stays private.
//! 2. The command writes to the temporary file.
//! 3. [`Output::finish`] takes the command's result. On success it flushes the file, syncs it
//!    to disk and renames it over the target: one atomic step, the directory being the same. On
//!    failure, or when the flush, sync or rename fails, it removes the temporary file and
//!    returns the error.
//! 4. An `Output` dropped without `finish` (a panic) removes its temporary file too.
//!
//! Standard output, and a target that exists and is not a regular file (`/dev/null`, a FIFO, a
//! terminal), are written directly as the output is produced: renaming over a device would
//! replace it with a file. What was written before a failure then stays written, as with
//! openssl. The rename gives the target a new inode: other hard links to the old file keep the
//! old contents, and the owner becomes the user who ran the command. A run killed by a signal
//! can leave its temporary file behind; the name says which file and which process.

use std::ffi::OsString;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::service::{CliError, write_error};

/// How many temporary names are tried (`.NAME.tmp-PID`, then `-1`, `-2`, ...) before giving up:
/// only a stale file left by a killed run of the same process id can be in the way.
const TEMP_NAMES: u32 = 100;

/// Refuses `-out` naming the same regular file as any of `inputs` (the option's name without
/// its dash, and its path: `-in`, and the files a command reads beside it, such as `-key` or
/// `-aad-file`), by canonical path or by device and inode (a hard link, a bind mount), before
/// anything is opened for writing. `-` and absent options (standard input and output) are
/// never the same file; neither are an input that is not a regular file (a terminal, a pipe)
/// and an output.
///
/// # Errors
/// A usage error naming the option and the file.
pub fn refuse_same_file(
    inputs: &[(&str, Option<&Path>)],
    output: Option<&Path>,
) -> Result<(), CliError> {
    for &(option, input) in inputs {
        refuse_one(option, input, output)?;
    }
    Ok(())
}

/// [`refuse_same_file`] for one input.
fn refuse_one(option: &str, input: Option<&Path>, output: Option<&Path>) -> Result<(), CliError> {
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
            "-{option} {} and -out {} are the same file: the output would overwrite it; \
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

/// Where a command's output goes; see the module documentation.
pub struct Output {
    destination: Destination,
}

enum Destination {
    /// Standard output, or an existing file that is not a regular file.
    Direct(Box<dyn Write>),
    /// A regular file, written through a temporary file.
    Replace(Replacement),
}

/// A temporary file that replaces `target` when it is committed, and is removed otherwise.
struct Replacement {
    file: File,
    temp: PathBuf,
    target: PathBuf,
    /// Renamed over the target, or removed: nothing left to clean up.
    settled: bool,
}

impl Output {
    /// Opens the output for `-out`: standard output for none or `-`, else the file as the
    /// module documentation describes.
    ///
    /// # Errors
    /// A usage error if the file, or its temporary file, cannot be created.
    pub fn create(path: Option<&Path>) -> Result<Output, CliError> {
        let Some(path) = named_file(path) else {
            return Ok(Output {
                destination: Destination::Direct(Box::new(io::stdout().lock())),
            });
        };
        let usage = |e: io::Error| CliError::usage(format!("-out {}: {e}", path.display()));
        // An existing target, through any symbolic links.
        let existing = fs::canonicalize(path)
            .ok()
            .and_then(|real| fs::metadata(&real).ok().map(|meta| (real, meta)));
        let (target, permissions) = match existing {
            Some((_, meta)) if !meta.is_file() => {
                let file = File::create(path).map_err(usage)?;
                return Ok(Output {
                    destination: Destination::Direct(Box::new(file)),
                });
            }
            Some((real, meta)) => (real, Some(meta.permissions())),
            None => (path.to_path_buf(), None),
        };
        let Some(name) = target.file_name().map(OsString::from) else {
            return Err(CliError::usage(format!(
                "-out {}: not a file name",
                path.display()
            )));
        };
        let (file, temp) = create_temp(&target, &name).map_err(|(temp, e)| {
            CliError::usage(format!(
                "-out {}: cannot create the temporary file {}: {e}",
                path.display(),
                temp.display()
            ))
        })?;
        let mut replacement = Replacement {
            file,
            temp,
            target,
            settled: false,
        };
        if let Some(permissions) = permissions {
            if let Err(e) = replacement.file.set_permissions(permissions) {
                replacement.discard();
                return Err(usage(e));
            }
        }
        Ok(Output {
            destination: Destination::Replace(replacement),
        })
    }

    /// Ends the command with its `result`: on success, commits the output (flushed, and for a
    /// file synced and renamed over the target); on failure, flushes direct output and removes
    /// a temporary file, then returns the failure.
    ///
    /// # Errors
    /// `result`'s error, or a failure to flush, sync or rename.
    pub fn finish(self, result: Result<(), CliError>) -> Result<(), CliError> {
        match self.destination {
            Destination::Direct(mut out) => {
                // Flush what was written even after a failure, as openssl does.
                let flushed = out.flush().map_err(write_error);
                result.and(flushed)
            }
            Destination::Replace(mut replacement) => {
                match result.and_then(|()| replacement.commit()) {
                    Ok(()) => Ok(()),
                    Err(e) => {
                        replacement.discard();
                        Err(e)
                    }
                }
            }
        }
    }
}

impl Write for Output {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match &mut self.destination {
            Destination::Direct(out) => out.write(buf),
            Destination::Replace(r) => r.file.write(buf),
        }
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        match &mut self.destination {
            Destination::Direct(out) => out.write_all(buf),
            Destination::Replace(r) => r.file.write_all(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match &mut self.destination {
            Destination::Direct(out) => out.flush(),
            Destination::Replace(r) => r.file.flush(),
        }
    }
}

impl Replacement {
    /// Flushes and syncs the temporary file and renames it over the target.
    fn commit(&mut self) -> Result<(), CliError> {
        self.file
            .flush()
            .and_then(|()| self.file.sync_all())
            .map_err(write_error)?;
        fs::rename(&self.temp, &self.target).map_err(|e| {
            CliError::failure(format!(
                "cannot rename {} to {}: {e}",
                self.temp.display(),
                self.target.display()
            ))
        })?;
        self.settled = true;
        Ok(())
    }

    /// Removes the temporary file (once; an error is reported, not fatal: the command has
    /// already failed).
    fn discard(&mut self) {
        if self.settled {
            return;
        }
        self.settled = true;
        if let Err(e) = fs::remove_file(&self.temp) {
            eprintln!(
                "cryptodispatch: cannot remove the temporary file {}: {e}",
                self.temp.display()
            );
        }
    }
}

impl Drop for Replacement {
    fn drop(&mut self) {
        self.discard();
    }
}

/// Creates a new temporary file beside `target`, whose file name is `name`: `.NAME.tmp-PID`,
/// or with `-1`, `-2`, ... appended while the name is taken. On failure, gives back the last
/// name tried.
fn create_temp(target: &Path, name: &OsString) -> Result<(File, PathBuf), (PathBuf, io::Error)> {
    let base = {
        let mut base = OsString::from(".");
        base.push(name);
        base.push(format!(".tmp-{}", std::process::id()));
        base
    };
    let mut last = None;
    for n in 0..TEMP_NAMES {
        let mut temp_name = base.clone();
        if n > 0 {
            temp_name.push(format!("-{n}"));
        }
        let temp = target.with_file_name(&temp_name);
        match OpenOptions::new().write(true).create_new(true).open(&temp) {
            Ok(file) => return Ok((file, temp)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last = Some((temp, e)),
            Err(e) => return Err((temp, e)),
        }
    }
    Err(last.expect("at least one name is tried"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fresh directory under the system temp dir, removed on drop.
    struct Dir(PathBuf);

    impl Dir {
        fn new(name: &str) -> Dir {
            let dir = std::env::temp_dir().join(format!(
                "cryptodispatch-output-{}-{name}",
                std::process::id()
            ));
            let _ = fs::remove_dir_all(&dir);
            fs::create_dir_all(&dir).unwrap();
            Dir(dir)
        }

        fn names(&self) -> Vec<String> {
            let mut names: Vec<String> = fs::read_dir(&self.0)
                .unwrap()
                .map(|e| e.unwrap().file_name().into_string().unwrap())
                .collect();
            names.sort();
            names
        }
    }

    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn the_file_appears_only_when_finished_with_success() {
        let dir = Dir::new("success");
        let target = dir.0.join("out");
        let mut out = Output::create(Some(&target)).unwrap();
        out.write_all(b"partial").unwrap();
        let temp = format!(".out.tmp-{}", std::process::id());
        assert_eq!(dir.names(), [temp], "only the temporary file while writing");
        out.write_all(b" and whole").unwrap();
        out.finish(Ok(())).unwrap();
        assert_eq!(dir.names(), ["out"]);
        assert_eq!(fs::read(&target).unwrap(), b"partial and whole");
    }

    #[test]
    fn a_failure_or_a_drop_removes_the_temporary_file() {
        let dir = Dir::new("failure");
        let target = dir.0.join("out");
        fs::write(&target, b"before").unwrap();
        let mut out = Output::create(Some(&target)).unwrap();
        out.write_all(b"partial").unwrap();
        let err = out
            .finish(Err(CliError::failure("bad decrypt")))
            .unwrap_err();
        assert_eq!(err.to_string(), "bad decrypt", "the command's own error");
        assert_eq!(dir.names(), ["out"]);
        // Dropped without finish, as when a panic unwinds.
        let mut out = Output::create(Some(&target)).unwrap();
        out.write_all(b"partial").unwrap();
        drop(out);
        assert_eq!(dir.names(), ["out"]);
        assert_eq!(fs::read(&target).unwrap(), b"before");
    }

    #[test]
    fn a_taken_temporary_name_is_left_alone() {
        let dir = Dir::new("taken");
        let target = dir.0.join("out");
        let stale = format!(".out.tmp-{}", std::process::id());
        fs::write(dir.0.join(&stale), b"stale").unwrap();
        let mut out = Output::create(Some(&target)).unwrap();
        out.write_all(b"new").unwrap();
        out.finish(Ok(())).unwrap();
        assert_eq!(dir.names(), [stale.clone(), "out".to_string()]);
        assert_eq!(fs::read(dir.0.join(&stale)).unwrap(), b"stale");
        assert_eq!(fs::read(&target).unwrap(), b"new");
    }

    #[test]
    fn same_file_by_path_or_inode_only_for_regular_files() {
        let dir = Dir::new("same");
        let a = dir.0.join("a");
        fs::write(&a, b"x").unwrap();
        let b = dir.0.join("b");
        fs::write(&b, b"x").unwrap();
        let hard = dir.0.join("hard");
        fs::hard_link(&a, &hard).unwrap();
        let refused = |i: &Path, o: &Path| refuse_same_file(&[("in", Some(i))], Some(o)).is_err();
        assert!(refused(&a, &a));
        assert!(refused(
            &a,
            &dir.0.join("..").join(dir.0.file_name().unwrap()).join("a")
        ));
        assert!(refused(&a, &hard));
        assert!(!refused(&a, &b));
        assert!(!refused(&a, &dir.0.join("new")));
        assert!(!refused(Path::new("-"), Path::new("-")));
        assert!(!refused(Path::new("/dev/null"), Path::new("/dev/null")));
        assert!(refuse_same_file(&[("in", Some(&a))], None).is_ok());
        // Any input named beside -in, by its option.
        let e = refuse_same_file(&[("in", Some(&b)), ("key", Some(&a))], Some(&hard))
            .expect_err("-out is the key file");
        assert!(e.to_string().contains("-key"), "{e}");
        assert!(refuse_same_file(&[("in", Some(&b)), ("key", None)], Some(&a)).is_ok());
    }
}
