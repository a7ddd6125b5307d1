#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# build.sh kernel|initramfs: apply the repository to the kernel tree, build the kernel, and
# (initramfs) the guest userland. Run under with-lock.sh (the Makefile does).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
: "${KSRC:?}" "${BUILD:?}"
[ -n "${SPIN_LOCKED:-}" ] || exec "$here/with-lock.sh" "$0" "$@"
/usr/bin/python3 "$here/ktree.py" --tree "$KSRC" apply ${FORCE:+--force}
"$here/build-kernel.sh"
if [ "${1:-kernel}" = initramfs ]; then
	"$here/mkinitramfs.sh"
fi
