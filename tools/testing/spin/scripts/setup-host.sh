#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Install everything the spin workshop needs on a Debian 12 (bookworm) x86_64 host, as root.
# Idempotent: a second run only checks. Prints the exact versions it ends up with.
#
# Extra apt suites (trixie, trixie-backports, bookworm-backports) are derived from the machine's
# own deb822 source (no host name is written here) and pinned low, so nothing else upgrades;
# packages from them are installed by exact version.
set -euo pipefail

log() { printf '[setup] %s\n' "$*"; }
die() { printf '[setup] ERROR: %s\n' "$*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "run as root (the workshop installs packages)"

STAMP_DIR=${SPIN_STAMP_DIR:-/var/lib/spin-workshop}
mkdir -p "$STAMP_DIR"

BOOKWORM_PKGS=(
	clang-19 lld-19 llvm-19 libclang-19-dev
	bison flex cpio kmod libelf-dev rsync bc ccache
	busybox-static fio pciutils e2fsprogs xfsprogs mdadm dmsetup iproute2 python3 python3-numpy python3-matplotlib python3-docutils
	gcc make git
)

add_suites() {
	local src=/etc/apt/sources.list.d/debian.sources
	local changed=0
	[ -f "$src" ] || die "$src not found: cannot derive the Debian mirror"
	# First stanza whose Suites line names plain bookworm: copy it, change Suites.
	local stanza
	stanza=$(awk 'BEGIN{RS=""; ORS="\n"} /Suites:[^\n]*bookworm([ \n]|$)/ && !/security/ {print; exit}' "$src")
	[ -n "$stanza" ] || die "no bookworm stanza in $src"
	local s
	for s in "trixie trixie-backports:spin-trixie" "bookworm-backports:spin-bookworm-backports"; do
		local suites=${s%%:*} name=${s##*:}
		local f=/etc/apt/sources.list.d/$name.sources
		local want
		want=$(printf '%s\n' "$stanza" | sed -e "s/^Suites:.*/Suites: $suites/" -e '/^#/d')
		if [ ! -f "$f" ] || [ "$(cat "$f")" != "$want" ]; then
			printf '%s\n' "$want" > "$f"
			changed=1
		fi
	done
	# One stanza per suite, separated by blank lines (apt reads only the first otherwise).
	local pin=/etc/apt/preferences.d/spin-trixie
	local want_pin
	want_pin=$(printf 'Package: *\nPin: release n=trixie\nPin-Priority: 100\n\nPackage: *\nPin: release n=trixie-backports\nPin-Priority: 100\n')
	if [ ! -f "$pin" ] || [ "$(cat "$pin")" != "$want_pin" ]; then
		printf '%s\n' "$want_pin" > "$pin"
		changed=1
	fi
	if [ $changed = 1 ] || [ ! -f "$STAMP_DIR/apt-updated" ]; then
		log "apt-get update (suites: bookworm + trixie, trixie-backports, bookworm-backports pinned low)"
		apt-get update -q >/dev/null
		touch "$STAMP_DIR/apt-updated"
	fi
	# The pin must hold: libc6 stays bookworm's.
	apt-cache policy libc6 | awk '/Candidate:/ {print $2}' | grep -q 'deb12' ||
		die "apt pinning failed: libc6 candidate is not bookworm's"
}

# version_from PKG SUITE [PREFIX]: the newest version of PKG that SUITE offers (starting with PREFIX).
version_from() {
	apt-cache madison "$1" |
		awk -v s="$2" -v pre="${3:-}" -F' *\\| *' \
			'($3 ~ (" " s "/") || $3 ~ ("^" s "/")) && index($2, pre) == 1 {print $2; exit}'
}

installed_version() { dpkg-query -W -f='${Version}' "$1" 2>/dev/null || true; }

install_exact() { # SUITE PKG[:VERSION-PREFIX]...
	local suite=$1; shift
	local args=() p v pre
	for p in "$@"; do
		pre=
		case $p in *:*) pre=${p#*:}; p=${p%%:*} ;; esac
		v=$(version_from "$p" "$suite" "$pre")
		[ -n "$v" ] || die "$p is not offered by $suite"
		[ "$(installed_version "$p")" = "$v" ] || args+=("$p=$v")
	done
	if [ ${#args[@]} -gt 0 ]; then
		log "installing from $suite: ${args[*]}"
		did_install=1
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q --allow-downgrades --no-install-recommends "${args[@]}" >/dev/null
	fi
}

add_suites

missing=()
for p in "${BOOKWORM_PKGS[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
	log "installing from bookworm: ${missing[*]}"
	did_install=1
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
fi

# Exact versions from the added suites. rust-src must match the installed rustc exactly
# (RUST_LIB_SRC); qemu's own packages and its firmware must come together.
rustc_ver=$(rustc --version | awk '{print $2}')
install_exact trixie-backports linux-source-7.3 "rust-src:$rustc_ver+"
install_exact bookworm-backports qemu-system-x86 qemu-system-common qemu-system-data seabios

if ! command -v bindgen >/dev/null 2>&1 || ! bindgen --version | grep -q '0\.72\.1'; then
	log "cargo install bindgen-cli 0.72.1 (about a minute)"
	did_install=1
	cargo install --quiet --locked bindgen-cli --version 0.72.1 --root /usr/local
fi

if [ -f "$STAMP_DIR/versions" ] && [ -z "${did_install:-}" ] && [ -z "${VERBOSE:-}" ]; then
	log "toolchain present ($(tr -s ' ' < "$STAMP_DIR/versions" | sed -n 's/^ *rustc: *//p'), versions in $STAMP_DIR/versions)"
	exit 0
fi
log "versions:"
{
	printf '  rustc:        %s\n' "$(rustc --version)"
	printf '  rust-src:     %s\n' "$(installed_version rust-src)"
	printf '  bindgen:      %s\n' "$(bindgen --version)"
	printf '  clang:        %s\n' "$(clang-19 --version | head -1)"
	printf '  linux-source: %s\n' "$(installed_version linux-source-7.3)"
	printf '  qemu:         %s\n' "$(qemu-system-x86_64 --version | head -1)"
	printf '  busybox:      %s\n' "$(installed_version busybox-static)"
	printf '  fio:          %s\n' "$(installed_version fio)"
} | tee "$STAMP_DIR/versions"
