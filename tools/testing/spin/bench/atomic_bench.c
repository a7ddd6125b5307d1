// SPDX-License-Identifier: GPL-2.0
/*
 * atomic_bench: the cost of XFS read atomicity. On XFS the P2P
 * legs of a routed read are synchronous direct reads, under the IOLOCK for
 * the whole I/O, so that a page written during the read comes back whole
 * (/sys/kernel/spin/atomic_reads 1, the default); with atomic_reads 0 they
 * are asynchronous, overlapped with each other and with the page-cache
 * copies, as on other filesystems.
 *
 * A file of file_mib MiB on a fresh XFS on spin-nvme1 is read into GPU
 * memory with 8 MiB pread() calls in mode auto, in two residencies:
 *  - uncached (caches dropped before each pass): one P2P leg per chunk;
 *  - half cached: every other 64 KiB run read by the CPU first, so that
 *    each chunk has 64 P2P legs and 64 copies.
 * Each round measures atomic_reads 1 then 0 (then 0 then 1 in the next
 * round: the first pass of a round was seen to profit from what is left of
 * QEMU's throttling burst, so the rounds must be even), after draining the
 * burst. The figure is the ratio of the medians, 1 / 0 (1.0: no cost). Every pass's last chunk is checked from the host side of the GPU
 * memory ("not ok" on a wrong byte).
 *
 * Options on the kernel command line (vm.py --append): atomic_bench.rounds
 * (6, even), .file_mib (64), .bps and .iops (the QEMU throttling, to drain its
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
#include <unistd.h>

#include "bench_lib.h"
#include "spin_lib.h"

#define KiB (1UL << 10)
#define MiB (1UL << 20)
#define CHUNK (8 * MiB)
#define RUN (64 * KiB)
#define SEED 0xa70cULL
#define MNT "/mnt/atomic_bench"
#define SPIN_SYS "/sys/kernel/spin"
#define MAX_ROUNDS 16

static struct {
	long rounds, file_mib;
	long long bps, iops;
} opt = { 6, 64, 0, 0 };

static char gpu_dir[PATH_MAX], dev[64];
static int raw_fd = -1, file_fd = -1;
static uint8_t *gmem, *host, *drain_buf;
static long long dev_size;
static double t_start;

/* Puts back what the bench changed, after a failure. */
static void cleanup(void)
{
	spin_write_file(SPIN_SYS "/atomic_reads", "1");
	if (system("umount " MNT " 2>/dev/null"))
		printf("# umount failed too\n");
}

__printf(1, 2) static void die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	bench_vdie("atomic_bench", t_start, cleanup, fmt, ap);
	va_end(ap);
}

static void set_atomic(int on)
{
	if (spin_write_file(SPIN_SYS "/atomic_reads", on ? "1" : "0"))
		die("atomic_reads %d: %s", on, strerror(errno));
}

/* Uncached, or every other 64 KiB run cached by a CPU read. */
static void prepare(int half)
{
	size_t len = opt.file_mib * MiB;
	int ret;

	sync();
	if (spin_write_file("/proc/sys/vm/drop_caches", "3"))
		die("drop_caches: %s", strerror(errno));
	for (size_t off = 0; half && off < len; off += 2 * RUN)
		if (pread(file_fd, host, RUN, off) != (ssize_t)RUN)
			die("caching a run: %s", strerror(errno));
	ret = bench_drain(raw_fd, dev_size, opt.bps, opt.iops, drain_buf);
	if (ret)
		die("draining the throttle: %s", strerror(-ret));
}

/* One timed pass in MB/s; the last chunk checked from the host side. */
static double pass(const char *what)
{
	size_t len = opt.file_mib * MiB;
	char why[256];
	double t = bench_now();

	for (size_t off = 0; off < len; off += CHUNK)
		if (pread(file_fd, gmem, CHUNK, off) != (ssize_t)CHUNK)
			die("%s: pread at %zu: %s", what, off, strerror(errno));
	t = bench_now() - t;
	if (spin_gpu_check(gpu_dir, gmem, CHUNK, SEED, len - CHUNK, why, sizeof(why)))
		bench_fail("%s: last chunk wrong: %s", what, why);
	return len / t / 1e6;
}

static void measure(int half, double *ratio)
{
	const char *name = half ? "half cached (64 KiB runs)" : "uncached";
	double on[MAX_ROUNDS], off[MAX_ROUNDS], m_on, m_off;

	for (int r = 0; r < opt.rounds; r++) {
		for (int k = 0; k < 2; k++) {
			int atomic = (r + k) % 2 == 0;

			set_atomic(atomic);
			prepare(half);
			(atomic ? on : off)[r] = pass(name);
		}
		printf("# %s round %d: atomic_reads 1 %.1f MB/s, 0 %.1f MB/s\n", name, r, on[r],
		       off[r]);
	}
	set_atomic(1);
	m_on = bench_median(on, opt.rounds);
	m_off = bench_median(off, opt.rounds);
	*ratio = m_on / m_off;
	printf("| %s | %.1f | %.1f | %.3f |\n", name, m_on, m_off, *ratio);
	printf("ab-case name=\"%s\" atomic_mbps=%.1f async_mbps=%.1f ratio=%.3f\n", name, m_on,
	       m_off, *ratio);
}

int main(void)
{
	size_t len;
	char release[128] = "?", cmd[512];
	double r_unc, r_half;
	int heap, buf;

	setvbuf(stdout, NULL, _IOLBF, 0);
	t_start = bench_now();
	opt.rounds = bench_opt_ll("atomic_bench", "rounds", opt.rounds);
	opt.file_mib = bench_opt_ll("atomic_bench", "file_mib", opt.file_mib);
	opt.bps = bench_opt_ll("atomic_bench", "bps", opt.bps);
	opt.iops = bench_opt_ll("atomic_bench", "iops", opt.iops);
	if (opt.rounds < 2 || opt.rounds > MAX_ROUNDS || opt.rounds % 2 || opt.file_mib < 8 ||
	    opt.file_mib % 8 || opt.file_mib > 512)
		die("atomic_bench.rounds=%ld (2..%d, even) / file_mib=%ld (8..512, multiple of 8) out of range",
		    opt.rounds, MAX_ROUNDS, opt.file_mib);
	len = opt.file_mib * MiB;
	if (access(SPIN_SYS "/atomic_reads", F_OK))
		die("%s/atomic_reads is absent: this kernel has no such knob", SPIN_SYS);
	if (spin_gpu_find(gpu_dir, sizeof(gpu_dir)) ||
	    spin_nvme_blockdev(SPIN_NVME1_SERIAL, dev, sizeof(dev)))
		die("rig devices not found (stand-in GPU, %s)", SPIN_NVME1_SERIAL);
	spin_read_file("/proc/sys/kernel/osrelease", release, sizeof(release));
	gmem = spin_gpu_buffer(gpu_dir, CHUNK, &heap, &buf);
	host = spin_alloc_aligned(CHUNK);
	drain_buf = spin_alloc_aligned(MiB);
	raw_fd = open(dev, O_RDONLY | O_DIRECT);
	if (gmem == MAP_FAILED || !host || !drain_buf || raw_fd < 0 ||
	    ioctl(raw_fd, BLKGETSIZE64, &dev_size))
		die("setting up GPU memory and the disk: %s", strerror(errno));
	if (spin_write_file(SPIN_SYS "/mode", "auto"))
		die("mode auto: %s", strerror(errno));
	snprintf(cmd, sizeof(cmd), "mkdir -p " MNT " && mkfs.xfs -q -f %s && mount -t xfs %s " MNT,
		 dev, dev);
	if (system(cmd))
		die("no xfs on %s", dev);
	file_fd = open(MNT "/f", O_RDWR | O_CREAT | O_TRUNC, 0644);
	for (size_t off = 0; file_fd >= 0 && off < len; off += CHUNK) {
		spin_pattern_fill(host, off, CHUNK, SEED);
		if (pwrite(file_fd, host, CHUNK, off) != (ssize_t)CHUNK)
			die("writing the file: %s", strerror(errno));
	}
	if (file_fd < 0 || fsync(file_fd))
		die("the file: %s", strerror(errno));
	printf("ab-header kernel=%s rounds=%ld file_mib=%ld bps=%lld iops=%lld\n", release,
	       opt.rounds, opt.file_mib, opt.bps, opt.iops);
	if (!opt.bps && !opt.iops)
		printf("# warning: the disk is not throttled (atomic_bench.bps/iops unset)\n");

	printf("\n## XFS, 8 MiB reads into GPU memory, %ld MiB file, mode auto\n\n",
	       opt.file_mib);
	printf("| residency | atomic_reads 1, MB/s | atomic_reads 0, MB/s | 1 / 0 |\n");
	printf("|---|---|---|---|\n");
	measure(0, &r_unc);
	measure(1, &r_half);
	printf("\nCost of synchronous P2P legs on XFS (median of %ld interleaved rounds): "
	       "uncached %.3fx, half cached %.3fx of asynchronous legs\n", opt.rounds, r_unc,
	       r_half);
	close(file_fd);
	if (umount(MNT))
		printf("# umount: %s\n", strerror(errno));
	if (!bench_failures)
		printf("ok %d - every checked byte right\n", ++bench_tapn);
	printf("1..%d\n# atomic_bench done in %.0f s\n", bench_tapn, bench_now() - t_start);
	return bench_failures ? 1 : 0;
}
