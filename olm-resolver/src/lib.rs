//! The upgrade graph and the dependency resolver. Pure: no I/O, no Kubernetes client.
