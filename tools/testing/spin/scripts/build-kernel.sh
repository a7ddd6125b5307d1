#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Configure and build the kernel tree at $KSRC into $KOBJ.
#
# The configuration is x86_64_defconfig + kvm_guest.config + the spin fragment, regenerated
# on every run (cheap; kbuild rebuilds only what a changed symbol touches). Every line of the
# fragment must survive olddefconfig, or the build stops here with the list of dropped options.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
: "${KSRC:?}" "${KOBJ:?}"
FRAGMENT=${FRAGMENT:-$here/../config/spin.config}
if [ "${SPIN_APPLY:-}" = committed ] && [ "$FRAGMENT" = "$here/../config/spin.config" ]; then
	# Build what is committed (see ktree.py --committed), fragment included.
	mkdir -p "$KOBJ"
	git -C "$here" show HEAD:tools/testing/spin/config/spin.config > "$KOBJ/spin.config.committed"
	FRAGMENT=$KOBJ/spin.config.committed
fi
LOG=$KOBJ/build.log
JOBS=${JOBS:-$(nproc)}

export RUST_LIB_SRC=/usr/src/rustc-$(rustc --version | awk '{print $2}')/library
export LIBCLANG_PATH=/usr/lib/llvm-19/lib
export CCACHE_DIR=${CCACHE_DIR:-/var/cache/spin/ccache}
# kbuild passes the source tree by absolute path (-I$KSRC/include, -include ...): without a
# base_dir every clone in another folder (CI's) hashes other command lines and misses the
# whole cache. With it, ccache rewrites paths under the repo to relative ones, which are the
# same in every clone (the kernel has no -g here, so the working directory is not hashed).
CCACHE_BASEDIR=$(cd "$here/../../../.." && pwd)
export CCACHE_BASEDIR
mkdir -p "$KOBJ" "$CCACHE_DIR"
ccache -M 8G >/dev/null

log() { printf '[kernel] %s\n' "$*"; }

# One build or guest at a time (see with-lock.sh).
[ -n "${SPIN_LOCKED:-}" ] || exec "$here/with-lock.sh" "$0" "$@"
kmake() {
	make -C "$KSRC" O="$KOBJ" LLVM=-19 CC="ccache clang-19" "$@"
}

log "versions (from setup-host.sh):"
sed 's/^/[kernel] /' /var/lib/spin-workshop/versions 2>/dev/null || true
log "RUST_LIB_SRC=$RUST_LIB_SRC"

# --- configuration ---
kmake -s x86_64_defconfig kvm_guest.config >/dev/null
"$KSRC/scripts/kconfig/merge_config.sh" -m -O "$KOBJ" "$KOBJ/.config" "$FRAGMENT" >/dev/null
kmake -s olddefconfig >/dev/null
dropped=()
while IFS= read -r line; do
	case $line in
	CONFIG_*=n) opt=${line%=n}; grep -qx "# $opt is not set" "$KOBJ/.config" || dropped+=("$line") ;;
	CONFIG_*=*) grep -qxF "$line" "$KOBJ/.config" || dropped+=("$line (have: $(grep "^${line%%=*}=" "$KOBJ/.config" || echo unset))") ;;
	esac
done < <(grep -E '^CONFIG_' "$FRAGMENT")
if [ ${#dropped[@]} -gt 0 ] && [ -n "${SPIN_CONFIG_PARTIAL:-}" ]; then
	# A prefix of the series (series-bisect.sh) lacks the options of later patches.
	log "config: ${#dropped[@]} option(s) of $(basename "$FRAGMENT") not in this tree yet"
elif [ ${#dropped[@]} -gt 0 ]; then
	log "ERROR: olddefconfig dropped options of $(basename "$FRAGMENT"):"
	printf '[kernel]   %s\n' "${dropped[@]}"
	exit 1
fi
log "config: all $(grep -c '^CONFIG_' "$FRAGMENT") options of the fragment are set"
kmake -s LLVM=-19 rustavailable >/dev/null || { log "ERROR: Rust is not available"; exit 1; }

# --- build, with progress ---
start=$(date +%s)
log "building bzImage + modules with -j$JOBS (cold: about 20 min; log: $LOG)"
set +e
kmake -j"$JOBS" bzImage modules 2>&1 | tee "$LOG" | awk -v start="$start" '
	/^  [A-Z]/ { n++ }
	/error[:\[]|Error [0-9]/ { print "[kernel] " $0; fflush() }
	{ now = systime(); if (now - last >= 30) { last = now;
	  printf "[kernel] %5d steps, %dm%02ds\n", n, (now-start)/60, (now-start)%60; fflush() } }
	END { printf "[kernel] %5d steps done\n", n }'
rc=${PIPESTATUS[0]}
set -e
if [ "$rc" != 0 ]; then
	log "ERROR: kernel build failed (rc=$rc); last lines of $LOG:"
	grep -v '^  [A-Z]' "$LOG" | tail -40
	exit "$rc"
fi
kmake -s headers >/dev/null
end=$(date +%s)
log "built $(cat "$KOBJ/include/config/kernel.release") in $((end - start)) s: $KOBJ/arch/x86/boot/bzImage"
