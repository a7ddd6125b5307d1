#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Build the guest's initramfs (uncompressed: decompression is slow under TCG): busybox,
# fio, mkfs.ext4, mkfs.xfs, mdadm, dmsetup, ip, rdma (with their shared libraries), the spin
# user tool, the spin selftests built from the kernel tree, the selfcheck program, and the
# guest scripts.
# The cpio is rewritten only when its content changes.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
guest=$here/../guest
: "${KSRC:?}" "${KOBJ:?}" "${BUILD:?}"
stage=$BUILD/initramfs
out=$BUILD/initramfs.cpio
log() { printf '[initramfs] %s\n' "$*"; }

rm -rf "$stage"
mkdir -p "$stage"/{bin,sbin,usr/bin,usr/sbin,etc,dev,proc,sys,tmp,mnt,spin/tests,spin/selfcheck}

add_file() { # copy a host file to the same path in the guest
	mkdir -p "$stage$(dirname "$1")"
	cp -L "$1" "$stage$1"
}
add_bin() { # a dynamic executable and every library it needs
	local bin=$1 lib
	add_file "$bin"
	for lib in $(ldd "$bin" | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}'); do
		[ -e "$stage$lib" ] || add_file "$lib"
	done
}

cp /bin/busybox "$stage/bin/busybox"
add_bin /usr/bin/fio
add_bin /sbin/mke2fs
ln -sf mke2fs "$stage/sbin/mkfs.ext4"
add_bin /sbin/mkfs.xfs
# Filesystem checks after faults (remote_test)
add_bin /sbin/e2fsck
add_bin /sbin/xfs_repair
# md and dm stacks (stack_test)
add_bin /sbin/mdadm
add_bin /sbin/dmsetup
# NVMe over Fabrics (remote_test): iproute2's ip for the veth pair (busybox's ip cannot make
# one) and rdma for the soft-RoCE link, kept at their own paths beside busybox's applets.
add_bin /usr/sbin/ip
add_bin /usr/bin/rdma
[ -f /etc/mke2fs.conf ] && add_file /etc/mke2fs.conf

log "building the spin selftests from the kernel tree"
mkdir -p "$BUILD/selftests"
make -s -C "$KSRC/tools/testing/selftests/spin" OUTPUT="$BUILD/selftests" \
	KHDR_INCLUDES="-isystem $KOBJ/usr/include"
selftest_var() {
	make -s -C "$KSRC/tools/testing/selftests/spin" OUTPUT="$BUILD/selftests" \
		KHDR_INCLUDES="-isystem $KOBJ/usr/include" -f Makefile -f - print <<<"print: ; @echo \$($1)"
}
mkdir -p "$stage/spin/bin"
for p in $(selftest_var TEST_GEN_PROGS); do
	cp "$p" "$stage/spin/tests/"
done
for p in $(selftest_var TEST_GEN_FILES); do
	cp "$p" "$stage/spin/bin/"
done
gcc -O2 -Wall -static -I"$KSRC/tools/testing/selftests" -o "$stage/spin/selfcheck/selfcheck_fail" \
	"$guest/selfcheck_fail.c"
# Benchmarks (vm.py --mode bench), built against the selftests' helper library.
mkdir -p "$stage/spin/bench"
for b in "$here"/../bench/*_bench.c; do
	gcc -O2 -Wall -static -isystem "$KOBJ/usr/include" -I"$KSRC/tools/testing/selftests/spin" \
		-o "$stage/spin/bench/$(basename "$b" .c)" "$b" "$here/../bench/bench_lib.c" \
		"$KSRC/tools/testing/selftests/spin/spin_lib.c" -lm -lpthread
done

# The user tool (tools/spin), static, as /usr/bin/spin.
log "building tools/spin"
CARGO_TARGET_DIR="$BUILD/tools-spin" RUSTFLAGS="-C target-feature=+crt-static" \
	cargo build --release --quiet --locked --manifest-path "$here/../../../spin/Cargo.toml"
cp "$BUILD/tools-spin/release/spin" "$stage/usr/bin/spin"

cp "$guest/init" "$stage/init"
# fio regression jobs (run by fio_test).
mkdir -p "$stage/spin/fio"
cp "$here"/../fio/*.fio "$stage/spin/fio/"
cp "$guest/run.sh" "$guest/demo.sh" "$stage/spin/"
mknod -m 600 "$stage/dev/console" c 5 1

(cd "$stage" && find . -print0 | LC_ALL=C sort -z | cpio -o -H newc --null --quiet \
	--reproducible) > "$out.new"
if [ -f "$out" ] && cmp -s "$out" "$out.new"; then
	rm "$out.new"
else
	mv "$out.new" "$out"
fi
log "$(du -h "$out" | cut -f1) $out; tests: $(ls "$stage/spin/tests" | tr '\n' ' ')"
