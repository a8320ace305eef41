//! The kernel's tracing filesystem (Documentation/trace/events.rst): where a trace event is
//! described, its id and the layout of the raw record the kernel writes for it. Terrace reads the
//! events themselves through perf ([`crate::tracepoint`]), not through tracefs's buffers.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

/// Where tracefs is mounted on current systems (systemd mounts it there at boot).
const TRACEFS: &str = "/sys/kernel/tracing";

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
    if let Err(e) = nix::mount::mount(
        Some("tracefs"),
        target,
        Some("tracefs"),
        nix::mount::MsFlags::empty(),
        None::<&str>,
    ) {
        // Another thread or process may have mounted it since /proc/mounts was read: the
        // second of two mounts at once fails with EBUSY.
        let mounts = fs::read_to_string("/proc/mounts").unwrap_or_default();
        return mounted(&mounts).ok_or_else(|| TracefsError::Unmounted(e.desc().to_string()));
    }
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
            .filter(|p| p.join("events").is_dir())
    })
}

/// A trace event's description, from its tracefs `format` file (Documentation/trace/events.rst,
/// "Event formats"): its id, which perf_event_open(2) takes as a tracepoint's config, and where
/// each field lies in the raw record the kernel writes.
#[derive(Clone, Debug)]
pub struct EventFormat {
    pub id: u64,
    fields: Vec<(String, Field)>,
}

/// One field of a raw trace record: `size` bytes at `offset`, in the host's byte order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Field {
    pub offset: usize,
    pub size: usize,
}

impl Field {
    /// The field's value in `raw` as an unsigned integer (fields of 1, 2, 4 or 8 bytes); `None` if
    /// the record is too short for it.
    pub fn read(&self, raw: &[u8]) -> Option<u64> {
        let b = raw.get(self.offset..self.offset + self.size)?;
        Some(match self.size {
            1 => b[0] as u64,
            2 => u16::from_ne_bytes(b.try_into().ok()?) as u64,
            4 => u32::from_ne_bytes(b.try_into().ok()?) as u64,
            8 => u64::from_ne_bytes(b.try_into().ok()?),
            _ => return None,
        })
    }
}

impl EventFormat {
    /// The format of `system:event` under tracefs (mounted first if it is not).
    pub fn load(system: &str, event: &str) -> Result<Self, TracefsError> {
        let dir = mount_point()?.join("events").join(system).join(event);
        if !dir.is_dir() {
            return Err(TracefsError::NoEvent(format!("{system}:{event}")));
        }
        let path = dir.join("format");
        let text = fs::read_to_string(&path).map_err(io_err("read", &path))?;
        Self::parse(&text).ok_or_else(|| TracefsError::Io {
            what: "parse",
            path: path.display().to_string(),
            source: io::Error::new(io::ErrorKind::InvalidData, "no ID line or no fields"),
        })
    }

    /// Parses a `format` file's text: its `ID:` line and its `field:TYPE NAME; offset:N; size:N;`
    /// lines.
    pub fn parse(text: &str) -> Option<Self> {
        let id = text.lines().find_map(|l| l.trim().strip_prefix("ID:"))?.trim().parse().ok()?;
        let fields: Vec<(String, Field)> = text
            .lines()
            .filter_map(|l| {
                let mut parts = l.trim().split(';').map(str::trim);
                let decl = parts.next()?.strip_prefix("field:")?;
                // The name is the declaration's last word, less any array bounds.
                let name = decl.split_whitespace().last()?.split('[').next()?.to_string();
                let mut number = |key: &str| parts.next()?.strip_prefix(key)?.trim().parse().ok();
                Some((name, Field { offset: number("offset:")?, size: number("size:")? }))
            })
            .collect();
        (!fields.is_empty()).then_some(EventFormat { id, fields })
    }

    /// The field called `name`.
    pub fn field(&self, name: &str) -> Option<Field> {
        self.fields.iter().find(|(n, _)| n == name).map(|(_, f)| *f)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[test]
    fn the_mount_point_is_tracefs_or_debugfs_tracing() {
        let m = "sysfs /sys sysfs rw 0 0\ntracefs /sys/kernel/tracing tracefs rw 0 0\n";
        assert_eq!(mounted(m), Some(PathBuf::from("/sys/kernel/tracing")));
        assert_eq!(mounted("sysfs /sys sysfs rw 0 0\n"), None);
    }

    /// damon_aggregated's format as Linux 6.18 gives it.
    pub(crate) const DAMON_AGGREGATED: &str = "name: damon_aggregated
ID: 767
format:
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;

\tfield:unsigned long target_id;\toffset:8;\tsize:8;\tsigned:0;
\tfield:unsigned int nr_regions;\toffset:16;\tsize:4;\tsigned:0;
\tfield:unsigned long start;\toffset:24;\tsize:8;\tsigned:0;
\tfield:unsigned long end;\toffset:32;\tsize:8;\tsigned:0;
\tfield:unsigned int nr_accesses;\toffset:40;\tsize:4;\tsigned:0;
\tfield:unsigned int age;\toffset:44;\tsize:4;\tsigned:0;

print fmt: \"target_id=%lu nr_regions=%u %lu-%lu: %u %u\", REC->target_id, REC->nr_regions
";

    #[test]
    fn a_format_file_gives_the_id_and_each_fields_place() {
        let f = EventFormat::parse(DAMON_AGGREGATED).unwrap();
        assert_eq!(f.id, 767);
        assert_eq!(f.field("common_pid"), Some(Field { offset: 4, size: 4 }));
        assert_eq!(f.field("end"), Some(Field { offset: 32, size: 8 }));
        assert_eq!(f.field("age"), Some(Field { offset: 44, size: 4 }));
        assert_eq!(f.field("nope"), None);
        let arrays = "ID: 1\n\tfield:char comm[16];\toffset:8;\tsize:16;\tsigned:0;\n";
        assert_eq!(EventFormat::parse(arrays).unwrap().field("comm"), Some(Field { offset: 8, size: 16 }));
        assert!(EventFormat::parse("name: x\nformat:\n").is_none());
    }

    #[test]
    fn a_field_reads_its_bytes_in_host_order() {
        let mut raw = vec![0u8; 48];
        raw[32..40].copy_from_slice(&0x7f00_0000_1000u64.to_ne_bytes());
        raw[40..44].copy_from_slice(&17u32.to_ne_bytes());
        assert_eq!(Field { offset: 32, size: 8 }.read(&raw), Some(0x7f00_0000_1000));
        assert_eq!(Field { offset: 40, size: 4 }.read(&raw), Some(17));
        assert_eq!(Field { offset: 44, size: 8 }.read(&raw), None, "past the record's end");
    }
}
