#!/usr/bin/env bash
# Installs everything ember's demo and tests need, idempotently: Debian packages (the NBD
# peers and clients, fio, qemu-utils, fonts for plots), Python packages (libcachesim, the
# peer simulator) and the libcachesim source distribution (its shipped cloudPhysicsIO traces).
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PKGS=(nbdkit libnbd-bin python3-libnbd fio qemu-utils e2fsprogs fuse3 util-linux openssl
          libfontconfig1-dev libfreetype-dev fonts-dejavu-core pkg-config)
missing=()
for p in "${APT_PKGS[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing Debian packages: ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

PY=${PYTHON:-python3}
LIBCACHESIM_VERSION=0.3.5
if ! $PY -c "import libcachesim, pytest, numpy" >/dev/null 2>&1; then
  echo "setup: installing Python packages: libcachesim==$LIBCACHESIM_VERSION pytest numpy"
  $PY -m pip install -q "libcachesim==$LIBCACHESIM_VERSION" pytest numpy
fi

# The libcachesim sdist ships cloudPhysicsIO in csv, vscsi and oracleGeneral forms.
DATA=.cache/peer
if [ ! -f "$DATA/.unpacked-$LIBCACHESIM_VERSION" ]; then
  echo "setup: fetching the libcachesim source distribution for its sample traces"
  mkdir -p "$DATA"
  # pip prepares the sdist's metadata with its build backend: give it the backend as wheels
  # and no isolation, or it builds cmake from source (many minutes).
  $PY -m pip install -q scikit-build-core pybind11 "setuptools_scm[toml]" cmake ninja
  $PY -m pip download -q --no-build-isolation --no-deps --no-binary libcachesim \
      "libcachesim==$LIBCACHESIM_VERSION" -d "$DATA"
  tar -xzf "$DATA"/libcachesim-"$LIBCACHESIM_VERSION".tar.gz -C "$DATA" \
      --wildcards '*/src/libCacheSim/data/cloudPhysicsIO*'
  mv "$DATA"/libcachesim-"$LIBCACHESIM_VERSION"/src/libCacheSim/data/cloudPhysicsIO* "$DATA"/
  rm -rf "$DATA"/libcachesim-"$LIBCACHESIM_VERSION" "$DATA"/libcachesim-"$LIBCACHESIM_VERSION".tar.gz
  touch "$DATA/.unpacked-$LIBCACHESIM_VERSION"
fi
# The tools the tests run: a package that installed without one of them is an error here,
# not a skipped test later.
for tool in nbdsh nbdkit nbdinfo nbdcopy nbdfuse fio qemu-io qemu-img qemu-nbd mkfs.ext4 \
            fsck.ext4 losetup fusermount3; do
  PATH="/usr/bin:/usr/sbin:/sbin:$PATH" command -v "$tool" >/dev/null \
    || { echo "setup: $tool is missing after installing the Debian packages" >&2; exit 1; }
done
echo "setup: ok"
