//! `terrace run`: start a program and manage its memory with a policy on the live machine.
// Without the live machine the arguments are parsed (the CLI is the same) but not used.
#![cfg_attr(not(all(feature = "live", target_os = "linux")), allow(dead_code))]

use clap::Args;
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct RunArgs {
    /// Policy: a name (`terrace list policies`) or `NAME:key=value,...` (`terrace list policies
    /// --params`); the config's `[policy.NAME]` table sets its parameters too.
    #[arg(long, short, default_value = "age")]
    pub policy: String,
    /// Configuration file (TOML; see docs/live.md).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Track and decide, but move nothing: log what would move.
    #[arg(long)]
    pub dry_run: bool,
    /// Load Terrace's object runtime (libterrace_alloc.so, LD_PRELOAD) into the program: objects of
    /// a page or more get their own mappings, their allocations and frees reach the policy, and
    /// the policy can place a site's new objects (docs/live.md, "Objects"). Implied by a policy
    /// that needs object events (`objects`).
    #[arg(long)]
    pub objects: bool,
    /// The program's priority for an object policy (object tiering §5.5): while programs of
    /// different priorities run, the lower ones' objects go to the slow tier. Sets
    /// TERRACE_PRIORITY, which the programs it starts inherit and a wrapper can set anew for a
    /// program of its own (docs/live.md, "Objects"). Needs the object runtime.
    #[arg(long, allow_negative_numbers = true, value_name = "N")]
    pub priority: Option<i32>,
    /// The program and its arguments.
    #[arg(trailing_var_arg = true, required = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

#[cfg(not(all(feature = "live", target_os = "linux")))]
pub fn run(_: RunArgs) -> anyhow::Result<()> {
    Err(crate::needs_live("run"))
}

#[cfg(all(feature = "live", target_os = "linux"))]
pub fn run(args: RunArgs) -> anyhow::Result<()> {
    use anyhow::Context;
    use std::os::unix::process::ExitStatusExt;
    use terrace_linux::config::Config;
    use terrace_linux::machine::{live_requirements, needs_userfaultfd, Attach, LiveMachine, Target};
    use terrace_model::TrackerKind;

    let config = match &args.config {
        Some(p) => Config::load(p)?,
        None => Config::default(),
    };
    let policies = crate::run_spec::config_policies(args.config.as_deref(), &config.policy)?;
    let mut policy = policies.build(&args.policy)?;
    let dry_run = args.dry_run || config.daemon.dry_run;
    // A dry run moves nothing, so it needs no second node: on a host of one it tracks and decides
    // against a stand-in slow tier on the same node (how tracking's cost is measured anywhere).
    let (tiers, stand_in) = if dry_run {
        terrace_linux::daemon::dry_run_tiers(&config)?
    } else {
        (terrace_linux::daemon::live_tiers(&config)?, false)
    };
    // Refuse before starting anything the policy cannot have.
    let req = live_requirements(policy.as_ref(), &tiers, Attach::Start, config.trackers.sampling)
        .with_context(|| format!("policy {} cannot run here", args.policy))?;
    if let Some(note) =
        terrace_linux::kernel_tiering::fast_limit_note(req.memory_mode, config.tiers.fast_limit_mib)
    {
        if !dry_run {
            tracing::warn!("{note}");
        }
    }
    if stand_in {
        tracing::info!(
            "single-node dry run: this host has one memory node, so the slow tier is a stand-in on the \
             same node; it measures tracking and logs what a plan would have done, and moves nothing"
        );
    }

    // The object runtime: asked for, or needed by the policy's object events (object tiering §3.2).
    let wants_objects = req.trackers.iter().any(|t| t.kind == TrackerKind::ObjectEvents);
    if wants_objects && !args.objects {
        tracing::info!(
            "policy {} places objects: the program starts with the object runtime (--objects)",
            args.policy
        );
    }
    let objects = if args.objects || wants_objects {
        let library =
            terrace_linux::object_runtime::find_library().map_err(|e| anyhow::anyhow!("--objects: {e}"))?;
        let runtime = terrace_linux::object_runtime::ObjectRuntime::create(library)
            .context("--objects: cannot make the object runtime's ring file")?;
        Some(runtime)
    } else {
        None
    };
    if args.priority.is_some() && objects.is_none() {
        anyhow::bail!(
            "--priority is the object runtime's: add --objects, or run a policy that places objects \
             (`terrace list policies`)"
        );
    }

    // The kernel's own tiering, with the settings the policy asks for, is switched on before the
    // program starts, so that it runs under them from its first instruction (put back when this
    // value is dropped: by the machine at the end, or here if Terrace cannot manage the program).
    let mut kernel_tiering = if req.memory_mode == terrace_model::MemoryMode::KernelTiering && !dry_run {
        Some(
            terrace_linux::kernel_tiering::TieringRun::start(&req.kernel_tiering)
                .map_err(anyhow::Error::msg)?,
        )
    } else {
        None
    };

    // The kernel's own shootdown counts, to set beside the simulated machine's (mtier §5.2.1).
    let tlb_before = terrace_linux::tlb_counts::TlbCounts::host();
    let mut cmd = std::process::Command::new(&args.command[0]);
    cmd.args(&args.command[1..]);
    // Initial placement is the child's own memory policy, set between fork and exec.
    terrace_linux::launch::prepare(&mut cmd, &req, &tiers);
    if let Some(o) = &objects {
        for (k, v) in o.environment(std::env::var_os("LD_PRELOAD")) {
            cmd.env(k, v);
        }
        if let Some(p) = args.priority {
            cmd.env(terrace_linux::object_runtime::PRIORITY_ENV, p.to_string());
        }
    }
    // A program that maps memory through Terrace's shadow agent connects here (docs/live.md,
    // "Shadow copies"); any other program never looks at the variable.
    let shadow = match terrace_linux::shadow_link::ShadowListener::bind() {
        Ok(l) => {
            cmd.env(terrace_linux::shadow_link::ENV, l.path());
            Some(l)
        }
        Err(e) => {
            tracing::warn!("no socket for a shadow agent ({e}): shadow copies are not offered");
            None
        }
    };
    // The fault sampler's userfaultfd must be created inside the program: start it stopped at
    // exec, have it make one, take a copy, and let it run.
    let sampling = req.trackers.iter().any(|t| t.kind == TrackerKind::Sampling);
    let (attached, pid, uffd, child) = if needs_userfaultfd(&req, config.trackers.sampling) {
        let (child, stopped) = terrace_linux::remote_syscall::spawn_stopped(&mut cmd)
            .with_context(|| format!("cannot start {}", args.command[0]))?;
        let uffd = stopped.create_userfaultfd();
        // Open the program's memory while it is stopped, so that an exec it makes from here on (a
        // wrapper's: `nice prog`) is seen and followed, however soon it comes.
        let pid = child.id();
        let attached = LiveMachine::attach_or_return(Target::Child(child), tiers, dry_run);
        // Let it run whatever happened: from here on the program never waits for Terrace.
        if let Err(e) = stopped.release() {
            tracing::error!("could not let pid {pid} run on after preparing it: {e}");
        }
        let uffd = uffd.map_err(|e| tracing::error!("cannot give the program a userfaultfd: {e}")).ok();
        (Some(attached), pid, uffd, None)
    } else {
        let child = cmd.spawn().with_context(|| format!("cannot start {}", args.command[0]))?;
        (None, child.id(), None, Some((child, tiers)))
    };
    let started = std::time::Instant::now();
    tracing::info!("managing pid {pid} ({}) with policy {}", args.command[0], policy.name());
    // A program started untraced is attached as before, after this line.
    let attached = match (attached, child) {
        (Some(a), _) => a,
        (None, Some((child, tiers))) => LiveMachine::attach_or_return(Target::Child(child), tiers, dry_run),
        (None, None) => unreachable!("one branch starts the program"),
    };
    let mut machine = match attached {
        Ok(m) => m,
        // The program ran (and may have finished already, as `true` does): it runs on unmanaged
        // and is waited for, and Terrace exits as it does.
        Err((e, Target::Child(mut child))) => {
            // Nothing manages the program from here: the kernel's settings go back now (exit
            // below runs no destructors).
            drop(kernel_tiering.take());
            if matches!(e, terrace_linux::process::ProcessError::Gone(_)) {
                tracing::info!("pid {pid} exited before Terrace could look at its memory; nothing to manage");
            } else {
                tracing::error!("cannot manage pid {pid}: {e}; the program runs on unmanaged");
            }
            let status = child.wait().with_context(|| format!("cannot wait for pid {pid}"))?;
            std::process::exit(status.code().unwrap_or_else(|| 128 + status.signal().unwrap_or(0)));
        }
        Err((e, _)) => return Err(e).with_context(|| format!("cannot manage pid {pid}")),
    };
    if let Some(run) = kernel_tiering {
        machine.set_kernel_tiering(run);
    }
    // The whole process tree the program starts (its children, theirs, and their execs).
    machine.manage_tree();
    machine.set_referenced_source(config.trackers.referenced);
    machine.set_sampling_source(config.trackers.sampling);
    if let Some(uffd) = uffd {
        machine.set_fault_source(
            terrace_linux::userfaultfd::Userfaultfd::from_fd(uffd),
            config.trackers.fault_sample,
            std::time::Duration::from_millis(config.trackers.fault_epoch_ms),
        );
    }
    if let Some(listener) = shadow {
        machine.set_shadow_listener(listener);
    }
    if let Some(o) = objects {
        machine.set_object_runtime(o);
    }
    if let Err(e) = terrace_model::drive(&mut machine, policy.as_mut()) {
        // The program is running already: it runs on, unmanaged, and we wait for it.
        tracing::error!("{e:#}; the program runs on unmanaged");
        let _ = terrace_model::Machine::advance(&mut machine, u64::MAX);
    }
    let s = machine.stats();
    tracing::info!(
        "pid {pid} done: {} pages moved, {} not moved, {} plans; tracking {:.3} s, decisions {:.3} s, \
         migration {:.2} s over {:.1} s{}{}{}{}{}",
        s.pages_moved,
        s.moves_failed,
        s.plans,
        s.tracking_seconds,
        s.decision_seconds,
        s.migration_seconds,
        started.elapsed().as_secs_f64(),
        if sampling || req.mechanisms.contains(&terrace_model::Mechanism::WriteProtectedCopies) {
            format!(
                "; {} sampled write faults, {} writes waited for a copy",
                s.write_faults, s.writes_held_for_copy
            )
        } else {
            String::new()
        },
        if s.execs_followed > 0 {
            format!("; followed {} exec(s), {} tracker(s) lost at one", s.execs_followed, s.trackers_lost)
        } else {
            String::new()
        },
        if s.processes_joined > 0 {
            format!("; managed {} more process(es) it started", s.processes_joined)
        } else {
            String::new()
        },
        if s.pages_switched > 0 || s.shadows_dropped > 0 {
            format!(
                "; {} moved by switching back to their shadow (no copy), {} shadows dropped by writes",
                s.pages_switched, s.shadows_dropped
            )
        } else {
            String::new()
        },
        if machine.object_counters().is_some() {
            format!(
                "; objects: {} allocated and {} freed as the policy saw them, {} gone before a scan saw their \
                 pages, {} events dropped by a full ring, {} site advice(s) given, {} events from the runtime",
                s.objects_seen,
                s.objects_freed,
                s.objects_unseen,
                s.object_events_dropped,
                s.sites_advised,
                s.object_events_reported
            )
        } else {
            String::new()
        }
    );
    tracing::info!("pid {pid}: {}", terrace_linux::tlb_counts::TlbCounts::host().since(&tlb_before));
    let status = machine.exit_status();
    drop(machine);
    // Exit as the program did.
    let code = match status {
        Some(st) => st.code().unwrap_or_else(|| 128 + st.signal().unwrap_or(0)),
        None => 0,
    };
    std::process::exit(code);
}
