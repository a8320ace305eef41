//! Reading the files users hand Terrace: machine profiles, configurations and traces.
//!
//! Every such file is named on the command line, so it can be anything a path can name: a FIFO
//! with no writer (opening it blocks forever), `/dev/zero` (reading it never ends), a directory,
//! or a multi-gigabyte mistake. The machines and the model never see a path; the three readers
//! (profile, config, trace) come through here, so each refuses such inputs with one line that
//! says what is wrong, before anything blocks or allocates.
#![forbid(unsafe_code)]

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

/// The largest text input (profile, configuration) Terrace reads. The largest real one is a few
/// kilobytes; anything near this is not a profile or a configuration.
pub const MAX_TEXT_BYTES: u64 = 1 << 20;

/// Why an input file could not be read. Each message names the file and says what to do.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    #[error("{what} '{path}' does not exist; check the path")]
    Missing { what: &'static str, path: PathBuf },
    #[error("{what} '{path}' is not a regular file ({kind}); give the path of a file")]
    NotRegular { what: &'static str, path: PathBuf, kind: &'static str },
    #[error("{what} '{path}' is {size} bytes, more than the {limit} a {what} can be; check the path")]
    TooLarge { what: &'static str, path: PathBuf, size: u64, limit: u64 },
    #[error("{what} '{path}' is not UTF-8 text; check the path")]
    NotText { what: &'static str, path: PathBuf },
    #[error("cannot read {what} '{path}': {reason}")]
    Io { what: &'static str, path: PathBuf, reason: String },
}

/// The kind of a non-regular file, for the message.
fn kind_of(meta: &std::fs::Metadata) -> &'static str {
    let t = meta.file_type();
    if t.is_dir() {
        return "a directory";
    }
    // The special files only Unix has names for; elsewhere they are all "not a file".
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if t.is_fifo() {
            return "a FIFO";
        } else if t.is_char_device() {
            return "a character device";
        } else if t.is_block_device() {
            return "a block device";
        } else if t.is_socket() {
            return "a socket";
        }
    }
    "not a file"
}

/// An OS error as its message alone ("Permission denied"), without std's " (os error 13)".
fn reason(e: &std::io::Error) -> String {
    let s = e.to_string();
    match s.find(" (os error") {
        Some(i) => s[..i].to_string(),
        None => s,
    }
}

/// Opens `path` for reading if it is a regular file (following symbolic links), and returns it
/// with its size. `what` names the input in messages ("profile", "trace", "configuration").
pub fn open_regular(what: &'static str, path: &Path) -> Result<(File, u64), InputError> {
    let p = path.to_path_buf();
    // Looked at before opening: opening a FIFO with no writer blocks.
    let meta = std::fs::metadata(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => InputError::Missing { what, path: p.clone() },
        _ => InputError::Io { what, path: p.clone(), reason: reason(&e) },
    })?;
    if !meta.is_file() {
        return Err(InputError::NotRegular { what, path: p, kind: kind_of(&meta) });
    }
    let file = File::open(path).map_err(|e| InputError::Io { what, path: p.clone(), reason: reason(&e) })?;
    // The file may have been swapped between the two looks; check what was opened.
    let meta = file.metadata().map_err(|e| InputError::Io { what, path: p.clone(), reason: reason(&e) })?;
    if !meta.is_file() {
        return Err(InputError::NotRegular { what, path: p, kind: kind_of(&meta) });
    }
    Ok((file, meta.len()))
}

/// Reads a small text input (at most [`MAX_TEXT_BYTES`]) from a regular file.
pub fn read_text(what: &'static str, path: &Path) -> Result<String, InputError> {
    let (file, size) = open_regular(what, path)?;
    let p = path.to_path_buf();
    if size > MAX_TEXT_BYTES {
        return Err(InputError::TooLarge { what, path: p, size, limit: MAX_TEXT_BYTES });
    }
    // The size can grow while we read (a file being appended to): never read past the limit.
    let mut bytes = Vec::with_capacity(size as usize);
    file.take(MAX_TEXT_BYTES + 1).read_to_end(&mut bytes).map_err(|e| InputError::Io {
        what,
        path: p.clone(),
        reason: reason(&e),
    })?;
    if bytes.len() as u64 > MAX_TEXT_BYTES {
        return Err(InputError::TooLarge { what, path: p, size: bytes.len() as u64, limit: MAX_TEXT_BYTES });
    }
    String::from_utf8(bytes).map_err(|_| InputError::NotText { what, path: p })
}

/// A parse error in one line: `line L, column C: message (in `the line`)`, from the error's
/// message and the byte range it points at in `text`. Parsers' own displays spread over several
/// lines (a snippet with a caret), and their messages alone (TOML's "duplicate key") name
/// neither the key nor the place. Control characters of the quoted line are blanked, so the
/// message stays one line on a terminal.
pub fn parse_error_line(text: &str, message: &str, span: Option<std::ops::Range<usize>>) -> String {
    let mut message = message.split_whitespace().collect::<Vec<_>>().join(" ");
    let Some(span) = span else { return message };
    let (Some(before), Some(spanned)) = (text.get(..span.start), text.get(span.clone())) else {
        return message;
    };
    if message == "duplicate key" && !spanned.is_empty() {
        message = format!("duplicate key `{spanned}`");
    }
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let line = before.matches('\n').count() + 1;
    let column = before[line_start..].chars().count() + 1;
    let source: String = text[line_start..]
        .lines()
        .next()
        .unwrap_or("")
        .trim()
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(80)
        .collect();
    if source.is_empty() {
        format!("line {line}, column {column}: {message}")
    } else {
        format!("line {line}, column {column}: {message} (in `{source}`)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_errors_name_the_line_column_and_key() {
        let text = "a = 1\nb = 2\na = 3\n";
        assert_eq!(
            parse_error_line(text, "duplicate key", Some(12..13)),
            "line 3, column 1: duplicate key `a` (in `a = 3`)"
        );
        assert_eq!(parse_error_line(text, "bad\n  thing", None), "bad thing");
        assert_eq!(
            parse_error_line("x = \u{1b}[31m", "oops", Some(4..5)),
            "line 1, column 5: oops (in `x =  [31m`)"
        );
    }

    #[test]
    fn refuses_what_is_not_a_small_regular_file() {
        let dir = std::env::temp_dir().join(format!("terrace-input-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let e = read_text("profile", &dir.join("absent.toml")).unwrap_err().to_string();
        assert!(e.contains("does not exist"), "{e}");
        let e = read_text("profile", &dir).unwrap_err().to_string();
        assert!(e.contains("a directory"), "{e}");
        let e = read_text("profile", Path::new("/dev/zero")).unwrap_err().to_string();
        assert!(e.contains("a character device"), "{e}");
        let fifo = dir.join("fifo");
        let _ = std::fs::remove_file(&fifo);
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        // Would block forever if it were opened.
        let e = read_text("configuration", &fifo).unwrap_err().to_string();
        assert!(e.contains("a FIFO"), "{e}");
        let big = dir.join("big.toml");
        std::fs::write(&big, vec![b'#'; MAX_TEXT_BYTES as usize + 1]).unwrap();
        let e = read_text("profile", &big).unwrap_err().to_string();
        assert!(e.contains("more than"), "{e}");
        let bin = dir.join("bin.toml");
        std::fs::write(&bin, [0xff, 0xfe, 0x00]).unwrap();
        assert!(read_text("profile", &bin).unwrap_err().to_string().contains("not UTF-8"));
        let ok = dir.join("ok.toml");
        std::fs::write(&ok, "a = 1\n").unwrap();
        assert_eq!(read_text("profile", &ok).unwrap(), "a = 1\n");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
