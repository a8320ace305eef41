//! Real trackers: the kernel interfaces behind the observations a policy asks for. Each reports
//! what its modelled twin in terrace-sim reports.

pub mod damon;
pub mod idle_page;
pub mod perf_sampler;
pub mod soft_dirty;
pub mod write_faults;
