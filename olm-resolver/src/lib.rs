//! The upgrade graph and the dependency resolver. Pure: no I/O, no Kubernetes client.

pub mod graph;
pub mod model;
pub mod range;
