//! Terrace's live machine: a real Linux host whose memory tiers are NUMA nodes.
//!
//! It reads the host's topology and tiers ([`topology`]), checks what the kernel offers and what
//! is misconfigured ([`doctor`]), finds a process's pages and where they really are
//! ([`process`], [`placement_scan`], with [`huge_view`] for 2 MiB pages), tracks accesses with
//! the kernel's interfaces ([`trackers`], each behind one trait and chosen by name; DAMON's
//! trace event read through perf, [`tracepoint`]), moves pages with move_pages(2) and checks where they
//! landed ([`migrate`]), keeps shadow copies of pages in memory it maps for a program
//! ([`shadow_region`], asked over [`shadow_link`]), takes a program's
//! allocation events from the object runtime and advises it ([`object_runtime`]), and implements
//! `terrace_model::Machine` as a composition of all of it ([`machine`]), so every policy that runs on the
//! simulated machine runs here unchanged; [`launch`] prepares a program it is to manage before
//! the program starts. Linux only.
pub mod aligned_mapping;
pub mod bench_migrate;
pub mod config;
pub mod control;
pub mod cpu_budget;
pub mod daemon;
pub mod doctor;
pub mod huge_view;
pub mod kernel_tiering;
pub mod launch;
pub mod machine;
pub mod metrics;
pub mod migrate;
pub mod numa_sys;
pub mod object_runtime;
pub mod page_size_replay;
pub mod page_space;
pub mod pagemap_scan;
pub mod pidfd;
pub mod placement_scan;
pub mod probes;
pub mod process;
pub mod process_group;
pub mod remote_syscall;
pub mod shadow_link;
pub mod shadow_region;
pub mod tlb_counts;
pub mod topology;
pub mod tracefs;
pub mod tracepoint;
pub mod trackers;
pub mod userfaultfd;
pub mod warn_limit;
