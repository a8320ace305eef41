//! Terrace's end of the shadow agent ([`crate::shadow_region`]): a socket a program started by
//! `terrace run` connects to, and the line protocol both ends speak.
//!
//! The protocol is one line each way per request, so that a person can follow it with `socat`:
//! - agent, once, on connecting: `terrace-shadow 1 region <base address, hex> <pages>`
//! - Terrace: `move <node> <keep shadow: 0|1> <page index> ...`
//! - agent: `done <shadows dropped by writes so far> <one result per page>`, where a result is
//!   `s` (switched back to its shadow: no copy), `c` (copied), `=` (already there) or an errno.
//!
//! A malformed line gets `error <why>`. Whatever goes wrong on the socket, Terrace drops the link
//! and moves the region's pages with move_pages from then on; the agent's thread ends, and the
//! program runs on.

use std::io::{self, BufRead, BufReader, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The environment variable that gives the program the socket's path.
pub const ENV: &str = "TERRACE_SHADOW_AGENT";

/// How long Terrace waits for the agent's hello, and for its answer to a move.
const HELLO_TIMEOUT: Duration = Duration::from_secs(2);
const MOVE_TIMEOUT: Duration = Duration::from_secs(30);

/// The agent's first line.
pub fn hello(base: u64, pages: u64) -> String {
    format!("terrace-shadow 1 region {base:#x} {pages}")
}

/// The region a hello names: (base address, pages).
pub fn parse_hello(line: &str) -> Result<(u64, u64), String> {
    let f: Vec<&str> = line.split_whitespace().collect();
    match f.as_slice() {
        ["terrace-shadow", "1", "region", base, pages] => {
            let base =
                u64::from_str_radix(base.trim_start_matches("0x"), 16).map_err(|e| format!("base: {e}"))?;
            let pages = pages.parse().map_err(|e| format!("pages: {e}"))?;
            if base % 4096 != 0 || pages == 0 {
                return Err(format!("not a page-aligned region: {line:?}"));
            }
            Ok((base, pages))
        }
        _ => Err(format!("not a version 1 hello: {line:?}")),
    }
}

/// Terrace's request: move `pages` (indices in the region) to `node`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MoveRequest {
    pub node: u32,
    /// Keep each page's old copy as its shadow (a promotion, mtier §3.1).
    pub keep_shadow: bool,
    pub pages: Vec<u32>,
}

impl MoveRequest {
    pub fn to_line(&self) -> String {
        let mut line = format!("move {} {}", self.node, u8::from(self.keep_shadow));
        for p in &self.pages {
            line += &format!(" {p}");
        }
        line
    }

    pub fn parse(line: &str) -> Result<MoveRequest, String> {
        let mut f = line.split_whitespace();
        if f.next() != Some("move") {
            return Err(format!("not a move: {line:?}"));
        }
        let node = f.next().and_then(|n| n.parse().ok()).ok_or("no node")?;
        let keep_shadow = match f.next() {
            Some("0") => false,
            Some("1") => true,
            _ => return Err("keep-shadow must be 0 or 1".into()),
        };
        let pages = f.map(|p| p.parse().map_err(|e| format!("page {p:?}: {e}"))).collect::<Result<_, _>>()?;
        Ok(MoveRequest { node, keep_shadow, pages })
    }
}

/// What became of one page of a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PageResult {
    Switched,
    Copied,
    Stayed,
    /// The errno of what failed.
    Failed(i32),
}

/// The agent's answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MoveReply {
    pub results: Vec<PageResult>,
    /// Shadows the program's writes have dropped since it started.
    pub dropped: u64,
}

impl MoveReply {
    pub fn to_line(&self) -> String {
        let mut line = format!("done {}", self.dropped);
        for r in &self.results {
            match r {
                PageResult::Switched => line += " s",
                PageResult::Copied => line += " c",
                PageResult::Stayed => line += " =",
                PageResult::Failed(e) => line += &format!(" {e}"),
            }
        }
        line
    }

    pub fn parse(line: &str) -> Result<MoveReply, String> {
        let mut f = line.split_whitespace();
        match f.next() {
            Some("done") => {}
            Some("error") => return Err(format!("the agent refused the request: {line}")),
            _ => return Err(format!("not a reply: {line:?}")),
        }
        let dropped = f.next().and_then(|d| d.parse().ok()).ok_or("no dropped count")?;
        let results = f
            .map(|r| match r {
                "s" => Ok(PageResult::Switched),
                "c" => Ok(PageResult::Copied),
                "=" => Ok(PageResult::Stayed),
                e => e.parse().map(PageResult::Failed).map_err(|_| format!("result {e:?}")),
            })
            .collect::<Result<_, _>>()?;
        Ok(MoveReply { results, dropped })
    }
}

/// The socket agents connect to, removed when dropped.
pub struct ShadowListener {
    listener: UnixListener,
    path: PathBuf,
}

impl ShadowListener {
    /// Binds a socket in the temporary directory, private to this user.
    pub fn bind() -> io::Result<ShadowListener> {
        use std::sync::atomic::{AtomicU32, Ordering};
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let name =
            format!("terrace-shadow-{}-{}.sock", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed));
        let path = std::env::temp_dir().join(name);
        let _ = std::fs::remove_file(&path);
        let listener = UnixListener::bind(&path)?;
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))?;
        listener.set_nonblocking(true)?;
        Ok(ShadowListener { listener, path })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The agents that have connected since the last call and said hello; one that says
    /// something else is logged and dropped.
    pub fn accept_ready(&self) -> Vec<ShadowLink> {
        let mut links = Vec::new();
        while let Ok((stream, _)) = self.listener.accept() {
            match ShadowLink::from_stream(stream) {
                Ok(link) => links.push(link),
                Err(e) => tracing::warn!(target: "terrace::plan", "a shadow agent could not connect: {e}"),
            }
        }
        links
    }
}

impl Drop for ShadowListener {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// One program's agent: its region, and the socket to ask it for moves.
pub struct ShadowLink {
    pid: i32,
    base: u64,
    pages: u64,
    reader: BufReader<UnixStream>,
    writer: UnixStream,
    /// Shadows dropped by the program's writes, as the agent last said.
    pub dropped: u64,
}

impl ShadowLink {
    fn from_stream(stream: UnixStream) -> io::Result<ShadowLink> {
        stream.set_nonblocking(false)?;
        stream.set_read_timeout(Some(HELLO_TIMEOUT))?;
        let cred = nix::sys::socket::getsockopt(&stream, nix::sys::socket::sockopt::PeerCredentials)
            .map_err(io::Error::from)?;
        let writer = stream.try_clone()?;
        let mut reader = BufReader::new(stream);
        let mut line = String::new();
        reader.read_line(&mut line)?;
        let (base, pages) = parse_hello(line.trim()).map_err(io::Error::other)?;
        writer.set_read_timeout(Some(MOVE_TIMEOUT))?;
        Ok(ShadowLink { pid: cred.pid(), base, pages, reader, writer, dropped: 0 })
    }

    /// The process the agent runs in.
    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// The region's page index of address `addr`, if it is in the region.
    pub fn index_of(&self, addr: u64) -> Option<u32> {
        let i = addr.checked_sub(self.base)? / 4096;
        (i < self.pages).then_some(i as u32)
    }

    /// Asks for `req` and waits for the answer (one result per page asked).
    pub fn request(&mut self, req: &MoveRequest) -> io::Result<MoveReply> {
        writeln!(self.writer, "{}", req.to_line())?;
        let mut line = String::new();
        if self.reader.read_line(&mut line)? == 0 {
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "the agent closed its socket"));
        }
        let reply = MoveReply::parse(line.trim()).map_err(io::Error::other)?;
        if reply.results.len() != req.pages.len() {
            return Err(io::Error::other(format!(
                "the agent answered {} pages of {}",
                reply.results.len(),
                req.pages.len()
            )));
        }
        self.dropped = reply.dropped;
        Ok(reply)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_and_replies_read_back_as_written() {
        let req = MoveRequest { node: 1, keep_shadow: true, pages: vec![0, 7, 4096] };
        assert_eq!(MoveRequest::parse(&req.to_line()), Ok(req));
        let reply = MoveReply {
            results: vec![
                PageResult::Switched,
                PageResult::Copied,
                PageResult::Stayed,
                PageResult::Failed(12),
            ],
            dropped: 3,
        };
        assert_eq!(reply.to_line(), "done 3 s c = 12");
        assert_eq!(MoveReply::parse(&reply.to_line()), Ok(reply));
        assert_eq!(parse_hello(&hello(0x7f00_0000_0000, 16)), Ok((0x7f00_0000_0000, 16)));
    }

    #[test]
    fn malformed_lines_are_refused_with_a_reason() {
        assert!(MoveRequest::parse("move 1 2 3").unwrap_err().contains("keep-shadow"));
        assert!(MoveRequest::parse("moev 1 0").is_err());
        assert!(MoveReply::parse("error bad").unwrap_err().contains("refused"));
        assert!(parse_hello("terrace-shadow 2 region 0x1000 1").is_err());
        assert!(parse_hello("terrace-shadow 1 region 0x1001 1").is_err());
    }

    /// The whole round trip on one host: a region in this process serves a link over the
    /// socket; moves to node 0 (which every host has) come back one result per page.
    #[test]
    fn a_link_asks_and_the_agent_answers_over_the_socket() {
        let listener = ShadowListener::bind().unwrap();
        let client = UnixStream::connect(listener.path()).unwrap();
        let mut w = client.try_clone().unwrap();
        writeln!(w, "{}", hello(0x10_0000, 4)).unwrap();
        let mut links = Vec::new();
        for _ in 0..100 {
            links.extend(listener.accept_ready());
            if !links.is_empty() {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let mut link = links.pop().expect("the agent connected");
        assert_eq!(link.pid(), std::process::id() as i32);
        assert_eq!(link.index_of(0x10_0000 + 3 * 4096 + 5), Some(3));
        assert_eq!(link.index_of(0x10_0000 + 4 * 4096), None);
        // A fake agent: answers the one request it gets.
        let agent = std::thread::spawn(move || {
            let mut line = String::new();
            BufReader::new(client).read_line(&mut line).unwrap();
            let req = MoveRequest::parse(line.trim()).unwrap();
            let results = req.pages.iter().map(|_| PageResult::Copied).collect();
            writeln!(w, "{}", MoveReply { results, dropped: 2 }.to_line()).unwrap();
        });
        let reply = link.request(&MoveRequest { node: 0, keep_shadow: false, pages: vec![1, 2] }).unwrap();
        agent.join().unwrap();
        assert_eq!(reply.results, vec![PageResult::Copied; 2]);
        assert_eq!(link.dropped, 2);
        // The agent is gone: the next request fails instead of hanging.
        assert!(link.request(&MoveRequest { node: 0, keep_shadow: false, pages: vec![1] }).is_err());
    }
}
