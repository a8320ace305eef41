//! `terrace profile measure`: measures this host's memory tiers with the probes of
//! terrace-linux (`probes`) and writes a machine profile in the format of profiles/*.toml, every
//! number citing whether it was measured here or taken from another profile (docs/live.md,
//! "Measuring a machine").
// Without the live machine the arguments are parsed (the CLI is the same) but not used.
#![cfg_attr(not(all(feature = "live", target_os = "linux")), allow(dead_code))]

use anyhow::Result;
use std::path::PathBuf;

#[derive(clap::Subcommand, Debug)]
pub enum ProfileCommand {
    /// Measure this host's memory tiers (latency, bandwidth, move_pages cost) and write a
    /// machine profile for `terrace sim --profile FILE`.
    Measure(MeasureArgs),
}

#[derive(clap::Args, Debug)]
pub struct MeasureArgs {
    /// Where to write the profile (TOML).
    #[arg(short = 'o', long, value_name = "FILE")]
    pub output: PathBuf,
    /// The profile (a shipped name or a .toml file) whose figures stand in for what cannot be
    /// measured here: on a one-node host the slow tier and the migration costs, everywhere the
    /// energy, media granularity and Nimble's huge-page gains. Default with two or more nodes:
    /// remote-socket.
    #[arg(long, value_name = "NAME|FILE")]
    pub slow_from: Option<String>,
    /// The profile's name.
    #[arg(long, default_value = "measured")]
    pub name: String,
    /// Short probes on a small buffer (about 3 s; for tests: rougher figures).
    #[arg(long)]
    pub quick: bool,
    /// The probes' buffer per node, MiB (default: twice the last-level cache, 256 to 1024; 64 to
    /// 256 with --quick).
    #[arg(long, value_name = "MIB", value_parser = clap::value_parser!(u64).range(16..=65536))]
    pub buffer_mib: Option<u64>,
}

pub fn run(cmd: ProfileCommand) -> Result<()> {
    match cmd {
        ProfileCommand::Measure(args) => measure(args),
    }
}

#[cfg(not(all(feature = "live", target_os = "linux")))]
fn measure(_: MeasureArgs) -> Result<()> {
    Err(crate::needs_live("profile measure"))
}

#[cfg(all(feature = "live", target_os = "linux"))]
fn measure(args: MeasureArgs) -> Result<()> {
    live::measure(args)
}

/// Rounds to `digits` decimals, so a profile shows what a probe can tell apart.
fn round(v: f64, digits: i32) -> f64 {
    let scale = 10f64.powi(digits);
    (v * scale).round() / scale
}

/// The UTC date and time of `secs` since the epoch, RFC 3339 (civil-from-days, H. Hinnant).
fn utc_date(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z", rem / 3600, rem % 3600 / 60, rem % 60)
}

#[cfg(all(feature = "live", target_os = "linux"))]
mod live {
    use super::{round, utc_date, MeasureArgs};
    use anyhow::{bail, Context, Result};
    use indicatif::{ProgressBar, ProgressStyle};
    use std::collections::BTreeMap;
    use std::path::Path;
    use std::time::Duration;
    use terrace_linux::probes::{self, migration, NodeFigures, Settings};
    use terrace_linux::topology::Topology;
    use terrace_model::TierKind;
    use terrace_sim::profile::{MeasuredOn, MigrationProfile, TierProfile, MAX_TIERS};
    use terrace_sim::Profile;

    /// The profile that stands in for what cannot be measured when the host has two or more nodes
    /// and the user names none: its tiers are DRAM, as a guest's or a two-socket host's are.
    const DEFAULT_BASE: &str = "remote-socket";

    /// Where the run happened, for the sources and the `[measured]` record.
    struct Host {
        name: String,
        cpu: String,
        kernel: String,
        date: String,
    }

    impl Host {
        fn read() -> Host {
            let read = |p: &str| std::fs::read_to_string(p).map(|s| s.trim().to_string()).unwrap_or_default();
            let secs = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0);
            Host {
                name: read("/proc/sys/kernel/hostname"),
                cpu: terrace_linux::bench_migrate::host_cpu().model,
                kernel: read("/proc/sys/kernel/osrelease"),
                date: utc_date(secs),
            }
        }

        /// "HOST, DATE" as every measured source ends.
        fn at(&self) -> String {
            format!("{}, {}", self.name, self.date)
        }
    }

    pub fn measure(args: MeasureArgs) -> Result<()> {
        let topology =
            Topology::read(Path::new("/sys"), Path::new("/proc")).context("cannot read the NUMA topology")?;
        let memory_nodes: Vec<&terrace_linux::topology::Node> =
            topology.nodes.iter().filter(|n| n.mem_total_bytes > 0).collect();
        if memory_nodes.is_empty() {
            bail!("no NUMA node with memory under /sys/devices/system/node: nothing to measure");
        }
        let one_node = memory_nodes.len() == 1;
        if one_node && args.slow_from.is_none() {
            bail!(
                "this host has one NUMA node (node {}), so only its one tier can be measured: name the profile \
                 the slow tier and the migration costs come from with --slow-from NAME|FILE (e.g. --slow-from cxl; \
                 `terrace list profiles`)",
                memory_nodes[0].id
            );
        }
        let base_name = args.slow_from.clone().unwrap_or_else(|| DEFAULT_BASE.to_string());
        let base = Profile::load(&base_name).map_err(|e| anyhow::anyhow!("--slow-from: {e}"))?;
        if args.output.is_dir() {
            bail!("-o {} is a directory: give a file name, e.g. -o measured.toml", args.output.display());
        }
        if let Some(dir) = args.output.parent().filter(|d| !d.as_os_str().is_empty() && !d.is_dir()) {
            bail!(
                "-o {}: the folder {} does not exist; create it or write elsewhere",
                args.output.display(),
                dir.display()
            );
        }
        let measured_nodes: Vec<&terrace_linux::topology::Node> =
            memory_nodes.iter().copied().take(MAX_TIERS).collect();
        if memory_nodes.len() > MAX_TIERS {
            eprintln!(
                "terrace: this host has {} memory nodes; a profile holds at most {MAX_TIERS} tiers, so nodes {} are measured",
                memory_nodes.len(),
                measured_nodes.iter().map(|n| n.id.to_string()).collect::<Vec<_>>().join(", ")
            );
        }
        let cpus_of = |node: &terrace_linux::topology::Node| -> Vec<u32> {
            // A memory-only node is measured from the first node with CPUs, as its nearest socket.
            let own = if node.cpus.is_empty() {
                topology.nodes.iter().find(|n| !n.cpus.is_empty()).map(|n| n.cpus.clone()).unwrap_or_default()
            } else {
                node.cpus.clone()
            };
            probes::allowed_cpus(&own)
        };
        let settings = settings(args.quick, args.buffer_mib);
        let steps = measured_nodes.len() as u64 * 6 + u64::from(!one_node);
        let bar = ProgressBar::new(steps);
        bar.set_style(
            ProgressStyle::with_template("{spinner} [{elapsed_precise}] {pos}/{len} {msg}")
                .expect("static template"),
        );
        bar.enable_steady_tick(Duration::from_millis(100));
        let mut figures = Vec::new();
        for node in &measured_nodes {
            // A node's buffer takes at most a quarter of its memory (a guest's node may be small).
            let settings = Settings {
                buffer_bytes: settings.buffer_bytes.min((node.mem_total_bytes / 4) as usize).max(16 << 20),
                ..settings
            };
            let cpus = cpus_of(node);
            if cpus.is_empty() {
                bail!(
                    "node {}: this process may run on none of its CPUs (cpuset or taskset); allow one",
                    node.id
                );
            }
            let mut step = |what: &str| {
                bar.set_message(what.to_string());
                bar.inc(1);
            };
            figures.push(probes::measure_node(node.id, &cpus, &settings, &mut step)?);
        }
        let host = Host::read();
        // Fastest first, as the live machine classes the nodes (the kernel's memory tiers, HMAT, or
        // CPUs and distance: doctor's rule), then by measured latency: nodes that measure alike,
        // as a QEMU guest's all-DRAM nodes do, keep the order the live machine tiers them in.
        let classes = topology.classify(&terrace_linux::topology::TierOverride::default());
        let rank =
            |f: &NodeFigures| classes.class_of(f.node) != Some(terrace_linux::topology::TierClass::Fast);
        figures.sort_by(|a, b| rank(a).cmp(&rank(b)).then(a.random_ns.total_cmp(&b.random_ns)));
        let migration = if one_node {
            None
        } else {
            bar.set_message(format!("move_pages between nodes {} and {}", figures[0].node, figures[1].node));
            bar.inc(1);
            let reps = if args.quick { 3 } else { 9 };
            Some(migration::measure(figures[0].node, figures[1].node, reps)?)
        };
        bar.finish_and_clear();
        report(&figures, migration.as_ref(), one_node, &base_name);
        let sizes: BTreeMap<u32, u64> = memory_nodes.iter().map(|n| (n.id, n.mem_total_bytes)).collect();
        let has_cpus: BTreeMap<u32, bool> =
            topology.nodes.iter().map(|n| (n.id, !n.cpus.is_empty())).collect();
        let record = MeasuredOn {
            host: host.name.clone(),
            cpu: host.cpu.clone(),
            kernel: host.kernel.clone(),
            date: host.date.clone(),
            nodes: figures.iter().map(|f| f.node).collect(),
            base: base_name.clone(),
            command: format!("terrace profile measure{}", if args.quick { " --quick" } else { "" }),
        };
        let profile =
            assemble(&args.name, &figures, &sizes, &has_cpus, migration, &base, &base_name, &host, record)?;
        let text = format!(
            "# Measured by `terrace profile measure` on {} ({}), {}.\n# Each number's source says whether it was measured \
             here (and how) or taken from profile {base_name}.\n{}",
            host.name,
            host.cpu,
            host.date,
            toml::to_string(&profile).context("cannot write the profile as TOML")?
        );
        // The file must be what `--profile` accepts; a refusal here is a probe gone wrong.
        Profile::parse(&args.name, &text)
            .map_err(|e| anyhow::anyhow!("the measured profile was not written: {e}"))?;
        std::fs::write(&args.output, &text)
            .with_context(|| format!("cannot write {}", args.output.display()))?;
        println!(
            "wrote {} (use it with `terrace sim --profile {}`)",
            args.output.display(),
            args.output.display()
        );
        Ok(())
    }

    /// The buffer and probe time: a buffer twice the last-level cache (256 MiB to 1 GiB; 64 to
    /// 256 MiB with --quick), never more than a quarter of the available memory.
    fn settings(quick: bool, buffer_mib: Option<u64>) -> Settings {
        let llc = probes::last_level_cache_bytes().unwrap_or(32 << 20) as usize;
        let wanted = match buffer_mib {
            Some(mib) => mib as usize * (1 << 20),
            None if quick => (2 * llc).clamp(64 << 20, 256 << 20),
            None => (2 * llc).clamp(256 << 20, 1 << 30),
        };
        let available = probes::mem_available_bytes().map(|b| b as usize / 4).unwrap_or(wanted);
        Settings {
            buffer_bytes: wanted.min(available).max(16 << 20),
            probe_time: if quick { Duration::from_millis(40) } else { Duration::from_millis(400) },
        }
    }

    fn report(figures: &[NodeFigures], migration: Option<&migration::Timings>, one_node: bool, base: &str) {
        if one_node {
            println!(
                "this host has one NUMA node: measured its one tier (node {}); the slow tier and the migration costs are {base}'s",
                figures[0].node
            );
        }
        for f in figures {
            println!(
                "node {}: random {:.1} ns ({} MiB, {}), sequential {:.1} ns, read {:.2} GB/s (1 thread) {:.2} GB/s ({} threads), write {:.2} / {:.2} GB/s{}",
                f.node,
                f.random_ns,
                f.buffer_bytes >> 20,
                if f.huge_pages { "huge pages" } else { "4 KiB pages" },
                f.sequential_ns,
                f.read_one_gb_s,
                f.read_all_gb_s,
                f.cpus.len(),
                f.write_one_gb_s,
                f.write_all_gb_s,
                f.loaded.map(|(ns, g)| format!(", loaded {ns:.1} ns at {g:.2} GB/s")).unwrap_or_default()
            );
        }
        if let Some(t) = migration {
            println!(
                "move_pages: 1 page {:.1} us, 512 pages {:.1} us, one 2 MiB page {}",
                t.one_page_us,
                t.batch_512_us,
                t.one_thp_us.map(|u| format!("{u:.1} us")).unwrap_or_else(|| "not measured (no THP)".into())
            );
        }
    }

    /// Refuses a figure no memory produces: the probe went wrong (a busy host, a VM stalled).
    fn plausible(what: &str, v: f64, min: f64, max: f64, unit: &str) -> Result<()> {
        if !(min..=max).contains(&v) || !v.is_finite() {
            bail!(
                "implausible measurement: {what} = {v:.3} {unit}, outside {min} to {max} {unit}; the profile was not \
                 written (run again on an idle host)"
            );
        }
        Ok(())
    }

    fn check(f: &NodeFigures) -> Result<()> {
        let at = |s: &str| format!("node {} {s}", f.node);
        plausible(&at("random read latency"), f.random_ns, 20.0, 10_000.0, "ns")?;
        plausible(&at("sequential read latency"), f.sequential_ns, 1.0, 10_000.0, "ns")?;
        for (what, v) in [
            ("1-thread read bandwidth", f.read_one_gb_s),
            ("all-thread read bandwidth", f.read_all_gb_s),
            ("1-thread write bandwidth", f.write_one_gb_s),
            ("all-thread write bandwidth", f.write_all_gb_s),
        ] {
            plausible(&at(what), v, 0.1, 10_000.0, "GB/s")?;
        }
        if let Some((ns, gb_s)) = f.loaded {
            plausible(&at("loaded latency"), ns, 20.0, 100_000.0, "ns")?;
            plausible(&at("loaded bandwidth"), gb_s, 0.1, 10_000.0, "GB/s")?;
        }
        Ok(())
    }

    /// A source of a number taken from the base profile.
    fn borrowed(base: &str, original: Option<&String>) -> String {
        match original {
            Some(s) => format!("not measured: from profile {base} ({s})"),
            None => format!("not measured: from profile {base}"),
        }
    }

    /// One measured tier; `i` its place, `base_tier` the base profile's tier at that place.
    fn tier(
        f: &NodeFigures,
        i: usize,
        kind: TierKind,
        capacity_to_fast: Option<f64>,
        base_tier: &TierProfile,
        base: &str,
        host: &Host,
    ) -> Result<TierProfile> {
        check(f)?;
        let here = |how: String| format!("measured here: {how}, {}", host.at());
        let from = |cpus: &[u32]| {
            let list = terrace_linux::topology::format_list(cpus);
            format!("CPU {list}")
        };
        let n = f.cpus.len();
        let buffer = format!(
            "{} MiB buffer bound to node {} ({})",
            f.buffer_bytes >> 20,
            f.node,
            if f.huge_pages { "transparent huge pages" } else { "4 KiB pages: page walks included" }
        );
        let random_ns = round(f.random_ns, 1);
        let sequential_ns = round(f.sequential_ns.min(f.random_ns), 1);
        let light_gb_s = round((64.0 / f.random_ns).max(0.01), 3);
        let mut sources = BTreeMap::new();
        let (loaded_max_ns, loaded_max_gb_s) = match f.loaded {
            Some((ns, gb_s)) => {
                if gb_s <= light_gb_s {
                    bail!(
                        "implausible measurement: node {} streamed {gb_s:.3} GB/s while loaded, no more than the chase \
                         alone ({light_gb_s} GB/s); the profile was not written (run again on an idle host)",
                        f.node
                    );
                }
                sources.insert(
                    "loaded_max_ns".into(),
                    here(format!(
                        "the random chase on {} while {} other CPU(s) read the same node ({}), {:.1} ns at {:.2} GB/s{}",
                        from(&f.cpus[..1]),
                        n - 1,
                        buffer,
                        ns,
                        gb_s,
                        if ns < f.random_ns { "; below the idle figure (noise), so the idle figure is used" } else { "" }
                    )),
                );
                (round(ns.max(f.random_ns), 1), round(gb_s, 2))
            }
            None => {
                // One CPU: nothing to load the node with; the base tier's loaded/idle ratio.
                let ratio = base_tier.loaded_max_ns / base_tier.loaded_light_ns;
                let gb_s = f.read_one_gb_s.max(2.0 * light_gb_s);
                sources.insert(
                    "loaded_max_ns".into(),
                    format!(
                        "not measured (one CPU, nothing to load the node with): the measured idle latency x {ratio:.3}, \
                         profile {base}'s loaded/light ratio, at the measured 1-thread read bandwidth"
                    ),
                );
                (round(f.random_ns * ratio, 1), round(gb_s, 2))
            }
        };
        sources.insert(
            "read_latency_random_ns".into(),
            here(format!(
                "dependent loads over a random cycle of 64 B lines on {}, {}",
                from(&f.cpus[..1]),
                buffer
            )),
        );
        sources.insert(
            "read_latency_sequential_ns".into(),
            here(format!(
                "dependent loads over the 64 B lines in address order, prefetchers on (no way to turn them off without \
                 MSRs), {buffer}"
            )),
        );
        sources.insert(
            "loaded_light_ns".into(),
            format!(
                "the idle random latency, at the chase's own bandwidth (64 B / {random_ns} ns = {light_gb_s} GB/s), a choice: \
                 the probe has no lighter load point"
            ),
        );
        sources.insert(
            "read_bandwidth_gb_s".into(),
            here(format!("each thread pinned to one of {} reads its share of the {buffer}", from(&f.cpus))),
        );
        sources.insert(
            "write_bandwidth_gb_s".into(),
            here(format!(
                "each thread pinned to one of {} writes its share of the {buffer} with non-temporal stores",
                from(&f.cpus)
            )),
        );
        for field in ["media_granularity_bytes", "read_energy_nj", "write_energy_nj"] {
            sources.insert(field.into(), borrowed(base, base_tier.sources.get(field)));
        }
        sources.insert(
            "kind".into(),
            format!(
                "not measured: {}",
                match (i, kind) {
                    (0, _) => "the fastest node, taken as local DRAM",
                    (_, TierKind::RemoteDram) => "a slower node with CPUs of its own, taken as another socket's DRAM",
                    _ => "a slower node without CPUs, taken as a CXL expander (KMEM-DAX Optane looks the same)",
                }
            ),
        );
        if capacity_to_fast.is_some() {
            sources.insert("capacity_to_fast".into(), "read here: the nodes' MemTotal".into());
        }
        Ok(TierProfile {
            name: format!("node{}", f.node),
            kind,
            read_latency_random_ns: random_ns,
            read_latency_sequential_ns: sequential_ns,
            loaded_light_ns: random_ns,
            loaded_light_gb_s: light_gb_s,
            loaded_max_ns,
            loaded_max_gb_s,
            read_bandwidth_gb_s: probes::bandwidth::curve(
                round(f.read_one_gb_s, 2),
                n,
                round(f.read_all_gb_s, 2),
            ),
            write_bandwidth_gb_s: probes::bandwidth::curve(
                round(f.write_one_gb_s, 2),
                n,
                round(f.write_all_gb_s, 2),
            ),
            media_granularity_bytes: base_tier.media_granularity_bytes,
            read_energy_nj: base_tier.read_energy_nj,
            write_energy_nj: base_tier.write_energy_nj,
            capacity_to_fast,
            sources,
        })
    }

    /// The profile from the figures, with the base profile for what was not measured.
    #[allow(clippy::too_many_arguments)]
    fn assemble(
        name: &str,
        figures: &[NodeFigures],
        sizes: &BTreeMap<u32, u64>,
        has_cpus: &BTreeMap<u32, bool>,
        timings: Option<migration::Timings>,
        base: &Profile,
        base_name: &str,
        host: &Host,
        record: MeasuredOn,
    ) -> Result<Profile> {
        let fast_bytes = sizes[&figures[0].node] as f64;
        let count = figures.len();
        let mut tiers = Vec::new();
        for (i, f) in figures.iter().enumerate() {
            let base_tier = base.tiers.get(i).unwrap_or(&base.tiers[base.tiers.len() - 1]);
            let kind = match i {
                0 => TierKind::Dram,
                _ if has_cpus[&f.node] => TierKind::RemoteDram,
                _ => TierKind::Cxl,
            };
            let middle = i > 0 && i + 1 < count;
            let capacity = middle.then(|| round(sizes[&f.node] as f64 / fast_bytes, 3));
            tiers.push(tier(f, i, kind, capacity, base_tier, base_name, host)?);
        }
        let mut sources = BTreeMap::new();
        sources.insert("static_power_w".into(), borrowed(base_name, base.sources.get("static_power_w")));
        let cpu_ghz = read_cpu_ghz();
        match cpu_ghz {
            Some(_) => sources.insert(
                "cpu_ghz".into(),
                format!(
                    "read here: /proc/cpuinfo 'cpu MHz' of the first CPU ({}), the clock at the time; IPC 1 assumed \
                     (docs/model.md §3)",
                    host.at()
                ),
            ),
            None => sources.insert("cpu_ghz".into(), borrowed(base_name, base.sources.get("cpu_ghz"))),
        };
        let slow_to_fast_capacity;
        if count == 1 {
            slower_than_measured(&tiers[0], base, base_name)?;
            // The base profile's slower tiers, each citing the base.
            for t in &base.tiers[1..] {
                let mut t = t.clone();
                t.sources =
                    t.sources.iter().map(|(k, v)| (k.clone(), borrowed(base_name, Some(v)))).collect();
                for field in
                    ["read_latency_random_ns", "read_bandwidth_gb_s", "write_bandwidth_gb_s", "loaded_max_ns"]
                {
                    t.sources.entry(field.into()).or_insert_with(|| borrowed(base_name, None));
                }
                tiers.push(t);
            }
            slow_to_fast_capacity = base.slow_to_fast_capacity;
            sources.insert(
                "slow_to_fast_capacity".into(),
                borrowed(base_name, base.sources.get("slow_to_fast_capacity")),
            );
        } else {
            slow_to_fast_capacity = round(sizes[&figures[count - 1].node] as f64 / fast_bytes, 3);
            sources.insert(
                "slow_to_fast_capacity".into(),
                format!(
                    "read here: MemTotal of node {} over node {}, {}",
                    figures[count - 1].node,
                    figures[0].node,
                    host.at()
                ),
            );
        }
        raise_to_faster_tier(&mut tiers);
        cap_to_faster_tier(&mut tiers);
        let migration = migration_profile(timings, figures, base, base_name, host)?;
        let mut tracking = base.tracking.clone();
        tracking.page_scan_ns = round(figures[0].random_ns / 8.0, 1);
        tracking.sources = BTreeMap::from([
            (
                "page_scan_ns".to_string(),
                format!(
                    "derived as the shipped profiles derive it (docs/hardware.md §17): the measured random read latency \
                     ({:.1} ns) per 64 B line of 8 page-table entries",
                    figures[0].random_ns
                ),
            ),
            ("sample_ns".to_string(), borrowed(base_name, base.tracking.sources.get("sample_ns"))),
        ]);
        let measured_count = if count == 1 { "1 tier".to_string() } else { format!("{count} tiers") };
        Ok(Profile {
            name: name.to_string(),
            summary: format!(
                "measured on {} ({}), {}: {measured_count} measured, the rest from {base_name}",
                host.name, host.cpu, host.date
            ),
            cpu_ghz: cpu_ghz.map(|g| round(g, 3)).unwrap_or(base.cpu_ghz),
            static_power_w: base.static_power_w,
            slow_to_fast_capacity,
            tiers,
            migration,
            tracking,
            sources,
            measured: Some(record),
        })
    }

    /// A borrowed slow tier must be slower than the measured one (tiers go fastest first): else one
    /// line saying so and which shipped profile's slow tier is slow enough.
    fn slower_than_measured(fast: &TierProfile, base: &Profile, base_name: &str) -> Result<()> {
        let slow = &base.tiers[1];
        if slow.read_latency_random_ns > fast.read_latency_random_ns {
            return Ok(());
        }
        let fits: Vec<String> = terrace_sim::profile::BUILT_IN
            .iter()
            .filter_map(|(name, _)| Profile::load(name).ok())
            .filter(|p| p.tiers[1].read_latency_random_ns > fast.read_latency_random_ns)
            .map(|p| format!("{} ({} ns)", p.name, p.tiers[1].read_latency_random_ns))
            .collect();
        bail!(
            "this host's memory measured {} ns random read latency, no faster than {base_name}'s slow tier ({} ns),              and a profile's tiers go fastest first: {}",
            fast.read_latency_random_ns,
            slow.read_latency_random_ns,
            if fits.is_empty() {
                "give --slow-from a profile file with a slower slow tier".to_string()
            } else {
                format!("name a slower one with --slow-from: {}", fits.join(", "))
            }
        )
    }

    /// A slower node (as the live machine classes it) that measured a lower latency than the tier
    /// before it, as alike nodes can by noise, is given that tier's latency, saying so: the
    /// simulator refuses tiers out of order.
    fn raise_to_faster_tier(tiers: &mut [TierProfile]) {
        for i in 1..tiers.len() {
            let floor = tiers[i - 1].read_latency_random_ns;
            let slow = &mut tiers[i];
            if slow.read_latency_random_ns >= floor {
                continue;
            }
            let measured = slow.read_latency_random_ns;
            slow.read_latency_random_ns = floor;
            slow.loaded_light_ns = floor;
            slow.loaded_light_gb_s = round((64.0 / floor).max(0.01), 3);
            slow.loaded_max_ns = slow.loaded_max_ns.max(floor);
            let s = slow.sources.entry("read_latency_random_ns".into()).or_default();
            s.push_str(&format!(
                "; it measured {measured} ns, less than the faster tier's {floor} ns, so it is raised to that (the \
                 live machine classes this node as slower; the two measure alike)"
            ));
        }
    }

    /// Nodes alike (a QEMU guest's are all DRAM) can measure the slower one with more bandwidth,
    /// and a borrowed slow tier's curve can reach beyond what this host's few cores measured of
    /// its fast tier; the simulator refuses either (tiers go fastest first). Such a point is
    /// capped at the faster tier's peak, saying so.
    fn cap_to_faster_tier(tiers: &mut [TierProfile]) {
        for i in 1..tiers.len() {
            let peak = tiers[i - 1].read_bandwidth_gb_s.iter().map(|p| p.1).fold(0.0, f64::max);
            let slow = &mut tiers[i];
            if slow.read_bandwidth_gb_s.iter().any(|p| p.1 > peak) {
                for p in &mut slow.read_bandwidth_gb_s {
                    p.1 = p.1.min(peak);
                }
                let s = slow.sources.entry("read_bandwidth_gb_s".into()).or_default();
                s.push_str(&format!(
                    "; points capped at the faster tier's peak, {peak} GB/s (tiers go fastest first)"
                ));
            }
        }
    }

    fn read_cpu_ghz() -> Option<f64> {
        let text = std::fs::read_to_string("/proc/cpuinfo").ok()?;
        let mhz: f64 = text
            .lines()
            .find_map(|l| {
                l.split_once(':').filter(|(k, _)| k.trim() == "cpu MHz").map(|(_, v)| v.trim().to_string())
            })?
            .parse()
            .ok()?;
        (100.0..=10_000.0).contains(&mhz).then_some(mhz / 1000.0)
    }

    fn migration_profile(
        timings: Option<migration::Timings>,
        figures: &[NodeFigures],
        base: &Profile,
        base_name: &str,
        host: &Host,
    ) -> Result<MigrationProfile> {
        let mut m = base.migration.clone();
        m.sources = m.sources.iter().map(|(k, v)| (k.clone(), borrowed(base_name, Some(v)))).collect();
        let Some(t) = timings else {
            return Ok(m);
        };
        let (a, b) = (figures[0].node, figures[1].node);
        let fit = match t.one_thp_us {
            Some(_) => migration::fit(&t),
            None => migration::fit_with_copy_rate(&t, base.migration.copy_gb_s),
        }
        .map_err(|e| {
            anyhow::anyhow!(
                "implausible measurement: {e}; the profile was not written (run again on an idle host)"
            )
        })?;
        plausible("move_pages call cost", fit.call_us, 0.1, 10_000.0, "us")?;
        if !fit.no_fixed_page_cost {
            plausible("move_pages per-page cost", fit.page_us, 0.01, 1000.0, "us")?;
        }
        plausible("move_pages copy rate", fit.copy_gb_s, 0.01, 10_000.0, "GB/s")?;
        let timed = format!(
            "move_pages(2) between nodes {a} and {b}, fastest of both ways: 1 page {:.2} us, 512 pages in one call {:.2} us, \
             one 2 MiB page {}",
            t.one_page_us,
            t.batch_512_us,
            t.one_thp_us.map(|u| format!("{u:.2} us")).unwrap_or_else(|| "not measured (no THP)".into())
        );
        m.call_us = round(fit.call_us, 2);
        m.page_us = round(fit.page_us, 3);
        m.sources.insert(
            "call_us".into(),
            format!(
                "measured here: {timed}; fitted as the shipped profiles fit Zi Yan's timings, {}",
                host.at()
            ),
        );
        let page_source = if fit.no_fixed_page_cost {
            format!(
                "measured here: same timings; the 2 MiB page cost more per byte than a 4 KiB page's whole cost, so \
                 no fixed per-page cost is left: the least a profile takes, the copy rate matched to the 4 KiB pages, {}",
                host.at()
            )
        } else {
            format!("measured here: same timings and fit, {}", host.at())
        };
        m.sources.insert("page_us".into(), page_source);
        if t.one_thp_us.is_some() {
            m.copy_gb_s = round(fit.copy_gb_s, 3);
            let how = if fit.no_fixed_page_cost {
                "the 4 KiB pages' whole cost per 4 KiB (a 2 MiB move comes out cheaper than it was timed)"
            } else {
                "same timings and fit"
            };
            m.sources.insert("copy_gb_s".into(), format!("measured here: {how}, {}", host.at()));
        } else {
            m.sources.insert(
                "copy_gb_s".into(),
                format!("not measured (no transparent huge page to time): from profile {base_name}"),
            );
        }
        for field in
            ["huge_copy_speedup", "huge_copy_threads_at_best", "huge_concurrency_gain", "huge_exchange_gain"]
        {
            m.sources.insert(
                field.into(),
                format!(
                    "not measurable on a stock kernel (needs Nimble's patches): from profile {base_name}"
                ),
            );
        }
        if m.tlb_shootdown_us > m.page_us {
            m.tlb_shootdown_us = m.page_us;
            m.sources.insert(
                "tlb_shootdown_us".into(),
                format!(
                    "not measured: profile {base_name}'s figure, capped at the measured page_us, which includes one shootdown"
                ),
            );
        }
        Ok(m)
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        fn node(node: u32, random_ns: f64, read: (f64, f64)) -> NodeFigures {
            NodeFigures {
                node,
                cpus: vec![0, 1],
                buffer_bytes: 256 << 20,
                huge_pages: true,
                random_ns,
                sequential_ns: 10.0,
                loaded: Some((random_ns * 1.2, 10.0)),
                read_one_gb_s: read.0,
                read_all_gb_s: read.1,
                write_one_gb_s: 8.0,
                write_all_gb_s: 12.0,
            }
        }

        /// Two alike nodes as a guest measures them, the memory-only one a little faster by
        /// noise, with Zi Yan's move_pages timings: the profile loads, the slower-classed node
        /// is raised and capped to the faster tier, the migration fit is measured, Nimble's
        /// gains borrowed.
        #[test]
        fn two_nodes_make_a_valid_profile_with_measured_migration() {
            let host =
                Host { name: "guest".into(), cpu: "QEMU".into(), kernel: "6.12".into(), date: "D".into() };
            let figures = [node(0, 100.0, (10.0, 18.0)), node(1, 95.0, (11.0, 20.0))];
            let sizes = BTreeMap::from([(0, 1 << 30), (1, 2 << 30)]);
            let has_cpus = BTreeMap::from([(0, true), (1, false)]);
            let timings =
                migration::Timings { one_page_us: 62.47, batch_512_us: 1987.38, one_thp_us: Some(658.54) };
            let base = Profile::load(DEFAULT_BASE).unwrap();
            let record = MeasuredOn {
                host: "guest".into(),
                cpu: "QEMU".into(),
                kernel: "6.12".into(),
                date: "D".into(),
                nodes: vec![0, 1],
                base: DEFAULT_BASE.into(),
                command: "terrace profile measure".into(),
            };
            let p =
                assemble("m", &figures, &sizes, &has_cpus, Some(timings), &base, DEFAULT_BASE, &host, record)
                    .unwrap();
            let text = toml::to_string(&p).unwrap();
            let back = Profile::parse("m", &text).unwrap();
            assert_eq!(back, p);
            let (fast, slow) = (&p.tiers[0], &p.tiers[1]);
            assert_eq!((fast.kind, slow.kind), (TierKind::Dram, TierKind::Cxl));
            assert_eq!(slow.read_latency_random_ns, 100.0, "raised to the faster tier's");
            assert!(slow.sources["read_latency_random_ns"].contains("measured 95 ns"));
            assert_eq!(slow.read_bandwidth_gb_s, vec![(1.0, 11.0), (2.0, 18.0)], "capped at 18");
            assert_eq!(p.slow_to_fast_capacity, 2.0);
            assert_eq!((p.migration.call_us, p.migration.page_us, p.migration.copy_gb_s), (58.7, 2.6, 3.511));
            assert!(p.migration.sources["call_us"].starts_with("measured here: "));
            assert!(p.migration.sources["huge_copy_speedup"].starts_with("not measurable"));
            assert_eq!(p.migration.huge_copy_speedup, base.migration.huge_copy_speedup);
            assert_eq!(p.tracking.page_scan_ns, 12.5);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_are_utc_rfc3339() {
        assert_eq!(utc_date(0), "1970-01-01T00:00:00Z");
        // 2000-02-29 12:34:56 UTC, a leap day.
        assert_eq!(utc_date(951_827_696), "2000-02-29T12:34:56Z");
    }

    #[test]
    fn rounding_keeps_the_digits_asked_for() {
        assert_eq!(round(101.54, 1), 101.5);
        assert_eq!(round(3.51149, 3), 3.511);
    }
}
