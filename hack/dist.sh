# Sourced by the bench scripts: builds the operators as the Dockerfile ships them, in the cargo
# profile dist (release, whole-program LTO, one code-generation unit):
# - olm-operator for the host (glibc);
# - catalog-operator linked statically on musl, because a bundle unpack Job runs it inside bundle
#   images that have no libc. Its allocator is musl's, which returns freed memory at once.
# Each package builds on its own, with its own features; built together they would unify their
# dependencies' features differently and build twice.
#
#   dist_olm_operator       sets OLM_OPERATOR_BIN
#   dist_catalog_operator   sets CATALOG_OPERATOR_BIN; needs the musl target and musl-gcc

dist_dir() {
	cargo metadata --format-version 1 --no-deps | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p'
}

dist_olm_operator() {
	cargo build -q --profile dist -p olm-operator --bin olm-operator
	OLM_OPERATOR_BIN=$(dist_dir)/dist/olm-operator
}

dist_catalog_operator() {
	local musl
	musl="$(uname -m)-unknown-linux-musl"
	if ! rustup target list --installed | grep -qx "$musl"; then
		echo "catalog-operator ships linked on musl: run 'rustup target add $musl' first" >&2
		return 1
	fi
	if ! command -v musl-gcc >/dev/null; then
		echo "catalog-operator ships linked on musl: install musl-gcc first (Debian: apt-get install musl-tools)" >&2
		return 1
	fi
	cargo build -q --profile dist -p catalog-operator --bin catalog-operator --target "$musl"
	CATALOG_OPERATOR_BIN=$(dist_dir)/$musl/dist/catalog-operator
}
