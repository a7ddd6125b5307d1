#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Build every prefix of the series: `git am` the emitted patches one by one onto a scratch
# worktree of the pristine source and build each step (the production configuration, its own
# object directory, so kbuild rebuilds only what a patch touches). Source and objects sit at
# the same relative place as $BUILD/src/linux-source-7.3 and $BUILD/obj, so ccache serves every
# file a step compiles exactly as an earlier build did. Prints one
# line per patch and a closing `N built, N failed`. SPIN_BISECT_FROM=N starts at patch N (the
# ones before it are applied unbuilt), SPIN_BISECT_TO=N stops after patch N.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
: "${KSRC:?}" "${BUILD:?}"
[ -n "${SPIN_LOCKED:-}" ] || exec "$here/with-lock.sh" "$0" "$@"

out=$BUILD/series
scratch=$BUILD/bisect/src/linux-source-7.3
export KOBJ=$BUILD/bisect/obj
from=${SPIN_BISECT_FROM:-1}
log() { printf '[bisect] %s\n' "$*"; }

/usr/bin/python3 "$here/ktree.py" --tree "$KSRC" series --out "$out" >/dev/null
mapfile -t patches < <(find "$out" -name '[0-9][0-9][0-9][0-9]-*.patch' ! -name '0000-*' | sort)
to=${SPIN_BISECT_TO:-${#patches[@]}}

git -C "$KSRC" worktree remove --force "$scratch" 2>/dev/null || rm -rf "$scratch"
git -C "$KSRC" worktree prune
git -C "$KSRC" worktree add -q --detach "$scratch" pristine
trap 'git -C "$KSRC" worktree remove --force "$scratch" 2>/dev/null || true' EXIT
mkdir -p "$KOBJ"

built=0 failed=0 start=$(date +%s)
for i in $(seq 1 "$to"); do
	p=${patches[$((i - 1))]}
	subject=$(sed -n 's/^Subject: \[PATCH[^]]*\] //p' "$p" | head -1)
	if ! git -C "$scratch" -c user.name=bisect -c user.email=bisect@localhost am -q "$p"; then
		log "$(printf '%2d' "$i") does not apply: $subject"
		failed=$((failed + 1))
		break
	fi
	[ "$i" -lt "$from" ] && continue
	t0=$(date +%s)
	if KSRC=$scratch SPIN_LOCKED=1 SPIN_CONFIG_PARTIAL=1 "$here/build-kernel.sh" > "$KOBJ/step-$i.log" 2>&1; then
		built=$((built + 1))
		log "$(printf '%2d' "$i") ok   ($(($(date +%s) - t0)) s) $subject"
	else
		failed=$((failed + 1))
		log "$(printf '%2d' "$i") FAIL ($(($(date +%s) - t0)) s) $subject; see $KOBJ/step-$i.log"
	fi
done
log "$(((($(date +%s) - start)) / 60)) min"
echo "$built built, $failed failed"
[ "$failed" = 0 ]
