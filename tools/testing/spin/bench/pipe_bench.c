// SPDX-License-Identifier: GPL-2.0
/*
 * pipe_bench: chunk pipelining of routed reads. The router plans
 * and runs a read in chunks of 8 MiB; with /sys/kernel/spin/pipeline 1 (the
 * default) it starts the P2P legs of the next chunk before it copies the
 * current one, with 0 it runs chunk after chunk and the device idles while
 * the CPU finishes a chunk's copies.
 *
 * A file of file_mib MiB on a fresh ext4 on spin-nvme0 (asynchronous P2P
 * legs) is read into GPU memory with pread() calls of size_mib MiB (32: four
 * chunks), in three residencies:
 *  - "8 MiB runs": every other 8 MiB chunk cached by a CPU read, so that a
 *    cached chunk (one copy) is followed by an uncached one (P2P);
 *  - "1 MiB runs": every other 1 MiB run cached, each chunk half and half;
 *  - "uncached".
 * The disk's cost model is the rig's, fitted by spin calibrate --apply on
 * the file first. Every round measures four ways, after the residency is set and QEMU's
 * throttling burst drained, in an order that turns by one each round:
 * mode auto with pipeline 1 and with pipeline 0, mode p2p and mode
 * pagecache (both with pipeline 1). Printed per residency: the median MB/s
 * of each, pipeline 1 / 0 as the median of the per-round ratios with their
 * spread, and auto / the best fixed path. Every pass's last read is checked
 * from the host side of the GPU memory ("not ok" on a wrong byte); the
 * disk's pipelined_chunks must move with pipeline 1 (a chunk after the
 * first has P2P legs in every residency) and never with 0.
 *
 * Options on the kernel command line (vm.py --append): pipe_bench.rounds
 * (8), .file_mib (64), .size_mib (32), .bps and .iops (the QEMU throttling,
 * to drain its burst; the Makefile passes them).
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

#define KiB 1024UL
#define MiB (1024 * KiB)
#define SEED 0x919eULL
#define MNT "/mnt/pipe_bench"
#define SPIN_SYS "/sys/kernel/spin"
#define MAX_ROUNDS 16

enum { W_PIPE, W_SERIAL, W_P2P, W_PC, NWAYS };
static const char *const way_name[NWAYS] = { "auto", "auto, pipeline 0", "p2p", "pagecache" };

static struct {
	long rounds, file_mib, size_mib;
	long long bps, iops;
} opt = { 8, 64, 32, 0, 0 };

static char gpu_dir[PATH_MAX], dev[64], disk[64], stat_path[PATH_MAX];
static int raw_fd = -1, file_fd = -1;
static uint8_t *gmem, *host, *drain_buf;
static long long dev_size;
static double t_start;

/* Puts back what the bench changed, after a failure. */
static void cleanup(void)
{
	spin_write_file(SPIN_SYS "/pipeline", "1");
	spin_write_file(SPIN_SYS "/mode", "auto");
	if (system("umount " MNT " 2>/dev/null"))
		printf("# umount failed too\n");
}

__printf(1, 2) static void die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	bench_vdie("pipe_bench", t_start, cleanup, fmt, ap);
	va_end(ap);
}

static void set_way(int w)
{
	static const char *const mode[NWAYS] = { "auto", "auto", "p2p", "pagecache" };

	if (spin_write_file(SPIN_SYS "/pipeline", w == W_SERIAL ? "0" : "1") ||
	    spin_write_file(SPIN_SYS "/mode", mode[w]))
		die("%s: %s", way_name[w], strerror(errno));
}

/* Caches every other @run bytes of the file (none for @run 0), drains the throttle. */
static void prepare(size_t run)
{
	size_t len = opt.file_mib * MiB;
	int ret;

	if (fsync(file_fd) || posix_fadvise(file_fd, 0, 0, POSIX_FADV_DONTNEED))
		die("dropping the file's pages: %s", strerror(errno));
	for (size_t off = 0; run && off < len; off += 2 * run)
		for (size_t at = 0; at < run; at += MiB) {
			size_t n = run - at < MiB ? run - at : MiB;

			if (pread(file_fd, host, n, off + at) != (ssize_t)n)
				die("caching a run at %zu: %s", off + at, strerror(errno));
		}
	ret = bench_drain(raw_fd, dev_size, opt.bps, opt.iops, drain_buf);
	if (ret)
		die("draining the throttle: %s", strerror(-ret));
}

/* One timed pass over the file in MB/s; the last read checked from the host side. */
static double pass(const char *what, long long *pipelined)
{
	size_t len = opt.file_mib * MiB, size = opt.size_mib * MiB;
	long long p0 = spin_stat_get(stat_path, "pipelined_chunks");
	char why[256];
	double t = bench_now();

	for (size_t off = 0; off < len; off += size)
		if (pread(file_fd, gmem, size, off) != (ssize_t)size)
			die("%s: pread at %zu: %s", what, off, strerror(errno));
	t = bench_now() - t;
	*pipelined = spin_stat_get(stat_path, "pipelined_chunks") - p0;
	if (spin_gpu_check(gpu_dir, gmem, size, SEED, len - size, why, sizeof(why)))
		bench_fail("%s: last read wrong: %s", what, why);
	return len / t / 1e6;
}

static void measure(const char *name, size_t run)
{
	double mbps[NWAYS][MAX_ROUNDS], ratio[MAX_ROUNDS], med[NWAYS], best, rmin, rmax;
	long long pipelined[NWAYS] = { 0 };

	for (int r = 0; r < opt.rounds; r++) {
		for (int k = 0; k < NWAYS; k++) {
			int w = (r + k) % NWAYS;
			long long p;

			set_way(w);
			prepare(run);
			mbps[w][r] = pass(name, &p);
			pipelined[w] += p;
		}
		ratio[r] = mbps[W_PIPE][r] / mbps[W_SERIAL][r];
		printf("# %s round %d: auto %.1f, pipeline 0 %.1f, p2p %.1f, pagecache %.1f MB/s\n",
		       name, r, mbps[W_PIPE][r], mbps[W_SERIAL][r], mbps[W_P2P][r], mbps[W_PC][r]);
	}
	set_way(W_PIPE);
	for (int w = 0; w < NWAYS; w++)
		med[w] = bench_median(mbps[w], opt.rounds);
	best = med[W_P2P] > med[W_PC] ? med[W_P2P] : med[W_PC];
	rmin = ratio[0];
	rmax = ratio[0];
	for (int r = 1; r < opt.rounds; r++) {
		rmin = ratio[r] < rmin ? ratio[r] : rmin;
		rmax = ratio[r] > rmax ? ratio[r] : rmax;
	}
	printf("| %s | %.1f | %.1f | %.1f | %.1f | %.3f (%.3f..%.3f) | %.3f |\n", name,
	       med[W_PIPE], med[W_SERIAL], med[W_P2P], med[W_PC],
	       bench_median(ratio, opt.rounds), rmin, rmax, med[W_PIPE] / best);
	fprintf(stdout,
		"pb-case name=\"%s\" auto=%.1f serial=%.1f p2p=%.1f pagecache=%.1f ratio=%.4f ratio_min=%.4f ratio_max=%.4f auto_best=%.4f pipelined=%lld pipelined_serial=%lld\n",
		name, med[W_PIPE], med[W_SERIAL], med[W_P2P], med[W_PC],
		bench_median(ratio, opt.rounds), rmin, rmax, med[W_PIPE] / best,
		pipelined[W_PIPE], pipelined[W_SERIAL]);
	if (pipelined[W_SERIAL] != 0)
		bench_fail("%s: pipelined_chunks moved by %lld with pipeline 0", name,
			   pipelined[W_SERIAL]);
	if (pipelined[W_PIPE] == 0)
		bench_fail("%s: pipelined_chunks did not move with pipeline 1", name);
}

int main(void)
{
	size_t len, size;
	char release[128] = "?", cmd[512];
	int heap, buf, ret;

	setvbuf(stdout, NULL, _IOLBF, 0);
	t_start = bench_now();
	opt.rounds = bench_opt_ll("pipe_bench", "rounds", opt.rounds);
	opt.file_mib = bench_opt_ll("pipe_bench", "file_mib", opt.file_mib);
	opt.size_mib = bench_opt_ll("pipe_bench", "size_mib", opt.size_mib);
	opt.bps = bench_opt_ll("pipe_bench", "bps", opt.bps);
	opt.iops = bench_opt_ll("pipe_bench", "iops", opt.iops);
	if (opt.rounds < 1 || opt.rounds > MAX_ROUNDS)
		die("pipe_bench.rounds=%ld: want 1..%d", opt.rounds, MAX_ROUNDS);
	if (opt.size_mib < 16 || opt.size_mib % 16 || opt.file_mib < opt.size_mib ||
	    opt.file_mib % opt.size_mib || opt.file_mib > 512)
		die("pipe_bench.size_mib=%ld, file_mib=%ld: want 16*k, size_mib*j <= 512",
		    opt.size_mib, opt.file_mib);
	len = opt.file_mib * MiB;
	size = opt.size_mib * MiB;
	if (access(SPIN_SYS "/pipeline", F_OK))
		die("%s/pipeline is absent: this kernel has no such knob", SPIN_SYS);
	if (spin_gpu_find(gpu_dir, sizeof(gpu_dir)) ||
	    spin_nvme_blockdev(SPIN_NVME0_SERIAL, dev, sizeof(dev)))
		die("rig devices not found (stand-in GPU, %s)", SPIN_NVME0_SERIAL);
	snprintf(disk, sizeof(disk), "%s", strrchr(dev, '/') + 1);
	snprintf(stat_path, sizeof(stat_path), "/sys/block/%s/spin/stat", disk);
	spin_read_file("/proc/sys/kernel/osrelease", release, sizeof(release));
	gmem = spin_gpu_buffer(gpu_dir, size, &heap, &buf);
	host = spin_alloc_aligned(8 * MiB);
	drain_buf = spin_alloc_aligned(MiB);
	raw_fd = open(dev, O_RDONLY | O_DIRECT);
	if (gmem == MAP_FAILED || !host || !drain_buf || raw_fd < 0 ||
	    ioctl(raw_fd, BLKGETSIZE64, &dev_size))
		die("setting up GPU memory and the disk: %s", strerror(errno));
	snprintf(cmd, sizeof(cmd), "mkdir -p " MNT " && " SPIN_MKFS_EXT4 " %s && mount -t ext4 %s "
		 MNT, dev, dev);
	if (system(cmd))
		die("no ext4 on %s", dev);
	file_fd = open(MNT "/f", O_RDWR | O_CREAT | O_TRUNC, 0644);
	for (size_t off = 0; file_fd >= 0 && off < len; off += 8 * MiB) {
		spin_pattern_fill(host, off, 8 * MiB, SEED);
		if (spin_write_uncached(file_fd, host, 8 * MiB, off))
			die("writing the file: %s", strerror(errno));
	}
	if (file_fd < 0 || fsync(file_fd))
		die("the file: %s", strerror(errno));
	/* The rig's costs, not a Gen4 SSD's: the user tool's fit, applied to the disk. */
	{
		char line[512];
		FILE *f;
		int st;

		ret = bench_drain(raw_fd, dev_size, opt.bps, opt.iops, drain_buf);
		if (ret)
			die("draining the throttle: %s", strerror(-ret));
		f = popen("/usr/bin/spin calibrate " MNT "/f --apply 2>&1", "r");
		if (!f)
			die("spin calibrate: %s", strerror(errno));
		while (fgets(line, sizeof(line), f))
			printf("# spin calibrate: %s", line);
		st = pclose(f);
		if (st == -1 || !WIFEXITED(st) || WEXITSTATUS(st))
			die("spin calibrate --apply failed");
	}
	printf("pb-header kernel=%s rounds=%ld file_mib=%ld size_mib=%ld bps=%lld iops=%lld\n",
	       release, opt.rounds, opt.file_mib, opt.size_mib, opt.bps, opt.iops);
	if (!opt.bps && !opt.iops)
		printf("# warning: the disk is not throttled (pipe_bench.bps/iops unset)\n");

	printf("\n## ext4, %ld MiB reads into GPU memory, %ld MiB file\n\n", opt.size_mib,
	       opt.file_mib);
	fprintf(stdout,
		"| residency | auto MB/s | auto, pipeline 0 | p2p | pagecache | pipeline 1 / 0 (rounds) | auto / best fixed |\n");
	printf("|---|---|---|---|---|---|---|\n");
	measure("8 MiB runs", 8 * MiB);
	measure("1 MiB runs", MiB);
	measure("uncached", 0);
	fprintf(stdout,
		"\nMedians of %ld rounds; pipeline 1 / 0 is the median of the per-round ratios (their range in parentheses)\n",
		opt.rounds);
	close(file_fd);
	if (umount(MNT))
		printf("# umount: %s\n", strerror(errno));
	if (!bench_failures)
		printf("ok %d - every checked byte right, pipelined_chunks as the knob says\n",
		       ++bench_tapn);
	printf("1..%d\n# pipe_bench done in %.0f s\n", bench_tapn, bench_now() - t_start);
	return bench_failures ? 1 : 0;
}
