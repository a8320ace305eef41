//! `terrace daemon`, `terrace bind`, `terrace unbind`: a long-running manager of several
//! processes, and the commands that hand processes (or cgroups) to it over its Unix socket.
// Without the live machine the arguments are parsed (the CLI is the same) but not used.
#![cfg_attr(not(all(feature = "live", target_os = "linux")), allow(dead_code))]

use anyhow::Result;
use clap::Args;
use std::path::PathBuf;
#[cfg(all(feature = "live", target_os = "linux"))]
use {
    anyhow::{bail, Context},
    std::io::Read,
    std::time::Duration,
    terrace_linux::config::Config,
    terrace_linux::control::{self, Reply, Request},
    terrace_linux::daemon::{install_signal_handlers, Daemon},
};

/// Longest `bind` and `unbind` wait for the daemon's answer (a bind scans the whole process first).
#[cfg(all(feature = "live", target_os = "linux"))]
const REPLY_TIMEOUT: Duration = Duration::from_secs(150);

#[derive(Args, Debug)]
pub struct DaemonArgs {
    /// Configuration file (TOML; see docs/live.md).
    #[arg(long)]
    pub config: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct BindArgs {
    /// Process to manage (bind) or to stop managing (unbind).
    #[arg(
        required_unless_present_any = ["raw", "cgroup"],
        value_parser = parse_pid,
        allow_negative_numbers = true
    )]
    pub pid: Option<i32>,
    /// A cgroup v2 directory instead of a process: every process in it and in the cgroups below
    /// it, as they come and go, managed as one group with one policy and one fast-tier share.
    /// Root may bind any cgroup; a user one delegated to them, and then only their processes.
    #[arg(long, value_name = "DIR", conflicts_with = "pid")]
    pub cgroup: Option<PathBuf>,
    /// Policy for this process or cgroup, a name or `NAME:key=value,...` (bind only; default:
    /// the daemon's).
    #[arg(long, short)]
    pub policy: Option<String>,
    /// The daemon's socket (default: from --config, else /run/terrace.sock).
    #[arg(long)]
    pub socket: Option<PathBuf>,
    /// The daemon's configuration file, to find its socket.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Send LINE to the daemon as it is (`-`: read it from stdin) and print its raw reply; for
    /// testing the protocol.
    #[arg(long, value_name = "LINE", hide = true, conflicts_with_all = ["pid", "policy", "cgroup"])]
    pub raw: Option<String>,
}

/// A process ID as `bind` and `unbind` take it. std's own message ("invalid digit found in
/// string") says neither what was given nor what a PID looks like; negative numbers and 0 name
/// process groups to kill(2), never one process, so they are refused too.
fn parse_pid(s: &str) -> Result<i32, String> {
    match s.trim().parse::<i32>() {
        Ok(pid) if pid > 0 => Ok(pid),
        _ => Err(format!("'{s}' is not a process ID (a positive whole number, e.g. 1234)")),
    }
}

#[cfg(not(all(feature = "live", target_os = "linux")))]
pub fn daemon(_: DaemonArgs) -> Result<()> {
    Err(crate::needs_live("daemon"))
}

#[cfg(not(all(feature = "live", target_os = "linux")))]
pub fn bind(_: BindArgs) -> Result<()> {
    Err(crate::needs_live("bind"))
}

#[cfg(not(all(feature = "live", target_os = "linux")))]
pub fn unbind(_: BindArgs) -> Result<()> {
    Err(crate::needs_live("unbind"))
}

#[cfg(all(feature = "live", target_os = "linux"))]
pub fn daemon(args: DaemonArgs) -> Result<()> {
    let config = match &args.config {
        Some(p) => Config::load(p)?,
        None => Config::default(),
    };
    let shutdown = install_signal_handlers().context("cannot install signal handlers")?;
    let policies = crate::run_spec::config_policies(args.config.as_deref(), &config.policy)?;
    let build = Box::new(move |spec: &str| policies.build(spec).map_err(|e| e.to_string()));
    let daemon = Daemon::start(config, build)?;
    daemon.serve(shutdown);
    Ok(())
}

/// A cgroup directory as the daemon takes it: absolute (the daemon runs elsewhere), and with
/// symbolic links resolved where it exists.
fn cgroup_path(dir: &std::path::Path) -> PathBuf {
    std::fs::canonicalize(dir).or_else(|_| std::path::absolute(dir)).unwrap_or_else(|_| dir.to_path_buf())
}

#[cfg(all(feature = "live", target_os = "linux"))]
pub fn bind(args: BindArgs) -> Result<()> {
    let policy = args.policy.clone();
    let req = match (&args.cgroup, args.pid) {
        (Some(dir), _) => Some(Request::BindCgroup { cgroup: cgroup_path(dir), policy }),
        (None, Some(pid)) => Some(Request::Bind { pid, policy }),
        (None, None) => None,
    };
    request(args, req)
}

#[cfg(all(feature = "live", target_os = "linux"))]
pub fn unbind(args: BindArgs) -> Result<()> {
    if args.policy.is_some() {
        bail!("unbind takes no --policy (the pages stay where they are)");
    }
    let req = match (&args.cgroup, args.pid) {
        (Some(dir), _) => Some(Request::UnbindCgroup { cgroup: cgroup_path(dir) }),
        (None, Some(pid)) => Some(Request::Unbind { pid }),
        (None, None) => None,
    };
    request(args, req)
}

/// Sends one request (or the raw line) and prints the answer: the daemon's message on success,
/// its error (as this command's error) otherwise.
#[cfg(all(feature = "live", target_os = "linux"))]
fn request(args: BindArgs, req: Option<Request>) -> Result<()> {
    let socket = match (&args.socket, &args.config) {
        (Some(s), _) => s.clone(),
        (None, Some(c)) => Config::load(c)?.daemon.socket,
        (None, None) => Config::default().daemon.socket,
    };
    if let Some(raw) = &args.raw {
        let mut bytes = Vec::new();
        if raw == "-" {
            std::io::stdin().read_to_end(&mut bytes).context("cannot read the request from stdin")?;
        } else {
            bytes.extend_from_slice(raw.as_bytes());
            bytes.push(b'\n');
        }
        let line = control::call(&socket, &bytes, REPLY_TIMEOUT)?;
        println!("{line}");
        return match serde_json::from_str::<Reply>(&line) {
            Ok(r) if r.ok => Ok(()),
            Ok(r) => bail!("{}", r.text()),
            Err(e) => bail!("the daemon's reply is not a reply: {e}"),
        };
    }
    let req = req.expect("clap requires a pid or --cgroup without --raw");
    let mut line = req.to_line();
    line.push('\n');
    let reply = control::call(&socket, line.as_bytes(), REPLY_TIMEOUT)?;
    let reply: Reply = serde_json::from_str(&reply)
        .with_context(|| format!("the daemon at {} answered something else: {reply}", socket.display()))?;
    if !reply.ok {
        bail!("{}", reply.text());
    }
    println!("{}", reply.text());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cgroup_is_sent_as_an_absolute_path() {
        let here = std::env::current_dir().unwrap();
        assert_eq!(cgroup_path(std::path::Path::new("no-such-cgroup")), here.join("no-such-cgroup"));
        assert_eq!(cgroup_path(std::path::Path::new("/sys/fs/cgroup/x")), PathBuf::from("/sys/fs/cgroup/x"));
        let dir = tempfile::tempdir().unwrap();
        let real = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::create_dir(real.join("sub")).unwrap();
        assert_eq!(cgroup_path(&real.join("sub/..")), real, "resolved where it exists");
    }

    #[test]
    fn a_pid_is_a_positive_whole_number() {
        assert_eq!(parse_pid("1234"), Ok(1234));
        for bad in ["abc", "0", "-5", "12.5", "", "99999999999"] {
            assert_eq!(
                parse_pid(bad),
                Err(format!("'{bad}' is not a process ID (a positive whole number, e.g. 1234)"))
            );
        }
    }
}
