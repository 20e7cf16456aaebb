#!/bin/sh
# Checks the systemd units of deploy/systemd with systemd-analyze verify:
# any complaint (an unknown directive, a bad value, a missing binary) fails.
# The units name /usr/local/bin/airlock; the copies checked here name the
# binary just built instead, so the check needs no install.
# Usage: check_systemd_units.sh AIRLOCK_BINARY UNIT_DIR BROKEN_UNIT
set -u
binary=$1 unit_dir=$2 broken=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
verify() {
  sed "s#/usr/local/bin/airlock#$binary#" "$1" > "$work/$(basename "$1")"
  out=$(cd "$work" && systemd-analyze verify --man=no "./$(basename "$1")" 2>&1)
  rc=$?
  [ "$rc" -eq 0 ] && [ -z "$out" ]
}
status=0
for unit in "$unit_dir"/*.service; do
  if verify "$unit"; then
    echo "ok: $(basename "$unit")"
  else
    echo "FAIL: $(basename "$unit"): $out"
    status=1
  fi
done
# The check must be able to fail.
if verify "$broken"; then
  echo "FAIL: systemd-analyze accepted $(basename "$broken"), which has a misspelled directive"
  status=1
else
  echo "ok: the misspelled directive is reported: $out"
fi
exit $status
