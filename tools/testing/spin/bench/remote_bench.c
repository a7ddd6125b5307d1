// SPDX-License-Identifier: GPL-2.0
/*
 * remote_bench: buffered reads into GPU memory from an NVMe/TCP namespace,
 * /sys/kernel/spin/mode auto against off.
 *
 * The guest is its own target and host (spin_lib's spin_nvmet): nvmet
 * exports spin-nvme2 over TCP on the loopback device, the host connects,
 * ext4 holds a file of file_mib MiB written by the CPU. A remote queue cannot
 * carry P2PDMA pages, so under auto every read falls back to the page cache
 * (reason queue) after the router's check; off mode passes every read on to
 * the filesystem untouched. The ratio auto / off of the same kernel is what
 * the router's work costs a read from a remote disk (goal >= 0.99). Off mode
 * still pays the read hook's own test and the call into the router, which a
 * kernel without spin does not (make bench-cpu measures that cost against a
 * CONFIG_SPIN=n kernel, for reads into host memory).
 *
 * For each read size, rounds pairs of passes, the two modes in alternating
 * order (ABBA). A cold pass drops the file's pages first and reads the whole
 * file; a cached pass reads it from the page cache (warmed by an untimed
 * pass). The figure per size is the median of the pairs' ratios; every
 * pass's last read is checked from the host side of the GPU memory ("not
 * ok" on a wrong byte), one untimed pass per size checks every read, and the
 * disk's counters show that nothing went by P2P and every auto read fell back
 * for the queue.
 *
 * Options on the kernel command line (vm.py --append): remote_bench.rounds
 * (5), .file_mib (32), .cold (1: the cold passes), .cached (1: the cached
 * passes); at least one of the two.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench_lib.h"
#include "spin_lib.h"

#define KiB (1UL << 10)
#define MiB (1UL << 20)
#define MAX_LEN (8 * MiB)
#define SEED 0x7e70ULL
#define MNT "/mnt/remote_bench"
#define MODE_PATH SPIN_SYS "/mode"
#define MAX_ROUNDS 15

static const size_t sizes[] = { 4 * KiB, 16 * KiB, 64 * KiB, 256 * KiB, MiB, 8 * MiB };
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

static struct {
	long rounds, file_mib, cold, cached;
} opt = { 5, 32, 1, 1 };

static struct spin_nvmet target = {
	.trtype = "tcp", .traddr = "127.0.0.1", .svcid = "4430", .port = 7,
	.nqn = "spin-remote-bench",
};
static char gpu_dir[PATH_MAX], backing[80], stat_path[PATH_MAX];
static uint8_t *gmem, *host;
static double t_start;
static int mounted;

/* Puts back what the bench changed. */
static void cleanup(void)
{
	if (mounted)
		umount(MNT);
	mounted = 0;
	spin_nvmet_disconnect(&target);
	spin_nvmet_target_down(&target);
	spin_write_file(MODE_PATH, "auto");
}

__printf(1, 2) static void die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	bench_vdie("remote_bench", t_start, cleanup, fmt, ap);
	va_end(ap);
}

static void set_mode(const char *m)
{
	if (spin_write_file(MODE_PATH, m))
		die("%s %s: %s", MODE_PATH, m, strerror(errno));
}

/*
 * One pass over the file in @len reads; with @cold, its pages are dropped
 * first. @check: every read checked from the host side, else the last one.
 * MB/s.
 */
static double pass(int fd, size_t len, int cold, int check, const char *what)
{
	size_t file = opt.file_mib * MiB;
	char why[256];
	double t;

	if (cold && posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED))
		die("%s: fadvise: %s", what, strerror(errno));
	t = bench_now();
	for (size_t off = 0; off < file; off += len) {
		if (pread(fd, gmem, len, off) != (ssize_t)len)
			die("%s: pread of %zu at %zu: %s", what, len, off, strerror(errno));
		if (check && spin_gpu_check(gpu_dir, gmem, len, SEED, off, why, sizeof(why))) {
			bench_fail("%s: %zu B at %zu: %s", what, len, off, why);
			return 0;
		}
	}
	t = bench_now() - t;
	if (!check && spin_gpu_check(gpu_dir, gmem, len, SEED, file - len, why, sizeof(why)))
		bench_fail("%s: the last read: %s", what, why);
	return file / t / 1e6;
}

struct cell {
	double ratio, auto_mbps, off_mbps;
};

/* The pairs of passes of one size and residency into @c. */
static void measure(int fd, size_t len, int cold, struct cell *c)
{
	double ratios[MAX_ROUNDS], a[MAX_ROUNDS], p[MAX_ROUNDS];
	char what[96];

	snprintf(what, sizeof(what), "%zu KiB %s", len / KiB, cold ? "cold" : "cached");
	set_mode("auto");
	pass(fd, len, cold, 1, what);
	for (int r = 0; r < opt.rounds; r++) {
		for (int k = 0; k < 2; k++) {
			int is_auto = (k == 0) == (r % 2 == 0);

			set_mode(is_auto ? "auto" : "off");
			if (is_auto)
				a[r] = pass(fd, len, cold, 0, what);
			else
				p[r] = pass(fd, len, cold, 0, what);
		}
		ratios[r] = a[r] / p[r];
		printf("# %s round %d: auto %.1f MB/s, off %.1f MB/s, ratio %.3f\n", what, r,
		       a[r], p[r], ratios[r]);
	}
	c->ratio = bench_median(ratios, opt.rounds);
	c->auto_mbps = bench_median(a, opt.rounds);
	c->off_mbps = bench_median(p, opt.rounds);
	printf("rb-cell size=%zu res=%s auto_mbps=%.1f off_mbps=%.1f ratio=%.3f\n", len,
	       cold ? "cold" : "cached", c->auto_mbps, c->off_mbps, c->ratio);
}

/* nvmet over TCP on spin-nvme2, the host connected, ext4 with the file. */
static int setup(void)
{
	size_t file = opt.file_mib * MiB;
	char why[256], cmd[512];
	int ret, fd;

	ret = spin_nvmet_init();
	if (ret)
		die("nvmet in configfs, the loopback device: %s", strerror(-ret));
	if (spin_nvmet_target_up(&target, backing, why, sizeof(why)) ||
	    spin_nvmet_connect(&target, why, sizeof(why)))
		die("the NVMe/TCP target and host: %s", why);
	snprintf(cmd, sizeof(cmd), "mkdir -p " MNT " && " SPIN_MKFS_EXT4 " /dev/%s && "
		 "mount -t ext4 /dev/%s " MNT, target.disk, target.disk);
	if (system(cmd))
		die("no ext4 on /dev/%s", target.disk);
	mounted = 1;
	snprintf(stat_path, sizeof(stat_path), "/sys/block/%s/spin/stat", target.disk);
	fd = open(MNT "/f", O_RDWR | O_CREAT | O_TRUNC, 0644);
	for (size_t off = 0; fd >= 0 && off < file; off += MAX_LEN) {
		spin_pattern_fill(host, off, MAX_LEN, SEED);
		if (pwrite(fd, host, MAX_LEN, off) != (ssize_t)MAX_LEN)
			die("writing the file: %s", strerror(errno));
	}
	if (fd < 0 || fsync(fd))
		die("the file: %s", strerror(errno));
	return fd;
}

int main(void)
{
	struct cell cold[NSIZES], cached[NSIZES];
	long long p2p0, p2p1, fbq0, fbq1, req0, req1;
	char release[128] = "?";
	double worst = 1e9;
	int heap, buf, fd;

	setvbuf(stdout, NULL, _IOLBF, 0);
	t_start = bench_now();
	opt.rounds = bench_opt_ll("remote_bench", "rounds", opt.rounds);
	opt.file_mib = bench_opt_ll("remote_bench", "file_mib", opt.file_mib);
	opt.cold = bench_opt_ll("remote_bench", "cold", opt.cold);
	opt.cached = bench_opt_ll("remote_bench", "cached", opt.cached);
	if (opt.rounds < 1 || opt.rounds > MAX_ROUNDS || opt.file_mib < 8 || opt.file_mib % 8 ||
	    opt.file_mib > 256 || !(opt.cold || opt.cached))
		die("remote_bench.rounds=%ld (1..%d) / file_mib=%ld (8..256, multiple of 8) / cold=%ld cached=%ld (not both 0) out of range",
		    opt.rounds, MAX_ROUNDS, opt.file_mib, opt.cold, opt.cached);
	if (access(MODE_PATH, F_OK))
		die("%s is absent: this kernel has no spin router", MODE_PATH);
	if (spin_gpu_find(gpu_dir, sizeof(gpu_dir)) ||
	    spin_nvme_blockdev(SPIN_NVME2_SERIAL, backing, sizeof(backing)))
		die("rig devices not found (stand-in GPU, %s)", SPIN_NVME2_SERIAL);
	spin_read_file("/proc/sys/kernel/osrelease", release, sizeof(release));
	gmem = spin_gpu_buffer(gpu_dir, MAX_LEN, &heap, &buf);
	host = spin_alloc_aligned(MAX_LEN);
	if (gmem == MAP_FAILED || !host)
		die("GPU memory and host memory: %s", strerror(errno));
	printf("rb-header kernel=%s rounds=%ld file_mib=%ld cold=%ld cached=%ld\n", release,
	       opt.rounds, opt.file_mib, opt.cold, opt.cached);
	fd = setup();
	printf("# /dev/%s: NVMe/TCP (127.0.0.1:%s) to %s\n", target.disk, target.svcid, backing);

	p2p0 = spin_stat_get(stat_path, "bytes_p2p");
	fbq0 = spin_stat_get(stat_path, "fallback_queue");
	req0 = spin_stat_get(stat_path, "requests");
	for (size_t i = 0; i < NSIZES; i++) {
		if (opt.cold)
			measure(fd, sizes[i], 1, &cold[i]);
		if (opt.cached)
			measure(fd, sizes[i], 0, &cached[i]);
	}
	p2p1 = spin_stat_get(stat_path, "bytes_p2p");
	fbq1 = spin_stat_get(stat_path, "fallback_queue");
	req1 = spin_stat_get(stat_path, "requests");
	set_mode("auto");

	printf("\n## Buffered reads into GPU memory from NVMe/TCP, %ld MiB file, auto / off\n\n",
	       opt.file_mib);
	printf("| read size |%s%s\n", opt.cold ? " cold: auto MB/s | off MB/s | ratio |" : "",
	       opt.cached ? " cached: auto MB/s | off MB/s | ratio |" : "");
	printf("|---|%s%s\n", opt.cold ? "---|---|---|" : "", opt.cached ? "---|---|---|" : "");
	for (size_t i = 0; i < NSIZES; i++) {
		printf("| %zu KiB |", sizes[i] / KiB);
		if (opt.cold) {
			printf(" %.1f | %.1f | %.3f |", cold[i].auto_mbps, cold[i].off_mbps,
			       cold[i].ratio);
			if (cold[i].ratio < worst)
				worst = cold[i].ratio;
		}
		if (opt.cached) {
			printf(" %.1f | %.1f | %.3f |", cached[i].auto_mbps, cached[i].off_mbps,
			       cached[i].ratio);
			if (cached[i].ratio < worst)
				worst = cached[i].ratio;
		}
		printf("\n");
	}
	printf("\nLowest ratio (median of %ld pairs per cell): **%.3f** (goal >= 0.99: %s)\n",
	       opt.rounds, worst, worst >= 0.99 ? "met" : "missed");
	printf("rb-ratio lowest=%.3f\n", worst);
	printf("# routed requests %lld, fallback_queue %lld, bytes_p2p %lld\n", req1 - req0,
	       fbq1 - fbq0, p2p1 - p2p0);
	if (p2p1 != p2p0)
		bench_fail("%lld bytes went by P2P from a remote disk", p2p1 - p2p0);
	if (req1 == req0 || fbq1 - fbq0 != req1 - req0)
		bench_fail("%lld routed requests, %lld fell back for the queue", req1 - req0,
			   fbq1 - fbq0);
	close(fd);
	cleanup();
	if (!bench_failures)
		printf("ok %d - every checked byte right, every routed read fell back for the queue\n",
		       ++bench_tapn);
	printf("1..%d\n# remote_bench done in %.0f s\n", bench_tapn, bench_now() - t_start);
	return bench_failures ? 1 : 0;
}
