#!/usr/bin/env bash
# Installs a build tree into a temporary prefix and checks what a library user gets: every public header and
# library, and headers that stand alone -- the transactional-enqueue example compiles against the installed
# include directory and nothing else of the source tree.
#   tests/install_check.sh BUILD_DIR SOURCE_DIR CXX
set -euo pipefail
build=${1:?usage: install_check.sh BUILD_DIR SOURCE_DIR CXX}
source=${2:?}
cxx=${3:?}
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
cmake --install "$build" --prefix "$prefix" >/dev/null
status=0
for header in "$source"/include/octop/*.h "$source"/include/octop/testing/*.h; do
  rel=${header#"$source"/include/}
  [[ -f $prefix/include/$rel ]] || { echo "install_check: $rel was not installed"; status=1; }
done
for lib in octop_core octop_store_api octop_store octop_store_sqlite octop_store_postgres octop_runtime octop_http; do
  compgen -G "$prefix/lib*/lib$lib.a" >/dev/null || { echo "install_check: lib$lib.a was not installed"; status=1; }
done
"$cxx" -std=c++20 -fsyntax-only -I"$prefix/include" "$source/examples/transactional-enqueue/main.cc" ||
  { echo "install_check: the example does not compile against the installed headers alone"; status=1; }
exit "$status"
