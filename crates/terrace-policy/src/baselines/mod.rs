//! The baselines every seed is judged against: static placements that never migrate, the
//! hardware cache mode, the unbounded-DRAM bound, and a clairvoyant oracle.

pub mod all_fast;
pub mod all_slow;
pub mod bind_priority;
pub mod first_touch;
pub mod interleave;
pub mod memory_mode;
pub mod oracle;
