#!/usr/bin/env bash
# Assembles the corpus of real OLM packaging data that the tests read (OLM_RS_CORPUS) from its
# public git repositories, at the commits recorded in hack/corpus/sources. It takes exactly the
# files listed in hack/corpus/SHA256SUMS and checks each one against its sha256.
#
#   hack/corpus.sh [DIR]    DIR defaults to ${XDG_CACHE_HOME:-~/.cache}/olm-rs/corpus
#
# On success it prints DIR, the only thing it writes to stdout. If DIR already holds the verified
# corpus, the script leaves it as it is and does not touch the network. Otherwise it fetches one
# commit of each repository (shallow, with a sparse checkout of only the listed files and the
# licence), builds the corpus in a temporary directory beside DIR, and puts it in DIR's place only
# once every file verifies. A missing or different file fails the run, and the error names it.
# It never replaces a DIR that is neither empty nor made by this script.
#
# Overrides, for each source NAME of hack/corpus/sources (NAME upper-cased, '-' as '_'):
#   OLM_RS_CORPUS_<NAME>_URL  where to fetch it from, e.g. a local mirror (default: the recorded URL)
#   OLM_RS_CORPUS_<NAME>_REF  the commit or ref to take there (default: the recorded commit)
# e.g. OLM_RS_CORPUS_COMMUNITY_OPERATORS_PROD_URL. The checksums are verified whatever the source:
# only the content of the files counts.
#
# Needs bash, coreutils and git (2.35 or later, for `sparse-checkout set --no-cone`).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
sums=$here/corpus/SHA256SUMS
sources=$here/corpus/sources
# The first line of the README.md this script writes: it marks a directory the script may replace.
marker="# OLM test corpus, assembled by olm-rs hack/corpus.sh"
# Never wait for a password: a URL that needs one is a wrong URL here.
export GIT_TERMINAL_PROMPT=0
unset GIT_DIR GIT_WORK_TREE GIT_INDEX_FILE

say() { echo "corpus.sh: $*" >&2; }
die() {
	say "$*"
	exit 1
}

names=()                                      # the sources, in the order of hack/corpus/sources
declare -A url=() commit=() licence=()        # per source, as recorded
declare -A used_url=() fetched=()             # per source, as used in this run
rule_name=() rule_cdir=() rule_udir=()        # the `path` lines
files=()                                      # the corpus files, as listed in SHA256SUMS
declare -A from=() upstream=()                # corpus file -> its source, its path there

# Reads hack/corpus/sources into names, url, commit, licence and the rule_* arrays.
read_sources() {
	local kind a b c d extra n=0
	while read -r kind a b c d extra; do
		n=$((n + 1))
		case $kind in
		'' | '#'*) ;;
		source)
			[ -n "$d" ] && [ -z "$extra" ] || die "$sources:$n: want 'source NAME URL COMMIT LICENCE'"
			names+=("$a")
			url[$a]=$b commit[$a]=$c licence[$a]=$d
			;;
		path)
			[ -n "$c" ] && [ -z "$d" ] || die "$sources:$n: want 'path NAME CORPUS_DIR UPSTREAM_DIR'"
			[ -n "${url[$a]:-}" ] || die "$sources:$n: no 'source $a' line above this one"
			rule_name+=("$a") rule_cdir+=("$b") rule_udir+=("$c")
			;;
		*) die "$sources:$n: unknown kind of line '$kind'" ;;
		esac
	done <"$sources"
	[ "${#names[@]}" -gt 0 ] || die "$sources names no source"
}

# Reads SHA256SUMS into files, and where each file comes from into from and upstream.
read_list() {
	local sum path i n=0
	while read -r sum path; do
		n=$((n + 1))
		[[ $sum =~ ^[0-9a-f]{64}$ && -n $path ]] || die "$sums:$n: want '<sha256>  <path>'"
		[[ $path != /* && /$path/ != */../* ]] || die "$sums:$n: $path is not a path inside the corpus"
		for i in "${!rule_name[@]}"; do
			if [[ $path == "${rule_cdir[$i]}"/* ]]; then
				from[$path]=${rule_name[$i]}
				upstream[$path]=${rule_udir[$i]}/${path#"${rule_cdir[$i]}"/}
				break
			fi
		done
		[ -n "${from[$path]:-}" ] || die "$sums:$n: no 'path' line of $sources covers $path"
		files+=("$path")
	done <"$sums"
}

# The files under directory $1 that the checks look at: all but README.md, SHA256SUMS and LICENSES/.
corpus_files_in() (
	cd "$1"
	shopt -s globstar dotglob nullglob
	for f in **; do
		[[ -f $f || -L $f ]] || continue
		case $f in README.md | SHA256SUMS | LICENSES/*) continue ;; esac
		printf '%s\n' "$f"
	done | LC_ALL=C sort
)

# Where corpus file $1 comes from, for messages.
whence() {
	local name=${from[$1]:-}
	[ -n "$name" ] || return 0
	printf '%s in %s at %s' "${upstream[$1]}" "${used_url[$name]:-${url[$name]}}" "${fetched[$name]:-${commit[$name]}}"
}

# Checks that directory $1 holds exactly the listed files, with their checksums, and a licence per
# source. Says what is wrong (unless $2 is "quiet") and fails if anything is.
check_dir() {
	local dir=$1 quiet=${2:-} result line path name bad=0
	result=$(cd "$dir" && LC_ALL=C sha256sum --quiet --strict -c "$sums" 2>/dev/null) || bad=1
	while IFS= read -r line; do
		[ -n "$line" ] || continue
		path=${line%: FAILED*}
		case $line in
		*'FAILED open or read') [ -n "$quiet" ] || say "missing: $path ($(whence "$path"))" ;;
		*) [ -n "$quiet" ] || say "sha256 differs from $sums: $path ($(whence "$path"))" ;;
		esac
	done <<<"$result"
	while IFS= read -r path; do
		[ -n "$path" ] || continue
		bad=1
		[ -n "$quiet" ] || say "not in $sums: $path"
	done < <(LC_ALL=C comm -13 <(printf '%s\n' "${files[@]}" | LC_ALL=C sort) <(corpus_files_in "$dir"))
	for name in "${names[@]}"; do
		[ -f "$dir/LICENSES/$name.LICENSE" ] && continue
		bad=1
		[ -n "$quiet" ] || say "missing: LICENSES/$name.LICENSE"
	done
	return "$bad"
}

# True if directory $1 may be replaced: empty, or written by this script.
ours() {
	local first=
	[ -d "$1" ] || return 1
	[ -n "$(ls -A "$1")" ] || return 0
	[ -f "$1/README.md" ] && IFS= read -r first <"$1/README.md"
	[ "$first" = "$marker" ]
}

# The sparse-checkout patterns of source $1: its listed files and its licence, anchored at the root.
patterns_of() {
	local path
	for path in "${files[@]}"; do
		[ "${from[$path]}" = "$1" ] && printf '/%s\n' "${upstream[$path]}"
	done
	printf '/%s\n' "${licence[$1]}"
}

# Fetches the commit (or ref) of source $1 into $work/src/$1, with only its patterns checked out.
fetch_source() {
	local name=$1 key dir=$work/src/$1 url_var ref_var u r
	key=${name^^}
	key=OLM_RS_CORPUS_${key//-/_}
	url_var=${key}_URL ref_var=${key}_REF
	u=${!url_var:-${url[$name]}} r=${!ref_var:-${commit[$name]}}
	used_url[$name]=$u
	say "fetching $r of $u (source $name; ${key}_URL and ${key}_REF override them)"
	git init -q "$dir"
	git -C "$dir" config core.autocrlf false
	git -C "$dir" remote add origin "$u"
	patterns_of "$name" | git -C "$dir" sparse-checkout set --no-cone --stdin
	git -C "$dir" fetch --quiet --depth 1 --filter=blob:none --no-tags origin "$r" ||
		die "could not fetch $r from $u (source $name); set ${key}_URL and ${key}_REF to a mirror that has it"
	git -C "$dir" -c advice.detachedHead=false checkout --quiet --detach FETCH_HEAD ||
		die "could not check out $r of $u (source $name)"
	fetched[$name]=$(git -C "$dir" rev-parse HEAD)
	if [ "$r" = "${commit[$name]}" ] && [ "${fetched[$name]}" != "$r" ]; then
		die "$u gave commit ${fetched[$name]} for $r (source $name)"
	fi
}

# `UPSTREAM_DIR/` → `CORPUS_DIR/` for each rule of source $1, joined by commas.
mapping_of() {
	local i sep=
	for i in "${!rule_name[@]}"; do
		[ "${rule_name[$i]}" = "$1" ] || continue
		printf '%s`%s/` → `%s/`' "$sep" "${rule_udir[$i]}" "${rule_cdir[$i]}"
		sep=', '
	done
}

# The README.md of the assembled corpus.
write_readme() {
	local name note
	printf '%s\n\n' "$marker"
	cat <<'EOF'
Real operator packaging data (bundles, file-based catalogs, a package manifest) written by third
parties, for the tests of olm-rs. Every file is a byte-for-byte copy of a file of a public git
repository; only its directory changed. `SHA256SUMS` lists every file with its sha256
(`sha256sum -c SHA256SUMS` checks them); `LICENSES/` holds the licence of each source.

| source | commit | taken from there → put here | licence |
|---|---|---|---|
EOF
	for name in "${names[@]}"; do
		note=
		[ "${fetched[$name]}" = "${commit[$name]}" ] || note=" (recorded: \`${commit[$name]}\`)"
		printf '| %s | `%s`%s | %s | `LICENSES/%s.LICENSE` |\n' "${used_url[$name]}" \
			"${fetched[$name]}" "$note" "$(mapping_of "$name")" "$name"
	done
	printf '\nThe sources, paths and checksums are recorded in `hack/corpus/` of olm-rs.\n'
}

# Moves the fetched files into the corpus layout in $work/corpus, with the licences and metadata.
assemble() {
	local i name src
	mkdir -p "$work/corpus/LICENSES"
	for i in "${!rule_name[@]}"; do
		src=$work/src/${rule_name[$i]}/${rule_udir[$i]}
		# A directory that is not there shows up below as missing files.
		[ -d "$src" ] || continue
		mkdir -p "$(dirname "$work/corpus/${rule_cdir[$i]}")"
		mv -T "$src" "$work/corpus/${rule_cdir[$i]}"
	done
	for name in "${names[@]}"; do
		src=$work/src/$name/${licence[$name]}
		[ -f "$src" ] || die "the licence ${licence[$name]} is not in ${used_url[$name]} at ${fetched[$name]} (source $name of $sources)"
		cp "$src" "$work/corpus/LICENSES/$name.LICENSE"
	done
	cp "$sums" "$work/corpus/SHA256SUMS"
	write_readme >"$work/corpus/README.md"
}

main() {
	[ "$#" -le 1 ] || die "usage: hack/corpus.sh [DIR]"
	read_sources
	read_list
	out=${1:-${XDG_CACHE_HOME:-$HOME/.cache}/olm-rs/corpus}
	[[ $out == /* ]] || out=$PWD/$out
	[ "$out" = / ] || out=${out%/}
	if [ -e "$out" ]; then
		ours "$out" || die "$out is not a directory this script made (its README.md does not start with '$marker'); remove it or name another directory"
		if check_dir "$out" quiet; then
			say "$out already holds the corpus; its ${#files[@]} files verify"
			echo "$out"
			return 0
		fi
	fi
	mkdir -p "$(dirname "$out")"
	work=$(mktemp -d "$(dirname "$out")/.corpus-build.XXXXXX")
	trap 'rm -rf "$work"' EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM
	for name in "${names[@]}"; do fetch_source "$name"; done
	assemble
	check_dir "$work/corpus" ||
		die "the files above are missing from their sources or differ from what $sums records; $out is left as it was"
	[ ! -e "$out" ] || mv -T "$out" "$work/old"
	mv -T "$work/corpus" "$out"
	say "assembled the corpus in $out; its ${#files[@]} files verify"
	echo "$out"
}

main "$@"
