#!/usr/bin/env bash
# No SQL built by string concatenation of input (run by ctest as octop_sql_concatenation_check).
#
#  1. Outside src/store no C++ source may hold SQL text at all: callers go through the Store interface.
#  2. Inside src/store, SQL lives in the .sql files; C++ may join a string literal holding SQL with a value
#     only when that value is an identifier quoted by the quoting helper (QuoteIdentifier / quoted_schema_,
#     or Substitute(), which inserts the quoted schema). Values are always bound as parameters.
# Prints each offending line and exits 1 if there is one.
set -euo pipefail
root="${1:-$(cd "$(dirname "$0")/.." && pwd)}"
cd "$root"

kw='SELECT|INSERT|UPDATE|DELETE|CREATE|DROP|ALTER|TRUNCATE|PRAGMA|ATTACH|LISTEN|NOTIFY|GRANT|VACUUM|WHERE|VALUES'
# A string literal containing an upper-case SQL keyword, with '+' or format( next to it.
concat="(\"[^\"]*\\b($kw)\\b[^\"]*\"[[:space:]]*\\+)|(\\+[[:space:]]*\"[^\"]*\\b($kw)\\b[^\"]*\")|((format|sprintf|snprintf)\\([^)]*\"[^\"]*\\b($kw)\\b)"
status=0

# 1. SQL text outside src/store (comments and log messages in plain words do not match: keywords are upper
#    case and must sit in a literal next to a concatenation, or be a statement-shaped literal).
outside=$(grep -rnE --include='*.cc' --include='*.h' \
  "($concat)|(\"[[:space:]]*(SELECT .* FROM|INSERT INTO|UPDATE [a-z_\"]+ SET|DELETE FROM)\\b)" \
  src apps | grep -v '^src/store/' || true)
if [[ -n "$outside" ]]; then
  echo "SQL text outside src/store (use a Store method):"
  echo "$outside"
  status=1
fi

# 2. Concatenation into SQL inside src/store without the quoting helper on the same line.
inside=$(grep -rnE --include='*.cc' --include='*.h' "$concat" src/store |
  grep -vE 'QuoteIdentifier\(|quoted_schema_|Substitute\(' |
  grep -vE 'Error\(|Log\(|message|std::cerr' || true)
if [[ -n "$inside" ]]; then
  echo "SQL concatenated with a value that is not a quoted identifier:"
  echo "$inside"
  status=1
fi

# The check must be able to fail: a planted line is caught.
planted='  conn->Exec("DELETE FROM jobs WHERE id = " + id);'
if ! grep -qE "$concat" <<<"$planted"; then
  echo "check-sql-concat.sh: the pattern no longer catches a planted concatenation"
  status=1
fi
if [[ $status -eq 0 ]]; then
  echo "no SQL built by concatenation of input: src/ and apps/ checked"
fi
exit $status
