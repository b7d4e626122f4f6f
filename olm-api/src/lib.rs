//! The API types of olm-rs: OLM's `operators.coreos.com` kinds and our own
//! `substrate.olm-rs.dev` kinds, with the enums, labels and annotations they use.
//! No client code lives here.
