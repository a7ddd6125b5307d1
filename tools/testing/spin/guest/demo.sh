#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# The `make run` demo, in the guest. Output goes to the host's terminal.
sysattr() { cat "$1" 2>/dev/null || echo "?"; }
nvme_dev() { # the namespace of the NVMe device with serial $1 (sysfs pads serials)
	for b in /sys/block/nvme*; do
		[ -e "/dev/${b##*/}" ] && [ "$(sysattr "$b/device/serial" | tr -d ' ')" = "$1" ] &&
			echo "/dev/${b##*/}"
	done
}

echo "==== spin demo: $(uname -r) ===="
echo
echo "-- the spin module"
dmesg | grep -E 'spin: ' | sed 's/^/   /'
echo
echo "-- the rig's devices (found by serial and vendor:device)"
for c in /sys/class/nvme/nvme*; do
	pci=$(basename "$(readlink -f "$c/device")")
	p2p="not a p2pdma provider"
	[ -d "$c/device/p2pmem" ] &&
		p2p="p2pmem: $(sysattr "$c/device/p2pmem/size") bytes, $(sysattr "$c/device/p2pmem/available") available"
	echo "   $(basename "$c") serial=$(sysattr "$c/serial") pci=$pci  $p2p"
done
for d in /sys/bus/pci/devices/*; do
	[ "$(sysattr "$d/vendor")" = 0x1af4 ] && [ "$(sysattr "$d/device")" = 0x1110 ] || continue
	size=$(stat -c %s "$d/resource2")
	echo "   stand-in GPU (ivshmem-plain) pci=$(basename "$d") BAR2=$((size >> 20)) MiB"
done
echo
echo "-- rig checks (devices, switch, host-side GPU agent)"
/spin/tests/devices_test | sed 's/^/   /'
echo
echo "-- upstream p2pdma: O_DIRECT between the NVMe namespace and the other controller's CMB"
/spin/tests/p2pdma_nvme_test | sed 's/^/   /'

echo
echo "-- GPU memory as a dma-buf: an unmodified pread() from NVMe into it"
dev=$(nvme_dev spin-nvme0)
mkdir -p /mnt/demo
if [ -z "$dev" ] || ! mkfs.ext4 -q -F "$dev" || ! mount -t ext4 "$dev" /mnt/demo; then
	echo "not ok - no ext4 on spin-nvme0 (device '$dev')"
	exit 1
fi
dd if=/dev/urandom of=/mnt/demo/data bs=1M count=48 2>/dev/null
sync
echo 3 > /proc/sys/vm/drop_caches
echo "   a 48 MiB file of random bytes on ext4 on $dev (spin-nvme0); the page cache dropped"
gpu_pread /mnt/demo/data > /tmp/gpu_pread.out 2>&1
rc=$?
sed 's/^/   /' /tmp/gpu_pread.out
if [ $rc = 0 ]; then
	echo "ok - the GPU holds exactly the file's bytes"
else
	echo "not ok - the GPU memory does not hold the file's bytes"
fi

echo
echo "-- the router: a plain buffered pread() of the same file, half of it in the page cache"
disk=${dev##*/}
echo 3 > /proc/sys/vm/drop_caches
dd if=/mnt/demo/data of=/dev/null bs=1M count=24 2>/dev/null
echo "   the first 24 MiB read into the page cache; mode $(sysattr /sys/kernel/spin/mode)"
mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null
echo 1 > /sys/kernel/tracing/events/spin/enable
echo > /sys/kernel/tracing/trace
sed 's/^/   before: /' "/sys/block/$disk/spin/stat" | grep -E 'requests|bytes_' > /tmp/stat.before
gpu_pread -b /mnt/demo/data > /tmp/gpu_pread.out 2>&1
rc2=$?
sed 's/^/   /' /tmp/gpu_pread.out
echo 0 > /sys/kernel/tracing/events/spin/enable
echo "   trace (spin:spin_route_segment, spin:spin_route), first lines:"
grep -o 'spin_route.*' /sys/kernel/tracing/trace | head -8 | sed 's/^/     /'
echo "   /sys/block/$disk/spin/stat:"
cat /tmp/stat.before
grep -E 'requests|bytes_' "/sys/block/$disk/spin/stat" | sed 's/^/   after:  /'
if [ $rc2 = 0 ]; then
	echo "ok - buffered pread: the GPU holds exactly the file's bytes"
else
	echo "not ok - buffered pread: the GPU memory does not hold the file's bytes"
fi

echo
echo "-- the README's example: gpu_pread_example HEAP IN OUT LENGTH"
# The heap of the provider with the most p2pdma memory: the stand-in GPU, not a CMB.
heap=$(for h in /dev/dma_heap/p2p-*; do
	echo "$(sysattr "/sys/bus/pci/devices/${h##*/p2p-}/p2pmem/size") $h"
done | sort -n | tail -1 | cut -d' ' -f2)
echo "   gpu_pread_example $heap /mnt/demo/data /mnt/demo/copy 16777216"
gpu_pread_example "$heap" /mnt/demo/data /mnt/demo/copy 16777216 2>&1 | sed 's/^/   /'
if head -c 16777216 /mnt/demo/data | cmp -s - /mnt/demo/copy; then
	echo "ok - the copy written from GPU memory holds the file's first 16 MiB"
else
	echo "not ok - the copy written from GPU memory differs from the file"
fi
umount /mnt/demo
