#!/usr/bin/env bash
# Installs every Debian package octop needs to build, test and run its demo. Idempotent: packages already present
# are skipped, and apt-get runs only when something is missing. Needs root (or sudo) when it has to install.
#   scripts/install-deps.sh            build, test and demo dependencies (chromium is there for the dashboard's
#                                      end-to-end tests)
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config ccache git
  clang clang-format clang-tidy libclang-rt-14-dev
  libgtest-dev libgmock-dev googletest libbenchmark-dev
  nlohmann-json3-dev libyaml-cpp-dev libcpp-httplib-dev libspdlog-dev libfmt-dev libcli11-dev
  libhowardhinnant-date-dev prometheus-cpp-dev tzdata uuid-dev libssl-dev zlib1g-dev libbrotli-dev
  libsqlite3-dev sqlite3 libpq-dev postgresql postgresql-contrib
  faketime procps curl chromium stress-ng
  pgbouncer   # the tests run the stores again through it, in transaction mode; its server is not started
  prometheus  # for promtool, Prometheus's own check of /metrics in the scenario tests; its server is not started
)
# Node.js may come from elsewhere (e.g. a nodejs package that bundles npm, which conflicts with Debian's npm):
# ask for Debian's only when the commands are missing.
command -v node >/dev/null 2>&1 || packages+=(nodejs)
command -v npm >/dev/null 2>&1 || packages+=(npm)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
sudo_cmd=()
if [[ $(id -u) -ne 0 ]]; then sudo_cmd=(sudo); fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
# The prometheus and pgbouncer packages bring services that a systemd machine would start now and at every boot;
# octop's tests need only promtool and a pgbouncer they start themselves. Leave a service off when this script
# was the one to install it.
if [[ -d /run/systemd/system ]] && command -v systemctl >/dev/null; then
  for service in prometheus pgbouncer; do
    if [[ " ${missing[*]} " == *" $service "* ]]; then
      "${sudo_cmd[@]}" systemctl disable --now "$service.service" >/dev/null 2>&1 || true
    fi
  done
fi
