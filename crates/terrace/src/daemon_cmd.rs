//! `terrace daemon`, `terrace bind`, `terrace unbind`: a long-running manager of several
//! processes, and the commands that hand processes to it over its Unix socket.

use anyhow::{bail, Result};
use clap::Args;
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct DaemonArgs {
    /// Configuration file (TOML; see docs/live.md).
    #[arg(long)]
    pub config: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct BindArgs {
    /// Process to manage (bind) or to stop managing (unbind).
    pub pid: i32,
    /// Policy for this process (bind only; default: the daemon's).
    #[arg(long, short)]
    pub policy: Option<String>,
    /// The daemon's socket (default: from the config, else /run/terrace.sock).
    #[arg(long)]
    pub socket: Option<PathBuf>,
}

pub fn daemon(_args: DaemonArgs) -> Result<()> {
    bail!("the daemon is not built yet")
}

pub fn bind(_args: BindArgs) -> Result<()> {
    bail!("the daemon is not built yet")
}

pub fn unbind(_args: BindArgs) -> Result<()> {
    bail!("the daemon is not built yet")
}
