#!/usr/bin/env bash
# The one test command (`make test`): unit and corpus tests of the workspace.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo test --workspace -- --show-output
