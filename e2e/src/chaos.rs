//! What the chaos campaign reads alike: its seeded random source ([`rng`]), the invariants it
//! checks on the cluster after each fault ([`invariants`]) and the figures it prints
//! ([`figures`]).

pub mod figures;
pub mod invariants;
pub mod rng;
