//! End-to-end tests of olm-rs; they need the cluster named by `KUBECONFIG` (see `hack/cluster.sh`).
