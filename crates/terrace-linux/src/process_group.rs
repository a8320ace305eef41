//! Which processes one policy manages together, found anew at every full scan: one process, a
//! program and every process it started (`terrace run`: make, shells, python multiprocessing,
//! servers with workers), or every process of a cgroup (the daemon's `bind --cgroup`, the way
//! memtierd selects processes). The fast tier's share (`tiers.fast_limit_mib`) is the group's.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

/// Where a machine's processes come from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Selection {
    /// The process alone (`terrace bind PID`).
    Process,
    /// The process and its descendants, as they come and go (`terrace run`).
    Tree,
    /// Every process in a cgroup v2 directory and the cgroups below it; with `owner`, only
    /// those whose real uid is that (a cgroup bound by its user, not by root: other users'
    /// processes in it are not theirs to manage).
    Cgroup { dir: PathBuf, owner: Option<u32> },
}

impl Selection {
    /// The processes selected now, `root` first when it is one of them. A process that is
    /// gone between two reads is simply not there.
    pub fn find(&self, proc_root: &Path, root: i32) -> Vec<i32> {
        match self {
            Selection::Process => vec![root],
            Selection::Tree => descendants(proc_root, root),
            Selection::Cgroup { dir, owner } => {
                let mut pids = BTreeSet::new();
                cgroup_pids(dir, &mut pids);
                // A process that is gone has no owner, and is not there either.
                pids.into_iter()
                    .filter(|&p| owner.is_none_or(|uid| crate::control::owner_uid(proc_root, p) == Ok(uid)))
                    .collect()
            }
        }
    }
}

/// `root` and every process below it, breadth first: the children of each of a process's
/// threads are in `/proc/PID/task/TID/children` (a child forked by any thread is listed under
/// that thread). A process whose parent exited is re-parented away from the tree (to init or a
/// subreaper) and leaves it.
pub fn descendants(proc_root: &Path, root: i32) -> Vec<i32> {
    let mut out = vec![root];
    let mut seen = BTreeSet::from([root]);
    let mut at = 0;
    while at < out.len() {
        let pid = out[at];
        at += 1;
        let Ok(tasks) = fs::read_dir(proc_root.join(pid.to_string()).join("task")) else { continue };
        for task in tasks.flatten() {
            let Ok(text) = fs::read_to_string(task.path().join("children")) else { continue };
            for child in text.split_whitespace().filter_map(|c| c.parse::<i32>().ok()) {
                if seen.insert(child) {
                    out.push(child);
                }
            }
        }
    }
    out
}

/// The pids in `dir`'s `cgroup.procs` and in those of every cgroup below it.
fn cgroup_pids(dir: &Path, pids: &mut BTreeSet<i32>) {
    if let Ok(text) = fs::read_to_string(dir.join("cgroup.procs")) {
        pids.extend(text.split_whitespace().filter_map(|p| p.parse::<i32>().ok()));
    }
    if let Ok(entries) = fs::read_dir(dir) {
        for e in entries.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                cgroup_pids(&e.path(), pids);
            }
        }
    }
}

/// Whether `pid` is in the cgroup `dir` or a cgroup below it now.
pub fn cgroup_holds(dir: &Path, pid: i32) -> bool {
    let mut pids = BTreeSet::new();
    cgroup_pids(dir, &mut pids);
    pids.contains(&pid)
}

/// Why `dir` cannot be managed as a cgroup, if it cannot: it must be a directory of the cgroup v2
/// hierarchy (it has `cgroup.procs`).
pub fn check_cgroup(dir: &Path) -> Result<(), String> {
    if !dir.is_dir() {
        return Err(format!(
            "{} is not a directory; give a cgroup v2 directory such as /sys/fs/cgroup/system.slice/NAME.service",
            dir.display()
        ));
    }
    if !dir.join("cgroup.procs").is_file() {
        return Err(format!(
            "{} has no cgroup.procs, so it is not a cgroup v2 directory; give one under /sys/fs/cgroup",
            dir.display()
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Command, Stdio};

    /// A shell that starts two sleeping children, one of which starts a grandchild: all four are
    /// found, the shell first.
    #[test]
    fn a_program_and_every_process_below_it_are_found() {
        let mut sh = Command::new("/bin/sh")
            .args(["-c", "sleep 30 & sh -c 'sleep 30 & wait' & wait"])
            .stdin(Stdio::null())
            .spawn()
            .expect("sh starts");
        let root = sh.id() as i32;
        let proc_root = Path::new("/proc");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let mut found = Vec::new();
        while std::time::Instant::now() < deadline {
            found = descendants(proc_root, root);
            if found.len() >= 4 {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let all = descendants(proc_root, root);
        let _ = Command::new("/bin/kill").args(all.iter().skip(1).map(|p| p.to_string())).status();
        let _ = sh.kill();
        let _ = sh.wait();
        assert_eq!(found.first(), Some(&root));
        assert_eq!(found.len(), 4, "sh, sleep, sh, sleep: {found:?}");
        assert!(Selection::Process.find(proc_root, root) == vec![root]);
    }

    /// The cgroup walk reads cgroup.procs at every level, on a directory laid out like cgroupfs.
    #[test]
    fn a_cgroup_and_the_cgroups_below_it_are_read() {
        let dir = std::env::temp_dir().join(format!("terrace-cgroup-{}", std::process::id()));
        let sub = dir.join("workers");
        fs::create_dir_all(&sub).unwrap();
        fs::write(dir.join("cgroup.procs"), "12\n7\n").unwrap();
        fs::write(sub.join("cgroup.procs"), "30\n12\n").unwrap();
        let found = Selection::Cgroup { dir: dir.clone(), owner: None }.find(Path::new("/proc"), 0);
        assert_eq!(found, vec![7, 12, 30]);
        assert!(check_cgroup(&dir).is_ok());
        assert!(check_cgroup(&dir.join("missing")).unwrap_err().contains("not a directory"));
        fs::remove_file(sub.join("cgroup.procs")).unwrap();
        assert!(check_cgroup(&sub).unwrap_err().contains("no cgroup.procs"));
        fs::remove_dir_all(&dir).unwrap();
    }

    /// With an owner, only the processes whose real uid (the `Uid:` line of /proc/PID/status)
    /// is that are selected; a process without a status (gone) is not.
    #[test]
    fn a_cgroup_bound_by_its_user_selects_only_that_users_processes() {
        let dir = std::env::temp_dir().join(format!("terrace-cgroup-owner-{}", std::process::id()));
        let (cgroup, proc_root) = (dir.join("cg"), dir.join("proc"));
        fs::create_dir_all(cgroup.join("sub")).unwrap();
        fs::write(cgroup.join("cgroup.procs"), "7\n12\n30\n").unwrap();
        fs::write(cgroup.join("sub/cgroup.procs"), "41\n").unwrap();
        for (pid, uid) in [(7, 1000), (12, 0), (41, 1000)] {
            fs::create_dir_all(proc_root.join(pid.to_string())).unwrap();
            let status = format!("Name:\tp{pid}\nUid:\t{uid}\t{uid}\t{uid}\t{uid}\nGid:\t0\t0\t0\t0\n");
            fs::write(proc_root.join(pid.to_string()).join("status"), status).unwrap();
        }
        let select = |owner| Selection::Cgroup { dir: cgroup.clone(), owner }.find(&proc_root, 0);
        assert_eq!(select(Some(1000)), vec![7, 41], "root's 12 and the gone 30 are left out");
        assert_eq!(select(Some(0)), vec![12]);
        assert_eq!(select(Some(1001)), Vec::<i32>::new());
        assert_eq!(select(None), vec![7, 12, 30, 41], "without an owner, every pid listed");
        fs::remove_dir_all(&dir).unwrap();
    }
}
