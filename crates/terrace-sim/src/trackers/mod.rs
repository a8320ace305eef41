//! The simulated machine's trackers: modelled twins of the live machine's (docs/live.md, "What the
//! live machine observes"; docs/model.md §6).
//! Each records during replay and charges its cost when observed.

pub mod future;
pub mod hint_faults;
pub mod page_bits;
pub mod sampling;
