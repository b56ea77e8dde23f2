#!/usr/bin/env bash
# The layers point one way (docs/architecture.md): core <- store <- runtime <- http <- daemon <- apps. A source
# file may include a project header of its own layer or a lower one, never a higher one; the public headers
# (include/octop) and the examples include only public and system headers. Run by ctest as
# octop_include_layers_check;
# prints each offending include and exits 1 if there is one.
set -euo pipefail
root="${1:-$(cd "$(dirname "$0")/.." && pwd)}"
cd "$root"

rank() {
  case "$1" in
    core) echo 0 ;; store) echo 1 ;; runtime) echo 2 ;; http) echo 3 ;; daemon) echo 4 ;; apps) echo 5 ;;
    *) echo -1 ;;
  esac
}

status=0
while IFS= read -r -d '' file; do
  if [[ $file == src/* ]]; then
    layer=${file#src/}
    layer=${layer%%/*}
  else
    layer=apps
  fi
  own=$(rank "$layer")
  while IFS=: read -r line text; do
    target=$(sed -E 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"([^/"]+)\/.*/\1/' <<<"$text")
    [[ $target == "$text" ]] && continue  # an include without a directory: a sibling file
    r=$(rank "$target")
    if ((r > own)); then
      echo "$file:$line: $layer includes $target, a higher layer: $text"
      status=1
    fi
  done < <(grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$file" || true)
done < <(find src apps -type f \( -name '*.cc' -o -name '*.h' \) -print0)

# Public headers: no project-internal include at all.
if internal=$(grep -rnE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' include); then
  echo "$internal" | sed 's/$/  (a public header includes an internal one)/'
  status=1
fi
# Examples are programs a user could write: public headers (<octop/...>) and system headers only.
if internal=$(grep -rnE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' examples --include='*.cc' --include='*.h'); then
  echo "$internal" | sed 's/$/  (an example includes an internal header)/'
  status=1
fi
exit "$status"
