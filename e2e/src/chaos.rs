//! What the chaos campaign (`make chaos`, `src/bin/olm-rs-chaos.rs`) reads alike: its seeded
//! random source ([`rng`]), the invariants it checks on the cluster after each fault
//! ([`invariants`]), the figures it prints ([`figures`]), the operators it runs ([`fleet`]), the
//! faults it injects ([`faults`]) and the work it gives them ([`work`]).

pub mod faults;
pub mod figures;
pub mod fleet;
pub mod invariants;
pub mod pressure;
pub mod rng;
pub mod work;
