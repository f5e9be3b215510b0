#!/usr/bin/env bash
# Installs the Debian 12 packages TierFS needs to build, run, test and benchmark, and
# Azurite from npm. Skips apt and npm entirely when everything is already installed.
set -euo pipefail
PKGS=(
  build-essential cmake ninja-build pkg-config git
  libfuse3-dev fuse3 libsqlite3-dev sqlite3 libxxhash-dev liburing-dev
  libcli11-dev nlohmann-json3-dev libfmt-dev libspdlog-dev libzstd-dev
  libgtest-dev libgmock-dev
  libhiredis-dev libpq-dev libcurl4-openssl-dev libssl-dev libtinyxml2-dev libcpp-httplib-dev librados-dev libradospp-dev
  libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc
  redis-server etcd-server etcd-client postgresql patroni python3-etcd ceph-mon ceph-osd radosgw ceph-common uuid-runtime curl iproute2
  python3 python3-prometheus-client attr acl fio tar diffutils procps psmisc bc strace e2fsprogs util-linux time
  awscli python3-boto3 rclone s3cmd s3fs openssl rsync python3-hypothesis
  pybind11-dev python3-dev python3-setuptools python3-pip python3-fsspec python3-pandas python3-torch python3-venv
)
# Azurite, the Azure Blob Storage emulator the tests run (tests/servers.py), comes from npm:
# 3.35.0 is the newest release that runs on Debian 12's Node.js 18 (later ones want 21+).
AZURITE_VERSION=3.35.0
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
need_azurite=false
command -v azurite-blob >/dev/null || need_azurite=true
# Node.js and npm from Debian, unless a Node.js (which may bring its own npm) is there.
if $need_azurite && ! command -v npm >/dev/null; then
  missing+=(nodejs npm)
fi
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
if $need_azurite; then
  echo "installing: azurite@$AZURITE_VERSION (npm)"
  $SUDO npm install -g --no-audit --no-fund "azurite@$AZURITE_VERSION"
fi
