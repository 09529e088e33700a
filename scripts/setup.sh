#!/usr/bin/env bash
# Installs everything ember's demo and tests need, idempotently: Debian packages (the NBD
# peers and clients, fio, qemu-utils, fonts for plots, iproute2 for the network-namespace
# test, gdb for the hang guard's stacks, man-db to render the man pages, chromium to test the
# HTML reports headless, systemd for `systemd-analyze verify` of the unit: installing it where
# systemd is not PID 1 only adds its files, nothing starts), a Python virtual environment in .venv
# with libcachesim (the peer simulator), pytest, pandas, pyarrow, Ray and maturin, the
# libcachesim source distribution (its shipped cloudPhysicsIO traces), and ember's own Python
# package (emberlab, crates/py) built as a wheel and installed into .venv; and cargo-nextest
# (which runs the Rust tests) where the machine lacks it.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PKGS=(nbdkit nbdkit-plugin-dev libnbd-bin python3-libnbd fio qemu-utils e2fsprogs fuse3 util-linux openssl
          libfontconfig1-dev libfreetype-dev fonts-dejavu-core pkg-config iproute2 gdb graphviz curl
          man-db groff-base chromium systemd)
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

# cargo-nextest runs `make unit` (two tests at a time across the test binaries). Built from
# source only when the machine does not already have it.
if ! cargo nextest --version >/dev/null 2>&1; then
  echo "setup: installing cargo-nextest"
  cargo install --locked --quiet cargo-nextest
fi

# Python: a project virtual environment in .venv, so nothing of the machine's Python is
# touched. Created once; packages installed when one is missing.
HOST_PY=${PYTHON:-python3}
VENV=.venv
PY=$VENV/bin/python
if [ ! -x "$PY" ]; then
  echo "setup: creating the virtual environment $VENV"
  if ! "$HOST_PY" -m venv "$VENV" >/dev/null 2>&1; then
    # Debian's python3 needs python3-venv for ensurepip.
    rm -rf "$VENV"
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq python3-venv >/dev/null
    "$HOST_PY" -m venv "$VENV"
  fi
fi
LIBCACHESIM_VERSION=0.3.5
PY_PKGS=("libcachesim==$LIBCACHESIM_VERSION" pytest numpy pandas pyarrow "ray>=2.9" tqdm
         matplotlib "maturin>=1.5,<2" nbformat nbclient ipykernel)
if ! "$PY" -c "import libcachesim, pytest, numpy, pandas, pyarrow, ray, tqdm, matplotlib, \
               maturin, nbformat, nbclient, ipykernel" >/dev/null 2>&1; then
  echo "setup: installing Python packages into $VENV: ${PY_PKGS[*]}"
  "$PY" -m pip install -q --upgrade pip
  "$PY" -m pip install -q "${PY_PKGS[@]}"
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
            fsck.ext4 losetup fusermount3 ip gdb man chromium systemd-analyze; do
  PATH="/usr/bin:/usr/sbin:/sbin:$PATH" command -v "$tool" >/dev/null \
    || { echo "setup: $tool is missing after installing the Debian packages" >&2; exit 1; }
done
# emberlab: build the wheel from the workspace (cargo rebuilds only what changed) and install
# it into .venv when it differs from the installed one.
WHEELS=target/wheels
echo "setup: building the emberlab wheel (maturin)"
rm -f "$WHEELS"/emberlab-*.whl
if ! VIRTUAL_ENV="$PWD/$VENV" "$VENV/bin/maturin" build --release -m crates/py/Cargo.toml \
    -o "$WHEELS" --interpreter "$PY" >"$VENV/maturin.log" 2>&1; then
  cat "$VENV/maturin.log" >&2
  echo "setup: building the emberlab wheel failed" >&2
  exit 1
fi
WHEEL=$(ls -t "$WHEELS"/emberlab-*.whl 2>/dev/null | head -1)
[ -n "$WHEEL" ] || { echo "setup: no emberlab wheel was built" >&2; exit 1; }
SUM=$(sha256sum "$WHEEL" | cut -d' ' -f1)
if [ "$(cat "$VENV/.emberlab-wheel" 2>/dev/null)" != "$SUM" ]; then
  "$PY" -m pip install -q --force-reinstall --no-deps "$WHEEL"
  echo "$SUM" > "$VENV/.emberlab-wheel"
fi
echo "setup: ok"
