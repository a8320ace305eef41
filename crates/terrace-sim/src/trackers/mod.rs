//! The simulated machine's trackers: modelled twins of the live machine's (DESIGN.md, trackers).
//! Each records during replay and charges its cost when observed.

pub mod future;
pub mod hint_faults;
pub mod page_bits;
pub mod sampling;
