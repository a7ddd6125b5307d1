#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Run a command holding the workshop lock: the kernel tree, its objects, the initramfs and
# the guest are one resource (applying the series moves the tree; a build replaces the
# kernel a guest is about to boot; two builds or guests on two cores only slow each other
# down). Nested calls (SPIN_LOCKED set) run directly.
set -euo pipefail
if [ -n "${SPIN_LOCKED:-}" ]; then
	exec "$@"
fi
: "${BUILD:?}"
mkdir -p "$BUILD"
exec 9>"$BUILD/.workshop.lock"
if ! flock -n 9; then
	echo "[lock] the kernel tree is busy (another build or guest is running); waiting" >&2
	flock 9
fi
export SPIN_LOCKED=1
exec "$@"
