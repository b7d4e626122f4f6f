# Tasks of olm-rs. `make` alone lists them.
.DEFAULT_GOAL := help
CARGO ?= cargo

.PHONY: help demo demo-down deploy-check corpus test unit e2e chaos chaos-short bench bench-scale bench-copies crds fmt lint cluster-up cluster-down

help: ## List the tasks
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-13s %s\n", $$1, $$2}'

demo: ## The main job: olm-rs installs an operator and its dependency from the demo catalog
	hack/demo.sh

demo-down: ## Stop what `make demo` started
	hack/demo.sh down

deploy-check: ## README's deploy commands, run as written on a fresh control plane
	hack/deploy-check.sh

corpus: ## Assemble the test corpus from its public git repositories (hack/corpus.sh)
	hack/corpus.sh

test: ## Every test: unit and corpus tests, then e2e on a real control plane
	hack/test.sh -- --show-output

unit: ## Unit and corpus tests only (no cluster)
	$(CARGO) test --workspace --exclude e2e

e2e: ## e2e tests against the cluster in KUBECONFIG
	$(CARGO) test -p e2e

chaos: ## Chaos campaign: 100 faults at random moments (seeded; --seed replays), invariants, convergence times
	hack/chaos.sh $(CHAOS_ARGS)

chaos-short: ## A short chaos campaign with a fixed seed (CI): fails on any invariant violation
	hack/chaos.sh --short

bench: ## HA and delivery figures: RSS, Subscription->Succeeded, failover (operators as they ship)
	hack/bench.sh

bench-scale: ## Scale figures: RSS, CPU and API requests at rest with 1,000 namespaces (operators as they ship)
	hack/bench-scale.sh

bench-copies: ## Copied CSVs: writes per copy, requests, RSS and restart with 5 operators x 1,000 namespaces
	hack/bench-copies.sh

crds: ## Regenerate crds/ from the types in olm-api
	$(CARGO) run -q -p olm-api --bin crdgen -- crds

fmt: ## Format the code
	$(CARGO) fmt --all

lint: ## The checks CI runs besides the tests
	$(CARGO) fmt --all --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	@# Production code (not tests): no function over 80 lines of code (clippy.toml).
	$(CARGO) clippy --workspace --lib --bins -- -D warnings -D clippy::too_many_lines
	@# No module cycle in any crate, every main.rs a thin entry point.
	$(CARGO) test -q -p olm-testkit --test shape

cluster-up: ## Start the local control plane (built from Go modules, cached)
	hack/cluster.sh up

cluster-down: ## Stop the local control plane
	hack/cluster.sh down
