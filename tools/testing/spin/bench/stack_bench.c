// SPDX-License-Identifier: GPL-2.0
/*
 * stack_bench: sequential reads into GPU memory from an md RAID-0 over the
 * two throttled NVMe drives behind the GPU's switch against one of them
 * (SPIN's headline: 5.2 GB/s from two SSDs in RAID-0).
 *
 * 1. One drive: ext4 on spin-nvme0, a file of file_mib MiB written by the
 *    CPU; each round drops the caches, drains QEMU's throttling burst on
 *    both drives and reads the file with 8 MiB pread() calls into GPU memory
 *    (the stand-in GPU's DMA-BUF heap, mmapped) under
 *    /sys/kernel/spin/mode auto.
 * 2. md RAID-0 (512 KiB chunks) over spin-nvme0 + spin-nvme1, ext4, the same
 *    file and the same rounds.
 * The ratio of the medians, RAID-0 / one drive, is the figure (goal >= 1.8).
 * Every pass's last 8 MiB, and one full untimed pass per setup, are checked
 * from the host side of the GPU memory ("not ok" on a wrong byte); the
 * disks' spin counters show how many bytes went by P2P.
 *
 * Options on the kernel command line (vm.py --append): stack_bench.rounds
 * (3), .file_mib (128), .bps and .iops (the QEMU throttling, to drain its
 * burst; the Makefile passes them).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <time.h>
#include <unistd.h>

#include "bench_lib.h"
#include "spin_lib.h"

#define KiB (1UL << 10)
#define MiB (1UL << 20)
#define CHUNK (8 * MiB)
#define SEED 0x57acULL
#define MNT "/mnt/stack_bench"
#define MODE_PATH "/sys/kernel/spin/mode"
#define MAX_ROUNDS 9

static struct {
	long rounds, file_mib;
	long long bps, iops;
} opt = { 3, 128, 0, 0 };

static char gpu_dir[PATH_MAX], dev0[64], dev1[64];
static int raw_fd[2] = { -1, -1 };
static uint8_t *gmem, *host, *drain_buf;
static long long dev_size[2];
static double t_start;

/* Puts back what the bench changed, after a failure. */
static void cleanup(void)
{
	if (system("umount " MNT " 2>/dev/null; mdadm --stop /dev/md0 >/dev/null 2>&1"))
		printf("# cleaning up after the failure failed too\n");
}

__printf(1, 2) static void die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	bench_vdie("stack_bench", t_start, cleanup, fmt, ap);
	va_end(ap);
}

/* QEMU's throttling burst, spent on both drives (see bench_drain()). */
static void drain(void)
{
	for (int d = 0; d < 2; d++) {
		int ret = bench_drain(raw_fd[d], dev_size[d], opt.bps, opt.iops, drain_buf);

		if (ret)
			die("draining the throttle: %s", strerror(-ret));
	}
}

static void drop_caches(void)
{
	sync();
	if (spin_write_file("/proc/sys/vm/drop_caches", "3"))
		die("drop_caches: %s", strerror(errno));
}

/*
 * One setup: mkfs.ext4 on @dev, the file, the rounds; the rates in MB/s go
 * to @rate. The P2P bytes of the timed passes are counted on @disk.
 */
static void measure(const char *what, const char *dev, double *rate)
{
	size_t len = opt.file_mib * MiB;
	char cmd[512], why[256], stat[256];
	long long p2p0, p2p1;
	int fd;

	snprintf(cmd, sizeof(cmd), "mkdir -p " MNT " && mkfs.ext4 -q -F -E nodiscard,"
		 "lazy_itable_init=0,lazy_journal_init=0 %s && mount -t ext4 %s " MNT, dev, dev);
	if (system(cmd))
		die("%s: no ext4 on %s", what, dev);
	snprintf(stat, sizeof(stat), "/sys/block/%s/spin/stat", strrchr(dev, '/') + 1);
	fd = open(MNT "/f", O_RDWR | O_CREAT | O_TRUNC, 0644);
	for (size_t off = 0; fd >= 0 && off < len; off += CHUNK) {
		spin_pattern_fill(host, off, CHUNK, SEED);
		if (pwrite(fd, host, CHUNK, off) != (ssize_t)CHUNK)
			die("%s: writing the file: %s", what, strerror(errno));
	}
	if (fd < 0 || fsync(fd))
		die("%s: the file: %s", what, strerror(errno));

	/* One untimed pass, every chunk checked from the host side. */
	drop_caches();
	for (size_t off = 0; off < len; off += CHUNK)
		if (pread(fd, gmem, CHUNK, off) != (ssize_t)CHUNK ||
		    spin_gpu_check(gpu_dir, gmem, CHUNK, SEED, off, why, sizeof(why))) {
			bench_fail("%s: read into GPU memory at %zu: %s", what, off, why);
			break;
		}

	p2p0 = spin_stat_get(stat, "bytes_p2p");
	for (int r = 0; r < opt.rounds; r++) {
		double t;

		drop_caches();
		drain();
		t = bench_now();
		for (size_t off = 0; off < len; off += CHUNK)
			if (pread(fd, gmem, CHUNK, off) != (ssize_t)CHUNK)
				die("%s: pread: %s", what, strerror(errno));
		rate[r] = len / (bench_now() - t) / 1e6;
		if (spin_gpu_check(gpu_dir, gmem, CHUNK, SEED, len - CHUNK, why, sizeof(why)))
			bench_fail("%s: round %d: last chunk wrong: %s", what, r, why);
		printf("# %s round %d: %.1f MB/s\n", what, r, rate[r]);
	}
	p2p1 = spin_stat_get(stat, "bytes_p2p");
	printf("sb-setup name=\"%s\" dev=%s median_mbps=%.1f p2p_bytes=%lld of %lld\n", what,
	       dev, bench_median(rate, opt.rounds), p2p1 - p2p0, (long long)len * opt.rounds);
	close(fd);
	if (umount(MNT))
		die("%s: umount: %s", what, strerror(errno));
}

int main(void)
{
	double one[MAX_ROUNDS], raid[MAX_ROUNDS], m1, m2;
	char release[128] = "?";
	int heap, buf;

	setvbuf(stdout, NULL, _IOLBF, 0);
	t_start = bench_now();
	opt.rounds = bench_opt_ll("stack_bench", "rounds", opt.rounds);
	opt.file_mib = bench_opt_ll("stack_bench", "file_mib", opt.file_mib);
	opt.bps = bench_opt_ll("stack_bench", "bps", opt.bps);
	opt.iops = bench_opt_ll("stack_bench", "iops", opt.iops);
	if (opt.rounds < 1 || opt.rounds > MAX_ROUNDS || opt.file_mib < 8 || opt.file_mib % 8 ||
	    opt.file_mib > 512)
		die("stack_bench.rounds=%ld (1..%d) / file_mib=%ld (8..512, multiple of 8) out of range",
		    opt.rounds, MAX_ROUNDS, opt.file_mib);
	if (access(MODE_PATH, F_OK))
		die("%s is absent: this kernel has no spin router", MODE_PATH);
	if (spin_gpu_find(gpu_dir, sizeof(gpu_dir)) ||
	    spin_nvme_blockdev(SPIN_NVME0_SERIAL, dev0, sizeof(dev0)) ||
	    spin_nvme_blockdev(SPIN_NVME1_SERIAL, dev1, sizeof(dev1)))
		die("rig devices not found (stand-in GPU, %s, %s)", SPIN_NVME0_SERIAL,
		    SPIN_NVME1_SERIAL);
	spin_read_file("/proc/sys/kernel/osrelease", release, sizeof(release));
	gmem = spin_gpu_buffer(gpu_dir, CHUNK, &heap, &buf);
	host = spin_alloc_aligned(CHUNK);
	drain_buf = spin_alloc_aligned(MiB);
	raw_fd[0] = open(dev0, O_RDONLY | O_DIRECT);
	raw_fd[1] = open(dev1, O_RDONLY | O_DIRECT);
	if (gmem == MAP_FAILED || !host || !drain_buf || raw_fd[0] < 0 || raw_fd[1] < 0 ||
	    ioctl(raw_fd[0], BLKGETSIZE64, &dev_size[0]) ||
	    ioctl(raw_fd[1], BLKGETSIZE64, &dev_size[1]))
		die("setting up GPU memory and the disks: %s", strerror(errno));
	if (spin_write_file(MODE_PATH, "auto"))
		die("%s: %s", MODE_PATH, strerror(errno));
	printf("sb-header kernel=%s rounds=%ld file_mib=%ld bps=%lld iops=%lld\n", release,
	       opt.rounds, opt.file_mib, opt.bps, opt.iops);
	if (!opt.bps && !opt.iops)
		printf("# warning: the disks are not throttled (stack_bench.bps/iops unset)\n");

	measure("one drive (spin-nvme0)", dev0, one);
	{
		char cmd[512];

		snprintf(cmd, sizeof(cmd), "mkdir -p /run; mdadm --zero-superblock %s %s "
			 ">/dev/null 2>&1; mdadm --create /dev/md0 --run --assume-clean "
			 "--metadata=1.2 --level=0 --chunk=512 --raid-devices=2 %s %s "
			 "</dev/null >/dev/null 2>&1", dev0, dev1, dev0, dev1);
		if (system(cmd))
			die("mdadm --create /dev/md0 (RAID-0 over %s, %s) failed", dev0, dev1);
	}
	measure("md RAID-0 (spin-nvme0 + spin-nvme1)", "/dev/md0", raid);
	{
		char cmd[256];

		snprintf(cmd, sizeof(cmd), "mdadm --stop /dev/md0 >/dev/null 2>&1; "
			 "mdadm --zero-superblock %s %s >/dev/null 2>&1", dev0, dev1);
		if (system(cmd))
			printf("# mdadm --stop or --zero-superblock failed\n");
	}

	m1 = bench_median(one, opt.rounds);
	m2 = bench_median(raid, opt.rounds);
	printf("\n## Sequential 8 MiB reads into GPU memory, %ld MiB uncached file, mode auto\n\n",
	       opt.file_mib);
	printf("| setup | MB/s (median of %ld) |\n|---|---|\n", opt.rounds);
	printf("| one drive (spin-nvme0) | %.1f |\n", m1);
	printf("| md RAID-0 over spin-nvme0 + spin-nvme1 | %.1f |\n", m2);
	printf("\nRAID-0 / one drive: **%.2fx** (goal >= 1.8x: %s)\n", m2 / m1,
	       m2 / m1 >= 1.8 ? "met" : "missed");
	printf("sb-ratio raid0_over_one=%.3f\n", m2 / m1);
	if (!bench_failures)
		printf("ok %d - every checked byte right\n", ++bench_tapn);
	printf("1..%d\n# stack_bench done in %.0f s\n", bench_tapn, bench_now() - t_start);
	return bench_failures ? 1 : 0;
}
