#!/usr/bin/env bash
# The collection's documentation: antsibull-docs' lint of every plugin's and role's
# documentation (fatal), then the site, rendered into .build/docs/html (`make docs`).
# A reference the build cannot resolve fails it, unless it names content outside the
# collection (Ansible's own documentation, another collection), whose inventories a machine
# without internet cannot fetch.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$ROOT"
. "$ROOT/scripts/env.sh"
collection=$ROOT/.cache/collections/ansible_collections/gpufleet/nvidia
(cd "$collection" && antsibull-docs lint-collection-docs --plugin-docs .)
out=$ROOT/.build/docs
rm -rf "$out"
mkdir -p "$out/rst"
chmod og-w "$out/rst"  # antsibull-docs wants that folder writable by itself only
antsibull-docs --config-file docs/site/antsibull-docs.cfg collection --cleanup everything --use-current \
  --squash-hierarchy --dest-dir "$out/rst" gpufleet.nvidia
# The guides (docs/*.md) and the quick start (README's first run, from an inventory to the two
# commands) beside the reference, read by myst-parser; their links into the repository
# (roles/, tests/, ...) are not pages of the site and stay text.
mkdir -p "$out/rst/guides"
awk '/^## Your own fleet/{on=1; print "# Quick start"; next} /^## The cluster layer/{on=0} on' README.md \
  | sed 's/^###/##/' >"$out/rst/guides/quickstart.md"
guides=(quickstart)
for guide in docs/*.md; do
  name=$(basename "$guide" .md)
  cp "$guide" "$out/rst/guides/$name.md"
  guides+=("$name")
done
{
  printf '\nGuides\n------\n\n.. toctree::\n   :maxdepth: 1\n\n'
  printf '   guides/%s\n' "${guides[@]}"
} >>"$out/rst/index.rst"
: >"$out/warnings.log"  # sphinx writes it only when there is a warning
sphinx-build -M html "$out/rst" "$out" -Q -c docs/site --keep-going -w "$out/warnings.log" || true
[ -f "$out/html/index.html" ] || die "the documentation site was not built; see $out/warnings.log"
# What is left once references outside the collection are set aside must be nothing.
own=$(grep -v -E "undefined label: '(ansible_collections\.(ansible\.builtin|kubernetes\.core)\.|common_return_values|action_plugins|ansible_configuration_settings)|failed to reach any of the inventories|intersphinx inventory|fetching|https?://" "$out/warnings.log" | grep -E "WARNING|ERROR" || true)
[ -z "$own" ] || { printf '%s\n' "$own" >&2; die "the documentation site has broken references of its own"; }
log "documentation site: $out/html/index.html ($(find "$out/html" -name '*.html' | wc -l) pages, ${#guides[@]} guides)"
