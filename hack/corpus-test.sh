#!/usr/bin/env bash
# Tests hack/corpus.sh without network access. From the reference corpus (OLM_RS_CORPUS, or
# ../shared/corpus beside the checkout) it builds one local git repository per source of
# hack/corpus/sources, laid out as upstream (the reverse of the path mapping) with a licence and a
# file that is not part of the corpus. It then runs hack/corpus.sh against them (the _URL and _REF
# overrides) and checks that:
#   - the result holds exactly the reference's corpus files, and the reference's SHA256SUMS verify;
#   - a second run leaves a verified corpus as it is, without fetching;
#   - a file changed in the mirror, and one missing from it, fail the run; the errors name both,
#     and nothing is written;
#   - a changed or extra file in the output is repaired by the next run;
#   - a directory the script did not make is never replaced.
# Fails, saying so, when the reference corpus is absent. `make test` runs it (hack/test.sh).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
sums=$repo/hack/corpus/SHA256SUMS
reference=${OLM_RS_CORPUS:-$repo/../shared/corpus}

fail() {
	echo "corpus-test.sh: FAIL: $*" >&2
	exit 1
}
pass() { echo "corpus-test.sh: ok (${SECONDS} s): $*" >&2; }

[ -d "$reference/bundles" ] && [ -f "$reference/SHA256SUMS" ] ||
	fail "no reference corpus at $reference (no bundles/ and SHA256SUMS in it): put shared/corpus beside the checkout or set OLM_RS_CORPUS (\`make corpus\` assembles one)"
reference=$(cd "$reference" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/olm-rs-corpus-test.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# The corpus files under directory $1: all but README.md, SHA256SUMS and LICENSES/, sorted.
corpus_files_in() (
	cd "$1"
	shopt -s globstar dotglob nullglob
	for f in **; do
		[[ -f $f || -L $f ]] || continue
		case $f in README.md | SHA256SUMS | LICENSES/*) continue ;; esac
		printf '%s\n' "$f"
	done | LC_ALL=C sort
)
# The paths listed in SHA256SUMS file $1, sorted.
listed_in() {
	local sum path
	while read -r sum path; do printf '%s\n' "$path"; done <"$1" | LC_ALL=C sort
}
# Fails unless directory $1 holds the same corpus files as the reference, all verifying.
same_as_reference() {
	local dir=$1 differ
	(cd "$dir" && LC_ALL=C sha256sum --quiet --strict -c "$reference/SHA256SUMS") ||
		fail "$2: the reference's SHA256SUMS do not verify in $dir"
	differ=$(LC_ALL=C comm -3 <(corpus_files_in "$reference") <(corpus_files_in "$dir"))
	[ -z "$differ" ] || fail "$2: $dir and $reference differ in these files:"$'\n'"$differ"
}

# The committed list is the reference's: same files, same checksums.
(cd "$reference" && LC_ALL=C sha256sum --quiet --strict -c "$sums") ||
	fail "hack/corpus/SHA256SUMS does not verify in $reference"
differ=$(LC_ALL=C comm -3 <(listed_in "$sums") <(corpus_files_in "$reference"))
[ -z "$differ" ] || fail "hack/corpus/SHA256SUMS and $reference differ in these files:"$'\n'"$differ"
pass "hack/corpus/SHA256SUMS lists exactly the files of $reference"

# hack/corpus/sources
names=() rule_name=() rule_cdir=() rule_udir=()
declare -A licence=()
while read -r kind a b c d _; do
	case $kind in
	source) names+=("$a") licence[$a]=$d ;;
	path) rule_name+=("$a") rule_cdir+=("$b") rule_udir+=("$c") ;;
	esac
done <"$repo/hack/corpus/sources"

# Prints the source and the upstream path of corpus file $1.
origin_of() {
	local i
	for i in "${!rule_name[@]}"; do
		[[ $1 == "${rule_cdir[$i]}"/* ]] || continue
		printf '%s %s\n' "${rule_name[$i]}" "${rule_udir[$i]}/${1#"${rule_cdir[$i]}"/}"
		return
	done
	fail "no rule of hack/corpus/sources covers $1"
}

git_in() { git -C "$1" -c user.name=corpus-test -c user.email=corpus-test@localhost "${@:2}"; }

# The mirrors: branch main holds the corpus in the upstream layout.
declare -A good=()
for name in "${names[@]}"; do
	m=$tmp/mirror/$name
	git init -q -b main "$m"
	git -C "$m" config uploadpack.allowFilter true
	for i in "${!rule_name[@]}"; do
		[ "${rule_name[$i]}" = "$name" ] || continue
		mkdir -p "$(dirname "$m/${rule_udir[$i]}")"
		cp -R "$reference/${rule_cdir[$i]}" "$m/${rule_udir[$i]}"
	done
	printf 'The licence of %s (a stand-in for the test)\n' "$name" >"$m/${licence[$name]}"
	mkdir -p "$m/unrelated"
	echo "not part of the corpus" >"$m/unrelated/file.yaml"
	git_in "$m" add -A
	git_in "$m" commit -q -m corpus
	good[$name]=$(git -C "$m" rev-parse HEAD)
done

echo "corpus-test.sh: (${SECONDS} s) built the mirrors" >&2
# Branch broken: one corpus file changed and another deleted (the first and second listed files).
{
	read -r _ changed
	read -r _ deleted
} <"$sums"
read -r bad_source changed_upstream < <(origin_of "$changed")
read -r deleted_source deleted_upstream < <(origin_of "$deleted")
[ "$bad_source" = "$deleted_source" ] || fail "$changed and $deleted come from different sources"
m=$tmp/mirror/$bad_source
git_in "$m" checkout -q -b broken main
echo "# one line more" >>"$m/$changed_upstream"
git_in "$m" rm -q "$m/$deleted_upstream"
git_in "$m" commit -q -a -m "change $changed_upstream, delete $deleted_upstream"
git_in "$m" checkout -q main

# Runs hack/corpus.sh into $tmp/$1 with the mirrors at their good commits, or at branch $2 of the
# source with the broken branch; its stdout in $tmp/stdout, its stderr in $tmp/stderr.
run_script() {
	local name key env=()
	for name in "${names[@]}"; do
		key=${name^^}
		key=OLM_RS_CORPUS_${key//-/_}
		env+=("${key}_URL=file://$tmp/mirror/$name" "${key}_REF=${good[$name]}")
		[ "$name" != "$bad_source" ] || [ -z "${2:-}" ] || env+=("${key}_REF=$2")
	done
	env "${env[@]}" "$repo/hack/corpus.sh" "$tmp/$1" >"$tmp/stdout" 2>"$tmp/stderr"
}
show() { sed 's/^/    /' "$tmp/stderr" >&2; }

run_script out || {
	show
	fail "hack/corpus.sh failed against the mirrors"
}
[ "$(cat "$tmp/stdout")" = "$tmp/out" ] || fail "hack/corpus.sh printed '$(cat "$tmp/stdout")', not $tmp/out"
same_as_reference "$tmp/out" "the assembled corpus"
for name in "${names[@]}"; do
	[ "$(cat "$tmp/out/LICENSES/$name.LICENSE")" = "$(cat "$tmp/mirror/$name/${licence[$name]}")" ] ||
		fail "LICENSES/$name.LICENSE is not the licence of the $name mirror"
	[[ $(cat "$tmp/out/README.md") == *"${good[$name]}"* ]] || fail "README.md does not name commit ${good[$name]} of $name"
done
pass "the corpus assembled from the mirrors is the reference corpus, with a licence per source"

run_script out || {
	show
	fail "a second run failed"
}
[[ $(cat "$tmp/stderr") == *"already holds the corpus"* && $(cat "$tmp/stderr") != *fetching* ]] || {
	show
	fail "a second run did not leave the verified corpus as it was"
}
pass "a second run leaves the verified corpus as it is, without fetching"

if run_script broken broken; then fail "hack/corpus.sh accepted a changed $changed and a missing $deleted"; fi
[[ $(cat "$tmp/stderr") == *"sha256 differs from "*": $changed ("* ]] || {
	show
	fail "the error does not name the changed file $changed"
}
[[ $(cat "$tmp/stderr") == *"missing: $deleted ("* ]] || {
	show
	fail "the error does not name the missing file $deleted"
}
[ ! -e "$tmp/broken" ] || fail "a failed run wrote $tmp/broken"
pass "a changed file and a missing one fail the run; the errors name them:"
grep -e 'differs' -e 'missing:' "$tmp/stderr" | sed 's/^/    /' >&2

echo "# changed" >>"$tmp/out/$changed"
echo "extra" >"$tmp/out/bundles/extra.yaml"
run_script out || {
	show
	fail "hack/corpus.sh did not repair a changed corpus"
}
same_as_reference "$tmp/out" "the repaired corpus"
pass "a changed file and an extra file in the output are repaired by the next run"

mkdir "$tmp/foreign"
echo "someone's data" >"$tmp/foreign/data"
if run_script foreign; then fail "hack/corpus.sh replaced a directory it did not make"; fi
[ -f "$tmp/foreign/data" ] || fail "hack/corpus.sh removed a file of a directory it did not make"
[[ $(cat "$tmp/stderr") == *"not a directory this script made"* ]] || {
	show
	fail "the refusal does not say why"
}
pass "a directory the script did not make is left alone"

leftovers=$(ls -A "$tmp" | grep '^\.corpus-build' || true)
[ -z "$leftovers" ] || fail "temporary directories left behind: $leftovers"
pass "no temporary directory is left behind"
