//! The daemon's control protocol over its Unix socket: one JSON object per line each way.
//!
//! ```text
//! -> {"op":"bind","pid":4242,"policy":"age"}      policy optional: the daemon's default
//! <- {"ok":true,"pid":4242,"policy":"age","message":"managing pid 4242 ..."}
//! -> {"op":"unbind","pid":4242}
//! <- {"ok":true,"pid":4242,"message":"stopped managing pid 4242; its pages stay where they are"}
//! -> {"op":"bind-cgroup","cgroup":"/sys/fs/cgroup/batch","policy":"age"}   policy optional
//! <- {"ok":true,"cgroup":"/sys/fs/cgroup/batch","policy":"age","message":"managing cgroup ..."}
//! -> {"op":"unbind-cgroup","cgroup":"/sys/fs/cgroup/batch"}
//! <- {"ok":true,"cgroup":"/sys/fs/cgroup/batch","message":"stopped managing cgroup ..."}
//! -> {"op":"list"}
//! <- {"ok":true,"processes":[{"pid":4242,"processes":1,"uid":1000,"policy":"age",...},
//!                            {"pid":0,"cgroup":"/sys/fs/cgroup/batch","processes":3,...}]}
//! -> garbage
//! <- {"ok":false,"error":"not JSON: expected value at line 1 column 1"}   (and the daemon hangs up)
//! ```
//!
//! Who may do what is decided by the caller's uid as the kernel reports it (SO_PEERCRED), never
//! by anything the caller says: root may manage any process, anyone else only processes whose
//! real uid is theirs ([`may_manage`]); a cgroup, only root or the owner of its directory (a
//! delegated cgroup is its user's), and then only that user's processes in it.

use serde::{Deserialize, Serialize};
use std::io::{self, BufRead, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Longest request line the daemon reads, newline excluded.
pub const MAX_LINE: usize = 64 * 1024;

/// A request to the daemon.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Request {
    /// Manage process `pid` with `policy` (default: the daemon's).
    Bind {
        pid: i32,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        policy: Option<String>,
    },
    /// Stop managing `pid`; its pages stay where they are.
    Unbind { pid: i32 },
    /// Manage every process of the cgroup v2 directory `cgroup` and the cgroups below it, as
    /// they come and go, as one group, with `policy` (default: the daemon's).
    BindCgroup {
        cgroup: PathBuf,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        policy: Option<String>,
    },
    /// Stop managing the cgroup `cgroup`; its processes' pages stay where they are.
    UnbindCgroup { cgroup: PathBuf },
    /// The processes the daemon manages.
    List,
}

impl Request {
    /// Parses one request line; the error is one line saying what is wrong.
    pub fn parse(line: &[u8]) -> Result<Request, String> {
        serde_json::from_slice(line).map_err(|e| {
            let what = match e.classify() {
                serde_json::error::Category::Syntax | serde_json::error::Category::Eof => "not JSON",
                _ => "bad request",
            };
            one_line(&format!(
                "{what}: {e}; expected one JSON object per line, e.g. {{\"op\":\"bind\",\"pid\":N}}, \
                 {{\"op\":\"unbind\",\"pid\":N}}, {{\"op\":\"bind-cgroup\",\"cgroup\":\"/sys/fs/cgroup/NAME\"}}, \
                 {{\"op\":\"unbind-cgroup\",\"cgroup\":\"/sys/fs/cgroup/NAME\"}} or {{\"op\":\"list\"}}"
            ))
        })
    }

    /// The request as one line, newline excluded.
    pub fn to_line(&self) -> String {
        serde_json::to_string(self).expect("a request serializes")
    }
}

/// One binding, a process or a cgroup, as `list` reports it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProcessEntry {
    /// The process bound; 0 for a cgroup.
    pub pid: i32,
    /// The cgroup bound, if a cgroup was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroup: Option<PathBuf>,
    /// Processes managed under the binding at the last scan (a cgroup's; 1 for a process).
    #[serde(default)]
    pub processes: u64,
    /// The process's real uid when it was bound; of a cgroup, its directory's owner.
    pub uid: u32,
    pub policy: String,
    /// Seconds since it was bound.
    pub seconds: f64,
    /// Present pages per tier, fastest first, at the last scan.
    pub pages_per_tier: Vec<u64>,
    pub pages_moved: u64,
    pub moves_failed: u64,
    pub dry_run: bool,
}

/// The daemon's answer to one request.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Reply {
    pub ok: bool,
    /// Why the request failed, in one line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// What was done, for people.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroup: Option<PathBuf>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub processes: Option<Vec<ProcessEntry>>,
}

impl Reply {
    pub fn ok(message: impl Into<String>) -> Reply {
        Reply { ok: true, message: Some(message.into()), ..Reply::default() }
    }
    pub fn error(text: impl AsRef<str>) -> Reply {
        Reply { ok: false, error: Some(one_line(text.as_ref())), ..Reply::default() }
    }
    /// The reply as one line, newline excluded.
    pub fn to_line(&self) -> String {
        serde_json::to_string(self).expect("a reply serializes")
    }
    /// What to show a person: the message or the error.
    pub fn text(&self) -> String {
        match (&self.error, &self.message) {
            (Some(e), _) if !self.ok => e.clone(),
            (_, Some(m)) => m.clone(),
            _ => self.to_line(),
        }
    }
}

/// `text` with line breaks folded into spaces, so it fits the one-line protocol and log.
pub fn one_line(text: &str) -> String {
    text.split(['\n', '\r']).map(str::trim).filter(|s| !s.is_empty()).collect::<Vec<_>>().join(" ")
}

/// The authorization rule: root may manage any process, anyone else only their own (the
/// process's real uid equals theirs).
pub fn may_manage(caller_uid: u32, owner_uid: u32) -> bool {
    caller_uid == 0 || caller_uid == owner_uid
}

/// [`may_manage`] with the error the caller gets.
pub fn authorize(caller_uid: u32, pid: i32, owner_uid: u32) -> Result<(), String> {
    if may_manage(caller_uid, owner_uid) {
        Ok(())
    } else {
        Err(format!(
            "permission denied: uid {caller_uid} may not manage pid {pid} (owned by uid {owner_uid})"
        ))
    }
}

/// The authorization rule for a cgroup: root, or the owner of its directory (`owner`: a
/// delegated cgroup is chowned to its user), with the error the caller gets.
pub fn authorize_cgroup(caller_uid: u32, cgroup: &Path, owner_uid: u32) -> Result<(), String> {
    if may_manage(caller_uid, owner_uid) {
        Ok(())
    } else {
        Err(format!(
            "permission denied: uid {caller_uid} may not manage cgroup {} (its directory is owned by uid \
             {owner_uid}; root may bind any cgroup, a user only one delegated to them)",
            cgroup.display()
        ))
    }
}

/// The real uid in the text of /proc/PID/status (the first number of its `Uid:` line).
pub fn parse_status_uid(status: &str) -> Option<u32> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
}

/// The real uid of process `pid`, from `proc_root`/PID/status; `Err("no process P")` if there is
/// no such process.
pub fn owner_uid(proc_root: &Path, pid: i32) -> Result<u32, String> {
    if pid <= 0 {
        return Err(format!("no process {pid}"));
    }
    let path = proc_root.join(pid.to_string()).join("status");
    match std::fs::read_to_string(&path) {
        Ok(text) => parse_status_uid(&text).ok_or_else(|| format!("cannot read the owner of pid {pid}")),
        Err(e) if e.kind() == io::ErrorKind::NotFound || e.raw_os_error() == Some(libc::ESRCH) => {
            Err(format!("no process {pid}"))
        }
        Err(e) => Err(format!("cannot read the owner of pid {pid}: {e}")),
    }
}

/// The uid of the process at the other end of `stream`, as the kernel recorded it at connect.
pub fn peer_uid(stream: &UnixStream) -> io::Result<u32> {
    let cred = nix::sys::socket::getsockopt(stream, nix::sys::socket::sockopt::PeerCredentials)
        .map_err(io::Error::from)?;
    Ok(cred.uid())
}

/// What [`read_line`] found.
#[derive(Debug, PartialEq, Eq)]
pub enum LineRead {
    /// A line (newline and a trailing carriage return removed) in the buffer.
    Line,
    /// The peer closed the connection with nothing more to say.
    Eof,
    /// More than [`MAX_LINE`] bytes without a newline.
    TooLong,
}

/// Reads one line of at most [`MAX_LINE`] bytes into `buf`. A last line without a newline counts.
pub fn read_line<R: BufRead>(r: &mut R, buf: &mut Vec<u8>) -> io::Result<LineRead> {
    buf.clear();
    let n = r.by_ref().take(MAX_LINE as u64 + 1).read_until(b'\n', buf)?;
    if n == 0 {
        return Ok(LineRead::Eof);
    }
    if buf.last() == Some(&b'\n') {
        buf.pop();
        if buf.last() == Some(&b'\r') {
            buf.pop();
        }
        return Ok(LineRead::Line);
    }
    if buf.len() > MAX_LINE {
        return Ok(LineRead::TooLong);
    }
    Ok(LineRead::Line)
}

/// Why a client could not get a reply.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error(
        "no Terrace daemon is listening on {}; start one with `terrace daemon --config FILE` (as root), \
         or name its socket with --socket PATH", .0.display()
    )]
    NoDaemon(PathBuf),
    #[error("cannot reach the Terrace daemon at {}: permission denied (its socket should be mode 0666)", .0.display())]
    Denied(PathBuf),
    #[error("talking to the Terrace daemon at {}: {source}", .path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("the Terrace daemon at {} hung up without replying", .0.display())]
    NoReply(PathBuf),
}

/// Sends `request` (bytes, sent as they are; add the newline yourself) to the daemon at
/// `socket` and returns its first reply line.
pub fn call(socket: &Path, request: &[u8], timeout: Duration) -> Result<String, ClientError> {
    let io_err = |source| ClientError::Io { path: socket.to_path_buf(), source };
    let stream = UnixStream::connect(socket).map_err(|e| match e.raw_os_error() {
        Some(libc::ENOENT) | Some(libc::ECONNREFUSED) | Some(libc::ENOTDIR) => {
            ClientError::NoDaemon(socket.to_path_buf())
        }
        Some(libc::EACCES) | Some(libc::EPERM) => ClientError::Denied(socket.to_path_buf()),
        _ => io_err(e),
    })?;
    stream.set_read_timeout(Some(timeout)).map_err(io_err)?;
    stream.set_write_timeout(Some(timeout)).map_err(io_err)?;
    // The daemon may reject a request before reading all of it (too long) and hang up: its
    // reply is still there to read, so a failed write is not the end.
    let wrote = (&stream).write_all(request);
    let _ = stream.shutdown(std::net::Shutdown::Write);
    let mut reader = io::BufReader::new(&stream);
    let mut line = String::new();
    match reader.read_line(&mut line) {
        Ok(0) => match wrote {
            Err(e) => Err(io_err(e)),
            Ok(()) => Err(ClientError::NoReply(socket.to_path_buf())),
        },
        Ok(_) => Ok(line.trim_end().to_string()),
        Err(e) => Err(io_err(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn good_requests_parse() {
        assert_eq!(
            Request::parse(br#"{"op":"bind","pid":12,"policy":"age"}"#),
            Ok(Request::Bind { pid: 12, policy: Some("age".into()) })
        );
        assert_eq!(Request::parse(br#"{"pid":12,"op":"bind"}"#), Ok(Request::Bind { pid: 12, policy: None }));
        assert_eq!(Request::parse(br#" {"op":"unbind","pid":7} "#), Ok(Request::Unbind { pid: 7 }));
        assert_eq!(Request::parse(br#"{"op":"list"}"#), Ok(Request::List));
        assert_eq!(
            Request::parse(br#"{"op":"bind-cgroup","cgroup":"/sys/fs/cgroup/x","policy":"age"}"#),
            Ok(Request::BindCgroup { cgroup: "/sys/fs/cgroup/x".into(), policy: Some("age".into()) })
        );
        assert_eq!(
            Request::parse(br#"{"op":"bind-cgroup","cgroup":"/sys/fs/cgroup/x"}"#),
            Ok(Request::BindCgroup { cgroup: "/sys/fs/cgroup/x".into(), policy: None })
        );
        assert_eq!(
            Request::parse(br#"{"op":"unbind-cgroup","cgroup":"/sys/fs/cgroup/x"}"#),
            Ok(Request::UnbindCgroup { cgroup: "/sys/fs/cgroup/x".into() })
        );
        for r in [
            Request::List,
            Request::Unbind { pid: 3 },
            Request::Bind { pid: 4, policy: None },
            Request::BindCgroup { cgroup: "/sys/fs/cgroup/a b".into(), policy: Some("age".into()) },
            Request::UnbindCgroup { cgroup: "/sys/fs/cgroup/y".into() },
        ] {
            assert_eq!(Request::parse(r.to_line().as_bytes()), Ok(r.clone()));
        }
    }

    #[test]
    fn malformed_requests_say_what_is_wrong_in_one_line() {
        let cases: &[(&[u8], &str)] = &[
            (b"garbage", "not JSON"),
            (b"", "not JSON"),
            (b"{\"op\":\"bind\",\"pid\":1", "not JSON"),
            (b"\xff\xfe", "not JSON"),
            (b"[1,2]", "bad request"),
            (b"42", "bad request"),
            (br#"{"op":"frob","pid":1}"#, "frob"),
            (br#"{"pid":1}"#, "op"),
            (br#"{"op":"bind"}"#, "pid"),
            (br#"{"op":"unbind"}"#, "pid"),
            (br#"{"op":"bind","pid":"12"}"#, "bad request"),
            (br#"{"op":"bind","pid":99999999999}"#, "bad request"),
            (br#"{"op":"bind","pid":1,"polcy":"age"}"#, "polcy"),
            (br#"{"op":"bind","pid":1,"policy":3}"#, "bad request"),
            (br#"{"op":"bind-cgroup"}"#, "cgroup"),
            (br#"{"op":"bind-cgroup","pid":1}"#, "pid"),
            (br#"{"op":"bind-cgroup","cgroup":7}"#, "bad request"),
            (br#"{"op":"unbind-cgroup"}"#, "cgroup"),
            (br#"{"op":"unbind-cgroup","cgroup":"/x","policy":"age"}"#, "policy"),
            (br#"{"op":"bind_cgroup","cgroup":"/x"}"#, "bind_cgroup"),
        ];
        for (line, want) in cases {
            let e = Request::parse(line).expect_err(&String::from_utf8_lossy(line));
            assert!(e.contains(want), "{:?}: {e}", String::from_utf8_lossy(line));
            assert!(!e.contains('\n'), "{e}");
            assert!(e.contains(r#"{"op":"bind-cgroup","cgroup":"/sys/fs/cgroup/NAME"}"#), "{e}");
        }
    }

    #[test]
    fn replies_are_one_line_json() {
        let r = Reply::error("first\nsecond");
        assert_eq!(r.to_line(), r#"{"ok":false,"error":"first second"}"#);
        let r = Reply { pid: Some(3), ..Reply::ok("done") };
        assert_eq!(r.to_line(), r#"{"ok":true,"message":"done","pid":3}"#);
        let back: Reply = serde_json::from_str(&r.to_line()).unwrap();
        assert_eq!(back, r);
        assert_eq!(back.text(), "done");
        let r = Reply { cgroup: Some("/sys/fs/cgroup/x".into()), ..Reply::ok("done") };
        assert_eq!(r.to_line(), r#"{"ok":true,"message":"done","cgroup":"/sys/fs/cgroup/x"}"#);
    }

    /// A cgroup binding says which cgroup and how many processes; a process binding has no
    /// `cgroup`; a reply of a daemon that did not know `processes` still parses.
    #[test]
    fn list_entries_show_cgroups_and_their_process_count() {
        let entry = ProcessEntry {
            pid: 0,
            cgroup: Some("/sys/fs/cgroup/x".into()),
            processes: 3,
            uid: 1000,
            policy: "age".into(),
            seconds: 1.5,
            pages_per_tier: vec![1, 2],
            pages_moved: 4,
            moves_failed: 0,
            dry_run: false,
        };
        let line = serde_json::to_string(&entry).unwrap();
        assert!(
            line.starts_with(r#"{"pid":0,"cgroup":"/sys/fs/cgroup/x","processes":3,"uid":1000,"#),
            "{line}"
        );
        assert_eq!(serde_json::from_str::<ProcessEntry>(&line).unwrap(), entry);
        let pid = ProcessEntry { pid: 42, cgroup: None, processes: 1, ..entry };
        let line = serde_json::to_string(&pid).unwrap();
        assert!(!line.contains("cgroup"), "{line}");
        let old = r#"{"pid":42,"uid":0,"policy":"age","seconds":1.0,"pages_per_tier":[],"pages_moved":0,"moves_failed":0,"dry_run":false}"#;
        let parsed: ProcessEntry = serde_json::from_str(old).unwrap();
        assert_eq!((parsed.cgroup, parsed.processes), (None, 0));
    }

    #[test]
    fn root_or_the_owner_may_manage_a_process_nobody_else() {
        assert!(may_manage(0, 0));
        assert!(may_manage(0, 1000));
        assert!(may_manage(1000, 1000));
        assert!(!may_manage(1000, 0));
        assert!(!may_manage(1000, 1001));
        assert_eq!(
            authorize(1000, 42, 0).unwrap_err(),
            "permission denied: uid 1000 may not manage pid 42 (owned by uid 0)"
        );
        assert!(authorize(1001, 42, 1001).is_ok());
        let dir = Path::new("/sys/fs/cgroup/x");
        assert!(authorize_cgroup(0, dir, 1000).is_ok());
        assert!(authorize_cgroup(1000, dir, 1000).is_ok());
        let e = authorize_cgroup(1000, dir, 0).unwrap_err();
        assert!(
            e.starts_with("permission denied: uid 1000 may not manage cgroup /sys/fs/cgroup/x (its directory is owned by uid 0"),
            "{e}"
        );
    }

    #[test]
    fn owner_comes_from_the_real_uid_of_proc_status() {
        let status = "Name:\tcat\nUmask:\t0022\nState:\tR (running)\nUid:\t1000\t0\t0\t0\nGid:\t1000\t1000\t1000\t1000\n";
        assert_eq!(parse_status_uid(status), Some(1000));
        assert_eq!(parse_status_uid("Name:\tx\n"), None);
        let me = std::process::id() as i32;
        assert_eq!(owner_uid(Path::new("/proc"), me), Ok(nix::unistd::getuid().as_raw()));
        assert_eq!(owner_uid(Path::new("/proc"), 0), Err("no process 0".into()));
        assert_eq!(owner_uid(Path::new("/proc"), i32::MAX), Err(format!("no process {}", i32::MAX)));
    }

    #[test]
    fn lines_are_bounded() {
        let mut buf = Vec::new();
        let mut r = io::Cursor::new(b"one\r\ntwo\nlast".to_vec());
        assert_eq!(read_line(&mut r, &mut buf).unwrap(), LineRead::Line);
        assert_eq!(buf, b"one");
        assert_eq!(read_line(&mut r, &mut buf).unwrap(), LineRead::Line);
        assert_eq!(buf, b"two");
        assert_eq!(read_line(&mut r, &mut buf).unwrap(), LineRead::Line);
        assert_eq!(buf, b"last");
        assert_eq!(read_line(&mut r, &mut buf).unwrap(), LineRead::Eof);

        let mut exact = vec![b'a'; MAX_LINE];
        exact.push(b'\n');
        assert_eq!(read_line(&mut io::Cursor::new(exact), &mut buf).unwrap(), LineRead::Line);
        assert_eq!(buf.len(), MAX_LINE);
        let long = vec![b'a'; MAX_LINE + 10];
        assert_eq!(read_line(&mut io::Cursor::new(long), &mut buf).unwrap(), LineRead::TooLong);
    }
}
