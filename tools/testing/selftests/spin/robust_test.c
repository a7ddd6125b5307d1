// SPDX-License-Identifier: GPL-2.0
/*
 * Soundness cases of the router, each with the test that shows it:
 *  1. Offsets near the largest file offset: a sparse xfs file whose end is
 *     within a chunk (8 MiB) of MAX_LFS_FILESIZE, read into and written from
 *     GPU memory near that end. The router computed the chunk end in i64 and
 *     overflowed (a panic under RUST_OVERFLOW_CHECKS).
 *  2. Internal failures never fail a read the page cache would serve: with
 *     fault injection (fail_spin_plan, the debug kernel) the planning of a
 *     routed read fails; the read must return the bytes by page-cache copy
 *     (fallback_internal). Writes are not planned: one goes whole, direct or
 *     through the page cache.
 *  6. Only processes that mapped p2pdma memory are routed (MMF_P2PDMA): a
 *     forked child that inherited a GPU mapping is routed too.
 *  5. Reads and writes through overlayfs are routed once, at the file the
 *     caller opened (overlayfs has no block device: fallback no_bdev), not a
 *     second time when overlayfs calls vfs_iter_read()/vfs_iter_write() on
 *     the file below.
 * Every byte is checked from the host side of the GPU memory or by CPU reads.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/fs.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../kselftest.h"
#include "spin_lib.h"

#define KiB 1024UL
#define MiB (1024 * KiB)
#define GPU_LEN (16 * MiB)
#define GSTAT SPIN_SYS "/stat"

static char gpu[PATH_MAX];
static uint8_t *gmem, *host;
/* ---- 1. the largest file offsets ------------------------------------------- */

static void test_top(void)
{
	const char *path = "/mnt/rb-xfs/top";
	const off_t max = LLONG_MAX;	/* MAX_LFS_FILESIZE, xfs's s_maxbytes */
	const size_t len = 64 * KiB;
	const off_t data = max - (off_t)len;	/* the last 64 KiB, up to the largest offset */
	const size_t src = data % MiB, dst = MiB + (data - 100) % MiB;
	char why[256] = "ok";
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644), ok = 1;
	ssize_t n;

	/*
	 * The file's size is MAX_LFS_FILESIZE before the write, so that the
	 * write does not extend it: a buffered write far beyond the end of an
	 * xfs file zeroes up to it, which warns in iomap_zero_range() (upstream,
	 * whoever writes).
	 */
	if (fd < 0 || ftruncate(fd, max)) {
		ksft_test_result_fail("xfs: a file for the largest offsets: %s\n", strerror(errno));
		if (fd >= 0)
			close(fd);
		return;
	}
	/*
	 * Written from GPU memory (through the page cache: the range is not
	 * aligned) up to the largest offset, then read back into GPU memory from 100 bytes
	 * before the data (a hole) to the end.
	 */
	n = spin_gpu_fill(gpu, gmem + src, len, 7, data) ? -1 : pwrite(fd, gmem + src, len, data);
	if (n != (ssize_t)len) {
		snprintf(why, sizeof(why), "pwrite from GPU memory at %lld: %s", (long long)data,
			 strerror(errno));
		ok = 0;
	}
	if (ok && (lseek(fd, 0, SEEK_END) != max || spin_uncache(fd))) {
		snprintf(why, sizeof(why),
			 "size %lld, want %lld", (long long)lseek(fd, 0, SEEK_END),
			 (long long)max);
		ok = 0;
	}
	/* The file by CPU reads first: did the write land right? */
	if (ok && pread(fd, host, len + 100, data - 100) != (ssize_t)(len + 100)) {
		snprintf(why, sizeof(why), "CPU pread at %lld: %s", (long long)(data - 100),
			 strerror(errno));
		ok = 0;
	}
	if (ok && spin_pattern_check(host + 100, data, len, 7) >= 0) {
		snprintf(why, sizeof(why), "CPU read: the file's byte %lld is wrong",
			 (long long)(data + spin_pattern_check(host + 100, data, len, 7)));
		ok = 0;
	}
	if (ok && spin_uncache(fd))
		ok = 0;
	n = ok ? pread(fd, gmem + dst, len + 100, data - 100) : 0;
	if (ok && n != (ssize_t)(len + 100)) {
		snprintf(why, sizeof(why), "pread into GPU memory at %lld: %zd (%s)",
			 (long long)(data - 100), n, strerror(errno));
		ok = 0;
	}
	if (ok && spin_gpu_check(gpu, gmem + dst + 100, len, 7, data, why, sizeof(why)))
		ok = 0;
	if (ok && (pread(fd, host, 100, data - 100) != 100 || host[0] || host[99])) {
		snprintf(why, sizeof(why), "the hole before the data is not zero");
		ok = 0;
	}
	ksft_test_result(ok,
			 "xfs: a write from and a read into GPU memory ending at MAX_LFS_FILESIZE (%s)\n",
			 why);
	close(fd);
	unlink(path);
}

/* ---- 2. internal failures fall back ------------------------------------------ */

#define FAIL_DIR "/sys/kernel/debug/fail_spin_plan"

/* Let fail_spin_plan fail the next @times plannings (0: off). */
static int fail_plan(int times)
{
	return spin_fault_times(FAIL_DIR, times);
}

static void test_internal(void)
{
	const char *path = "/mnt/rb-xfs/f";
	const size_t len = 4 * MiB;
	long long int0, int1, p0, p1;
	char why[256] = "ok";
	int fd, ok = 1;
	ssize_t n;

	if (access(FAIL_DIR, F_OK)) {
		ksft_test_result_fail("%s is absent: this test needs the debug kernel\n", FAIL_DIR);
		ksft_test_result_fail("internal failure of a write: not run\n");
		return;
	}
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	spin_pattern_fill(host, 0, len, 8);
	if (fd < 0 || pwrite(fd, host, len, 0) != (ssize_t)len || spin_uncache(fd)) {
		ksft_test_result_fail("internal failures: setup: %s\n", strerror(errno));
		ksft_test_result_fail("internal failure of a write: not run\n");
		if (fd >= 0)
			close(fd);
		return;
	}
	/* An uncached read the router would send by P2P: its first planning fails. */
	int0 = spin_stat_get(GSTAT, "fallback_internal");
	p0 = spin_stat_get(GSTAT, "bytes_pagecache");
	if (fail_plan(1)) {
		snprintf(why, sizeof(why), "%s: %s", FAIL_DIR, strerror(errno));
		ok = 0;
	}
	n = ok ? pread(fd, gmem + 3000, len - 5000, 3000) : 0;
	fail_plan(0);
	int1 = spin_stat_get(GSTAT, "fallback_internal");
	p1 = spin_stat_get(GSTAT, "bytes_pagecache");
	if (ok && n != (ssize_t)(len - 5000)) {
		snprintf(why, sizeof(why), "pread: %zd (%s)", n, strerror(errno));
		ok = 0;
	}
	if (ok && spin_gpu_check(gpu, gmem + 3000, len - 5000, 8, 3000, why, sizeof(why)))
		ok = 0;
	/* The failed plan's chunk (8 MiB, so all of it) was copied. */
	if (ok && (int1 - int0 != 1 || p1 - p0 != (long long)(len - 5000))) {
		snprintf(why, sizeof(why), "fallback_internal +%lld, page-cache bytes +%lld",
			 int1 - int0, p1 - p0);
		ok = 0;
	}
	ksft_test_result(ok,
			 "a routed read whose planning fails returns the bytes by page-cache copy, counted in fallback_internal (%s)\n",
			 why);

	close(fd);
	unlink(path);
}

/* ---- 6. the per-mm gate: a forked child is routed too ------------------------ */

static void test_fork(void)
{
	const char *path = "/mnt/rb-ext4/fork";
	const size_t len = 4 * MiB;
	long long p0, p1;
	char why[256] = "ok";
	int fd, status = -1, ok = 1;
	pid_t child;

	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	spin_pattern_fill(host, 0, len, 12);
	if (fd < 0 || pwrite(fd, host, len, 0) != (ssize_t)len || spin_uncache(fd)) {
		ksft_test_result_fail("fork: setup: %s\n", strerror(errno));
		if (fd >= 0)
			close(fd);
		return;
	}
	/*
	 * Only processes that mapped p2pdma memory are looked at (MMF_P2PDMA):
	 * a child inherits the mapping, and must inherit the mark with it.
	 */
	p0 = spin_stat_get(GSTAT, "bytes_p2p");
	child = fork();
	if (child == 0)
		_exit(pread(fd, gmem, len, 0) == (ssize_t)len ? 0 : 1);
	waitpid(child, &status, 0);
	p1 = spin_stat_get(GSTAT, "bytes_p2p");
	if (!WIFEXITED(status) || WEXITSTATUS(status)) {
		snprintf(why, sizeof(why), "the child's pread failed");
		ok = 0;
	}
	if (ok && spin_gpu_check(gpu, gmem, len, 12, 0, why, sizeof(why)))
		ok = 0;
	if (ok && p1 - p0 <= 0) {
		snprintf(why, sizeof(why), "no P2P bytes: the child's read was not routed");
		ok = 0;
	}
	ksft_test_result(ok,
			 "a forked child's read into its inherited GPU mapping is routed (%lld P2P bytes; %s)\n",
			 p1 - p0, why);
	close(fd);
	unlink(path);
}

/* ---- 5. overlayfs: routed once ------------------------------------------------ */

static void test_overlay(void)
{
	const char *lower = "/mnt/rb-ext4/lower", *upper = "/mnt/rb-ext4/upper",
		   *work = "/mnt/rb-ext4/work", *merged = "/mnt/rb-ovl";
	char opts[256], why[256] = "ok", path[PATH_MAX];
	long long r0, r1, w0, w1, nb0, nb1;
	const size_t len = MiB;
	int fd, ok = 1;

	mkdir(lower, 0755);
	mkdir(upper, 0755);
	mkdir(work, 0755);
	snprintf(opts, sizeof(opts), "lowerdir=%s,upperdir=%s,workdir=%s", lower, upper, work);
	if (spin_mount("overlay", merged, "overlay", 0, opts)) {
		ksft_test_result_fail("overlayfs: mount: %s\n", strerror(errno));
		return;
	}
	snprintf(path, sizeof(path), "%s/f", merged);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	spin_pattern_fill(host, 0, len, 10);
	if (fd < 0 || pwrite(fd, host, len, 0) != (ssize_t)len || spin_uncache(fd)) {
		ksft_test_result_fail("overlayfs: setup: %s\n", strerror(errno));
		goto out;
	}
	r0 = spin_stat_get(GSTAT, "requests");
	nb0 = spin_stat_get(GSTAT, "fallback_no_bdev");
	w0 = spin_stat_get(GSTAT, "write_requests");
	if (pread(fd, gmem, len, 0) != (ssize_t)len ||
	    spin_gpu_check(gpu, gmem, len, 10, 0, why, sizeof(why))) {
		if (!strcmp(why, "ok"))
			snprintf(why, sizeof(why), "pread: %s", strerror(errno));
		ok = 0;
	}
	if (ok && (spin_gpu_fill(gpu, gmem, len, 11, 0) ||
		   pwrite(fd, gmem, len, 0) != (ssize_t)len)) {
		snprintf(why, sizeof(why), "pwrite: %s", strerror(errno));
		ok = 0;
	}
	r1 = spin_stat_get(GSTAT, "requests");
	nb1 = spin_stat_get(GSTAT, "fallback_no_bdev");
	w1 = spin_stat_get(GSTAT, "write_requests");
	if (ok && (r1 - r0 != 1 || nb1 - nb0 != 1 || w1 - w0 != 1)) {
		snprintf(why, sizeof(why),
			 "read requests +%lld (no_bdev +%lld), write requests +%lld; want +1 each",
			 r1 - r0, nb1 - nb0, w1 - w0);
		ok = 0;
	}
	if (ok && (spin_uncache(fd) || pread(fd, host, len, 0) != (ssize_t)len ||
		   spin_pattern_check(host, 0, len, 11) >= 0)) {
		snprintf(why, sizeof(why), "the file does not hold the written bytes");
		ok = 0;
	}
	ksft_test_result(ok,
			 "overlayfs over ext4: a read and a write with GPU memory are routed once, at the overlay file (%s)\n",
			 why);
out:
	if (fd >= 0)
		close(fd);
	if (spin_umount(merged))
		ksft_print_msg("umount %s: %s\n", merged, strerror(errno));
}

int main(void)
{
	struct spin_fs xfs = SPIN_FS_XFS("/mnt/rb-xfs", 0);
	struct spin_fs ext4 = SPIN_FS_EXT4("/mnt/rb-ext4", 0);
	int heap, buf;

	ksft_print_header();
	ksft_set_plan(4);
	signal(SIGXFSZ, SIG_IGN);
	SPIN_GPU_SETUP_OR_EXIT(gpu, GPU_LEN, &gmem, &heap, &buf, 8 * MiB, &host);

	SPIN_FS_SETUP_OR_EXIT(&xfs, 0);
	test_top();
	test_internal();
	if (spin_fs_unmount(&xfs))
		ksft_print_msg("umount %s: %s\n", xfs.dir, strerror(errno));

	SPIN_FS_SETUP_OR_EXIT(&ext4, 0);
	test_fork();
	test_overlay();
	if (spin_fs_unmount(&ext4))
		ksft_print_msg("umount %s: %s\n", ext4.dir, strerror(errno));

	munmap(gmem, GPU_LEN);
	close(buf);
	close(heap);
	ksft_finished();
}
