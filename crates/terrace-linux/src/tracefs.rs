//! The kernel's tracing filesystem (Documentation/trace/ftrace.rst, "Instances", and
//! Documentation/trace/events.rst): a private instance of the trace buffer with one event
//! enabled and filtered, read as text from the instance's `trace_pipe`.
//!
//! An instance has its own buffer and its own events, so reading it neither sees nor consumes
//! what anyone else traces. Its name carries Terrace's pid, so an instance that a Terrace killed
//! with SIGKILL left behind is removed by the next ([`Instance::create`]).

use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use std::fs;
use std::io::{self, Read};
use std::os::fd::AsFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

/// Where tracefs is mounted on current systems (systemd mounts it there at boot).
const TRACEFS: &str = "/sys/kernel/tracing";
/// Instances Terrace makes are named `terrace-PID-N`.
const PREFIX: &str = "terrace-";

#[derive(Debug, thiserror::Error)]
pub enum TracefsError {
    #[error("tracefs is not mounted and cannot be mounted at {TRACEFS}: {0}")]
    Unmounted(String),
    #[error("this kernel has no {0} trace event")]
    NoEvent(String),
    #[error("tracefs: cannot {what} {path}: {source}")]
    Io {
        what: &'static str,
        path: String,
        #[source]
        source: io::Error,
    },
}

fn io_err<'a>(what: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> TracefsError + 'a {
    move |source| TracefsError::Io { what, path: path.display().to_string(), source }
}

/// tracefs's mount point: the first tracefs in /proc/mounts, or debugfs's `tracing` directory
/// (kernels before 4.1 mounted it there); failing both, tracefs is mounted at
/// /sys/kernel/tracing, as perf does when it finds it unmounted (tools/lib/api/fs/tracing_path.c).
/// The mount is left in place, as systemd's would be: it holds nothing until someone traces.
fn mount_point() -> Result<PathBuf, TracefsError> {
    let mounts = fs::read_to_string("/proc/mounts").unwrap_or_default();
    if let Some(p) = mounted(&mounts) {
        return Ok(p);
    }
    let target = Path::new(TRACEFS);
    if !target.is_dir() {
        return Err(TracefsError::Unmounted(format!("{TRACEFS} does not exist")));
    }
    nix::mount::mount(Some("tracefs"), target, Some("tracefs"), nix::mount::MsFlags::empty(), None::<&str>)
        .map_err(|e| TracefsError::Unmounted(e.desc().to_string()))?;
    tracing::info!("mounted tracefs at {TRACEFS} (it was not mounted), as perf does");
    Ok(target.to_path_buf())
}

/// tracefs's mount point in the text of /proc/mounts, if it is mounted.
fn mounted(mounts: &str) -> Option<PathBuf> {
    let fields = || mounts.lines().map(|l| l.split_whitespace().collect::<Vec<_>>());
    fields().find(|f| f.len() > 2 && f[2] == "tracefs").map(|f| PathBuf::from(f[1])).or_else(|| {
        fields()
            .find(|f| f.len() > 2 && f[2] == "debugfs")
            .map(|f| Path::new(f[1]).join("tracing"))
            .filter(|p| p.join("instances").is_dir())
    })
}

/// A tracefs instance of Terrace's: removed when dropped.
pub struct Instance {
    dir: PathBuf,
}

impl Instance {
    /// Makes an instance `terrace-PID-N` (this process's pid, its Nth instance) under tracefs,
    /// first removing any whose process is gone, and checks that the event `system/event` exists.
    pub fn create(system: &str, event: &str) -> Result<Self, TracefsError> {
        let root = mount_point()?;
        if !root.join("events").join(system).join(event).is_dir() {
            return Err(TracefsError::NoEvent(format!("{system}:{event}")));
        }
        let instances = root.join("instances");
        remove_stale(&instances);
        // Numbered within this process, so that two instances of one Terrace never share one.
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir = instances.join(format!("{PREFIX}{}-{n}", std::process::id()));
        match fs::create_dir(&dir) {
            // Left by an earlier process of the same pid that was killed: it is unused.
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            done => done.map_err(io_err("make the instance", &dir))?,
        }
        Ok(Instance { dir })
    }

    /// Enables `system/event` in this instance, recording only what `filter` (the event filter
    /// syntax: `common_pid == 123`) lets through.
    pub fn enable(&self, system: &str, event: &str, filter: &str) -> Result<(), TracefsError> {
        let ev = self.dir.join("events").join(system).join(event);
        let filter_path = ev.join("filter");
        fs::write(&filter_path, filter).map_err(io_err("write", &filter_path))?;
        let enable = ev.join("enable");
        fs::write(&enable, "1").map_err(io_err("write", &enable))
    }

    /// The instance's `trace_pipe`, opened without blocking: reading it consumes the events.
    pub fn pipe(&self) -> Result<Pipe, TracefsError> {
        let path = self.dir.join("trace_pipe");
        let file = fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&path)
            .map_err(io_err("open", &path))?;
        Ok(Pipe { file, buf: vec![0; 64 * 1024], pending: Vec::new() })
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        // Removing an instance turns its events off and frees its buffer; it fails (EBUSY) only
        // while a file of it is open, which a `Pipe` dropped first is not.
        let _ = fs::remove_dir(&self.dir);
    }
}

/// Removes the instances `terrace-PID-N` in `instances` whose process PID is gone.
fn remove_stale(instances: &Path) {
    let Ok(entries) = fs::read_dir(instances) else { return };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(PREFIX))
            .and_then(|n| n.split_once('-'))
            .and_then(|(p, _)| p.parse::<u32>().ok())
        else {
            continue;
        };
        if !Path::new("/proc").join(pid.to_string()).exists() {
            match fs::remove_dir(e.path()) {
                Ok(()) => tracing::info!("tracefs: removed the instance a Terrace (pid {pid}, gone) left"),
                Err(err) => tracing::warn!("tracefs: cannot remove {}: {err}", e.path().display()),
            }
        }
    }
}

/// A tracefs `trace_pipe`, read line by line.
pub struct Pipe {
    file: fs::File,
    buf: Vec<u8>,
    /// The start of a line whose end has not been read yet.
    pending: Vec<u8>,
}

impl Pipe {
    /// Waits up to `timeout` for events, then calls `line` for each whole line read; returns how
    /// many lines that was (0 if none came in time).
    pub fn read_lines(&mut self, timeout: Duration, mut line: impl FnMut(&str)) -> io::Result<usize> {
        let ms = u16::try_from(timeout.as_millis()).unwrap_or(u16::MAX);
        let started = std::time::Instant::now();
        let mut fds = [PollFd::new(self.file.as_fd(), PollFlags::POLLIN)];
        // Read after the wait whatever poll says: a kernel may report the pipe readable only
        // once the instance's `buffer_percent` of its buffer is full (ring_buffer_poll_wait).
        match poll(&mut fds, PollTimeout::from(ms)) {
            Ok(_) | Err(nix::errno::Errno::EINTR) => {}
            Err(e) => return Err(e.into()),
        }
        let mut lines = 0;
        loop {
            let n = match self.file.read(&mut self.buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            self.pending.extend_from_slice(&self.buf[..n]);
            lines += split_lines(&mut self.pending, &mut line);
        }
        // A pipe that polls readable with nothing in it (the `block` trace option) must not
        // make the caller spin: nothing read waits out the timeout.
        if lines == 0 {
            std::thread::sleep(timeout.saturating_sub(started.elapsed()));
        }
        Ok(lines)
    }
}

/// Calls `line` for each whole line at the start of `pending` and keeps the unfinished rest.
fn split_lines(pending: &mut Vec<u8>, line: &mut impl FnMut(&str)) -> usize {
    let mut lines = 0;
    let mut start = 0;
    while let Some(end) = pending[start..].iter().position(|&b| b == b'\n') {
        line(&String::from_utf8_lossy(&pending[start..start + end]));
        lines += 1;
        start += end + 1;
    }
    pending.drain(..start);
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mount_point_is_tracefs_or_debugfs_tracing() {
        let m = "sysfs /sys sysfs rw 0 0\ntracefs /sys/kernel/tracing tracefs rw 0 0\n";
        assert_eq!(mounted(m), Some(PathBuf::from("/sys/kernel/tracing")));
        assert_eq!(mounted("sysfs /sys sysfs rw 0 0\n"), None);
    }

    #[test]
    fn only_the_instances_of_terraces_that_are_gone_are_removed() {
        let dir = tempfile::tempdir().unwrap();
        // Above any pid_max (2^22): no such process.
        let mine = format!("terrace-{}-0", std::process::id());
        let names = ["terrace-999999999-0", &mine, "terrace-999999999", "terrace-x-1", "other"];
        for n in names {
            fs::create_dir(dir.path().join(n)).unwrap();
        }
        remove_stale(dir.path());
        let mut left: Vec<String> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        left.sort();
        assert_eq!(left, ["other", &mine, "terrace-999999999", "terrace-x-1"]);
    }

    #[test]
    fn lines_split_across_reads_are_joined() {
        let mut pending = b"first line\nsecond ha".to_vec();
        let mut got = Vec::new();
        assert_eq!(split_lines(&mut pending, &mut |l: &str| got.push(l.to_string())), 1);
        pending.extend_from_slice(b"lf\n\nthird");
        assert_eq!(split_lines(&mut pending, &mut |l: &str| got.push(l.to_string())), 2);
        assert_eq!(got, ["first line", "second half", ""]);
        assert_eq!(pending, b"third");
    }
}
