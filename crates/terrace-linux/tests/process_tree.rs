//! A program and the processes it starts are one group to the live machine (`terrace run`
//! manages the whole tree): the policy sees every process's pages in one page space, a plan
//! naming pages of several processes moves each in its own process, and a process that exits
//! leaves the group while the others stay managed. Runs on any Linux host: moves go to the node
//! the pages are on, which move_pages does as it does any move.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use terrace_linux::machine::{LiveMachine, Target};
use terrace_linux::topology::LiveTier;
use terrace_model::{Machine, Move, Plan, Requirements, TierId};

const LEAF: &str = "TERRACE_TREE_LEAF";

/// A process of the tree: touches `pages` pages of its own, writes "ADDR PAGES" to the file its
/// environment names, then waits to be killed (a minute at most).
#[test]
#[ignore = "a child process that the test in this file starts (with --ignored); not a test of its own"]
fn child_leaf() {
    let Some(spec) = std::env::var_os(LEAF) else { return };
    let spec = spec.to_str().unwrap().to_string();
    let (pages, file) = spec.split_once(':').unwrap();
    let pages: usize = pages.parse().unwrap();
    let buf = vec![7u8; (pages + 1) * 4096];
    let base = (buf.as_ptr() as u64 + 4095) & !4095;
    std::fs::write(format!("{file}.tmp"), format!("{base} {pages}")).unwrap();
    std::fs::rename(format!("{file}.tmp"), file).unwrap();
    std::thread::sleep(Duration::from_secs(60));
    std::hint::black_box(&buf);
}

fn tiers() -> Vec<LiveTier> {
    let info = terrace_model::MachineInfo::placeholder(2);
    info.tiers.into_iter().map(|tier| LiveTier { tier, nodes: vec![0] }).collect()
}

/// Starts `sh` running one leaf per entry of `sizes` in the background and waiting for them;
/// returns it and the leaves' report files.
fn tree(dir: &Path, sizes: &[usize]) -> (Child, Vec<PathBuf>) {
    let exe = std::env::current_exe().unwrap();
    let mut script = String::new();
    let mut files = Vec::new();
    for (i, n) in sizes.iter().enumerate() {
        let file = dir.join(format!("leaf{i}"));
        script.push_str(&format!(
            "{LEAF}={n}:{} '{}' --ignored --exact child_leaf --test-threads 1 >/dev/null & ",
            file.display(),
            exe.display()
        ));
        files.push(file);
    }
    script.push_str("wait");
    let sh = Command::new("/bin/sh").args(["-c", &script]).stdin(Stdio::null()).spawn().unwrap();
    (sh, files)
}

/// The leaves' (base address, pages), once each has touched its pages.
fn ready(files: &[PathBuf]) -> Vec<(u64, usize)> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let got: Vec<(u64, usize)> = files
            .iter()
            .filter_map(|f| std::fs::read_to_string(f).ok())
            .filter_map(|t| {
                let (a, n) = t.split_once(' ')?;
                Some((a.parse().ok()?, n.parse().ok()?))
            })
            .collect();
        if got.len() == files.len() {
            return got;
        }
        assert!(Instant::now() < deadline, "the leaves did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_program_and_its_children_are_one_page_space() {
    let dir = std::env::temp_dir().join(format!("terrace-tree-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (mut sh, files) = tree(&dir, &[24, 40]);
    let leaves = ready(&files);
    let root = sh.id() as i32;
    let all = terrace_linux::process_group::descendants(Path::new("/proc"), root);
    let mut m = LiveMachine::attach(Target::Pid(root), tiers(), false).unwrap();
    m.manage_tree();
    m.prepare(&Requirements::default()).unwrap();
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        assert_eq!(m.pids().len(), 3, "sh and its two leaves: {:?}", m.pids());
        // Every page of each leaf's buffer is a policy page of that leaf, and present.
        let obs = m.observe();
        let placed = obs.placement.to_vec();
        let mut wanted = Vec::new();
        for &(base, pages) in &leaves {
            let mine: Vec<u32> = (0..placed.len() as u32)
                .filter(|&p| {
                    m.page_location(p).is_some_and(|(_, a)| a >= base && a < base + pages as u64 * 4096)
                })
                .collect();
            assert_eq!(mine.len(), pages, "each page of the buffer at {base:#x} is one policy page");
            let pids: std::collections::HashSet<i32> =
                mine.iter().map(|&p| m.page_location(p).unwrap().0).collect();
            assert_eq!(pids.len(), 1, "one process holds a buffer");
            assert!(mine.iter().all(|&p| placed[p as usize].is_placed()), "the leaf touched them all");
            wanted.extend(mine);
        }
        // One plan moving pages of both leaves: each process moves its own.
        let plan = Plan {
            moves: wanted.iter().map(|&page| Move { page, to: TierId(1) }).collect(),
            reason: "test".into(),
            ..Plan::default()
        };
        let applied = m.apply(&plan);
        assert_eq!(applied.pages_moved, 64, "{applied:?}");
        assert_eq!(m.stats().pages_moved, 64);
        // A leaf that exits leaves the group; its pages read as unplaced, the other's stay.
        let gone = all.iter().copied().find(|&p| p != root).unwrap();
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(gone), nix::sys::signal::Signal::SIGKILL).unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while m.pids().contains(&gone) {
            assert!(Instant::now() < deadline, "pid {gone} is still managed");
            std::thread::sleep(Duration::from_millis(120));
            m.observe();
        }
        let obs = m.observe();
        let left = wanted.iter().filter(|&&p| obs.placement[p as usize].is_placed()).count();
        assert!(left == 24 || left == 40, "one leaf's pages are left placed, not {left}");
    }));
    for pid in terrace_linux::process_group::descendants(Path::new("/proc"), root).into_iter().skip(1) {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL);
    }
    let _ = sh.kill();
    let _ = sh.wait();
    let _ = std::fs::remove_dir_all(&dir);
    if let Err(e) = result {
        std::panic::resume_unwind(e);
    }
}
