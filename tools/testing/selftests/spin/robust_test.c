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
 * Each test makes its filesystem afresh (xfs on spin-nvme1, ext4 on
 * spin-nvme0) and takes its own GPU buffer.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../kselftest_harness.h"
#include "spin_lib.h"

#define KiB 1024UL
#define MiB (1024 * KiB)
#define GPU_LEN (16 * MiB)
#define HOST_LEN (8 * MiB)
#define GSTAT SPIN_SYS "/stat"
#define OVL "/mnt/rb-ovl"
/* The harness's default of 30 s is too short for the rig's throttled disks under TCG. */
#define TIMEOUT 600

static struct spin_fs xfs_fs = SPIN_FS_XFS("/mnt/rb-xfs", 0);
static struct spin_fs ext4_fs = SPIN_FS_EXT4("/mnt/rb-ext4", 0);

static char gpu[PATH_MAX];

/* A test's GPU buffer and host memory, its filesystem, and the file it uses. */
struct rig {
	uint8_t *gmem;	/* GPU_LEN bytes of GPU memory */
	uint8_t *host;	/* HOST_LEN bytes */
	int heap, buf;
	struct spin_fs *fs;	/* once made and mounted, else NULL */
	const char *over;	/* a mount on top of the filesystem, or NULL */
	int fd;		/* the test's file, or -1 */
	char path[PATH_MAX];
};

FIXTURE(robust) {
	struct rig r;
};

/* The GPU buffer, host memory and mode auto (spin_gpu_setup()). */
FIXTURE_SETUP(robust)
{
	struct rig *r = &self->r;
	int ret;

	r->fd = -1;
	signal(SIGXFSZ, SIG_IGN);
	ret = spin_gpu_setup(gpu, GPU_LEN, &r->gmem, &r->heap, &r->buf, HOST_LEN,
			     &r->host) ? errno : 0;
	if (ret == ENODEV)
		SKIP(return, "not on the spin rig: stand-in GPU not found");
	ASSERT_EQ(0, ret)
		TH_LOG("GPU set-up (4 KiB pages, memory, mode auto): %s", strerror(ret));
}

/*
 * The file closed and removed, the filesystem unmounted, the buffers freed.
 * The harness tears down only a set-up that completed.
 */
FIXTURE_TEARDOWN(robust)
{
	struct rig *r = &self->r;

	if (r->fd >= 0) {
		close(r->fd);
		unlink(r->path);
	}
	if (r->over && spin_umount(r->over))
		TH_LOG("umount %s: %s", r->over, strerror(errno));
	if (r->fs && spin_fs_unmount(r->fs))
		TH_LOG("umount %s: %s", r->fs->dir, strerror(errno));
	munmap(r->gmem, GPU_LEN);
	close(r->buf);
	close(r->heap);
	free(r->host);
}

/* @fs made and mounted afresh: 0, or -1 when the rig has no such disk (the test skips). */
static int rig_fs(struct __test_metadata *_metadata, struct rig *r, struct spin_fs *fs)
{
	int ret = spin_fs_setup(fs, 0) ? errno : 0;

	if (ret == ENODEV)
		return -1;
	ASSERT_EQ(0, ret)
		TH_LOG("%s on %s (%s): %s", fs->type, fs->dev, fs->serial, strerror(ret));
	r->fs = fs;
	return 0;
}

/*
 * The test's file <@dir>/<@name>: @len bytes of the pattern of @seed, written
 * and out of the page cache.
 */
static void pattern_file(struct __test_metadata *_metadata, struct rig *r, const char *dir,
			 const char *name, size_t len, uint64_t seed)
{
	snprintf(r->path, sizeof(r->path), "%s/%s", dir, name);
	r->fd = open(r->path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	ASSERT_LE(0, r->fd) TH_LOG("setup: %s: %s", r->path, strerror(errno));
	spin_pattern_fill(r->host, 0, len, seed);
	ASSERT_EQ((ssize_t)len, pwrite(r->fd, r->host, len, 0))
		TH_LOG("setup: writing %s: %s", r->path, strerror(errno));
	ASSERT_EQ(0, spin_uncache(r->fd))
		TH_LOG("setup: dropping the pages of %s: %s", r->path, strerror(errno));
}

/* ---- 1. the largest file offsets ------------------------------------------- */

/*
 * xfs: a write from and a read into GPU memory ending at MAX_LFS_FILESIZE:
 * the file's size stays, the bytes are right by CPU reads and in GPU memory,
 * and the hole before them reads as zeroes.
 */
TEST_F_TIMEOUT(robust, xfs_largest_offsets, TIMEOUT)
{
	struct rig *r = &self->r;
	const off_t max = LLONG_MAX;	/* MAX_LFS_FILESIZE, xfs's s_maxbytes */
	const size_t len = 64 * KiB;
	const off_t data = max - (off_t)len;	/* the last 64 KiB, up to the largest offset */
	const size_t src = data % MiB, dst = MiB + (data - 100) % MiB;
	char why[256];
	off_t size;
	ssize_t n, bad;

	if (rig_fs(_metadata, r, &xfs_fs))
		SKIP(return, "not on the spin rig: no block device with serial %s",
		     xfs_fs.serial);
	/*
	 * The file's size is MAX_LFS_FILESIZE before the write, so that the
	 * write does not extend it: a buffered write far beyond the end of an
	 * xfs file zeroes up to it, which warns in iomap_zero_range() (upstream,
	 * whoever writes).
	 */
	snprintf(r->path, sizeof(r->path), "%s/top", r->fs->dir);
	r->fd = open(r->path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	ASSERT_LE(0, r->fd)
		TH_LOG("xfs: a file for the largest offsets: %s", strerror(errno));
	ASSERT_EQ(0, ftruncate(r->fd, max))
		TH_LOG("xfs: a file for the largest offsets: %s", strerror(errno));
	/*
	 * Written from GPU memory (through the page cache: the range is not
	 * aligned) up to the largest offset, then read back into GPU memory from 100 bytes
	 * before the data (a hole) to the end.
	 */
	ASSERT_EQ(0, spin_gpu_fill(gpu, r->gmem + src, len, 7, data))
		TH_LOG("the host could not write GPU memory");
	n = pwrite(r->fd, r->gmem + src, len, data);
	ASSERT_EQ((ssize_t)len, n)
		TH_LOG("pwrite from GPU memory at %lld: %zd (%s)", (long long)data, n,
		       strerror(errno));
	size = lseek(r->fd, 0, SEEK_END);
	EXPECT_EQ(max, size) TH_LOG("size %lld, want %lld", (long long)size, (long long)max);
	ASSERT_EQ(0, spin_uncache(r->fd))
		TH_LOG("dropping the file's pages: %s", strerror(errno));
	/* The file by CPU reads first: did the write land right? */
	ASSERT_EQ((ssize_t)(len + 100), pread(r->fd, r->host, len + 100, data - 100))
		TH_LOG("CPU pread at %lld: %s", (long long)(data - 100), strerror(errno));
	bad = spin_pattern_check(r->host + 100, data, len, 7);
	EXPECT_GT(0, bad)
		TH_LOG("CPU read: the file's byte %lld is wrong", (long long)(data + bad));
	ASSERT_EQ(0, spin_uncache(r->fd))
		TH_LOG("dropping the file's pages: %s", strerror(errno));
	n = pread(r->fd, r->gmem + dst, len + 100, data - 100);
	ASSERT_EQ((ssize_t)(len + 100), n)
		TH_LOG("pread into GPU memory at %lld: %zd (%s)", (long long)(data - 100), n,
		       strerror(errno));
	EXPECT_EQ(0, spin_gpu_check(gpu, r->gmem + dst + 100, len, 7, data, why, sizeof(why)))
		TH_LOG("pread into GPU memory: %s", why);
	ASSERT_EQ(100, pread(r->fd, r->host, 100, data - 100))
		TH_LOG("CPU pread of the hole at %lld: %s", (long long)(data - 100),
		       strerror(errno));
	EXPECT_EQ(0, r->host[0])
		TH_LOG("the hole before the data is not zero: its first byte is %#x", r->host[0]);
	EXPECT_EQ(0, r->host[99])
		TH_LOG("the hole before the data is not zero: its last byte is %#x", r->host[99]);
}

/* ---- 2. internal failures fall back ------------------------------------------ */

#define FAIL_DIR "/sys/kernel/debug/fail_spin_plan"

/* Let fail_spin_plan fail the next @times plannings (0: off). */
static int fail_plan(int times)
{
	return spin_fault_times(FAIL_DIR, times);
}

/*
 * A routed read whose planning fails returns the bytes by page-cache copy,
 * counted in fallback_internal.
 */
TEST_F_TIMEOUT(robust, xfs_planning_failure_falls_back, TIMEOUT)
{
	struct rig *r = &self->r;
	const size_t len = 4 * MiB;
	long long int0, int1, p0, p1;
	char why[256];
	int ret, e;
	ssize_t n;

	if (rig_fs(_metadata, r, &xfs_fs))
		SKIP(return, "not on the spin rig: no block device with serial %s",
		     xfs_fs.serial);
	ASSERT_EQ(0, access(FAIL_DIR, F_OK))
		TH_LOG("%s is absent: this test needs the debug kernel", FAIL_DIR);
	pattern_file(_metadata, r, r->fs->dir, "f", len, 8);
	/* An uncached read the router would send by P2P: its first planning fails. */
	int0 = spin_stat_get(GSTAT, "fallback_internal");
	p0 = spin_stat_get(GSTAT, "bytes_pagecache");
	ret = fail_plan(1);
	e = errno;
	n = ret ? 0 : pread(r->fd, r->gmem + 3000, len - 5000, 3000);
	if (!ret)
		e = errno;
	fail_plan(0);
	int1 = spin_stat_get(GSTAT, "fallback_internal");
	p1 = spin_stat_get(GSTAT, "bytes_pagecache");
	ASSERT_EQ(0, ret) TH_LOG("%s: %s", FAIL_DIR, strerror(e));
	ASSERT_EQ((ssize_t)(len - 5000), n) TH_LOG("pread: %zd (%s)", n, strerror(e));
	EXPECT_EQ(0, spin_gpu_check(gpu, r->gmem + 3000, len - 5000, 8, 3000, why, sizeof(why)))
		TH_LOG("pread into GPU memory: %s", why);
	/* The failed plan's chunk (8 MiB, so all of it) was copied. */
	EXPECT_EQ(1, int1 - int0) TH_LOG("fallback_internal +%lld, want +1", int1 - int0);
	EXPECT_EQ((long long)(len - 5000), p1 - p0)
		TH_LOG("page-cache bytes +%lld, want +%zu", p1 - p0, len - 5000);
}

/* ---- 6. the per-mm gate: a forked child is routed too ------------------------ */

/* A forked child's read into its inherited GPU mapping is routed. */
TEST_F_TIMEOUT(robust, ext4_forked_child_routed, TIMEOUT)
{
	struct rig *r = &self->r;
	const size_t len = 4 * MiB;
	long long p0, p1;
	int status = -1;
	char why[256];
	pid_t child;

	if (rig_fs(_metadata, r, &ext4_fs))
		SKIP(return, "not on the spin rig: no block device with serial %s",
		     ext4_fs.serial);
	pattern_file(_metadata, r, r->fs->dir, "fork", len, 12);
	/*
	 * Only processes that mapped p2pdma memory are looked at (MMF_P2PDMA):
	 * a child inherits the mapping, and must inherit the mark with it.
	 */
	p0 = spin_stat_get(GSTAT, "bytes_p2p");
	child = fork();
	ASSERT_LE(0, child) TH_LOG("fork: %s", strerror(errno));
	if (child == 0)
		_exit(pread(r->fd, r->gmem, len, 0) == (ssize_t)len ? 0 : 1);
	waitpid(child, &status, 0);
	p1 = spin_stat_get(GSTAT, "bytes_p2p");
	ASSERT_TRUE(WIFEXITED(status)) TH_LOG("the child did not exit: status %#x", status);
	ASSERT_EQ(0, WEXITSTATUS(status)) TH_LOG("the child's pread failed");
	EXPECT_EQ(0, spin_gpu_check(gpu, r->gmem, len, 12, 0, why, sizeof(why)))
		TH_LOG("the child's read into GPU memory: %s", why);
	EXPECT_LT(0, p1 - p0) TH_LOG("no P2P bytes: the child's read was not routed");
	TH_LOG("%lld P2P bytes", p1 - p0);
}

/* ---- 5. overlayfs: routed once ------------------------------------------------ */

/*
 * overlayfs over ext4: a read and a write with GPU memory are routed once,
 * at the overlay file.
 */
TEST_F_TIMEOUT(robust, ext4_overlayfs_routed_once, TIMEOUT)
{
	const char *lower = "/mnt/rb-ext4/lower", *upper = "/mnt/rb-ext4/upper",
		   *work = "/mnt/rb-ext4/work";
	struct rig *r = &self->r;
	char opts[256], why[256];
	long long r0, r1, w0, w1, nb0, nb1;
	const size_t len = MiB;

	if (rig_fs(_metadata, r, &ext4_fs))
		SKIP(return, "not on the spin rig: no block device with serial %s",
		     ext4_fs.serial);
	mkdir(lower, 0755);
	mkdir(upper, 0755);
	mkdir(work, 0755);
	snprintf(opts, sizeof(opts), "lowerdir=%s,upperdir=%s,workdir=%s", lower, upper, work);
	ASSERT_EQ(0, spin_mount("overlay", OVL, "overlay", 0, opts))
		TH_LOG("overlayfs: mount: %s", strerror(errno));
	r->over = OVL;
	pattern_file(_metadata, r, OVL, "f", len, 10);
	r0 = spin_stat_get(GSTAT, "requests");
	nb0 = spin_stat_get(GSTAT, "fallback_no_bdev");
	w0 = spin_stat_get(GSTAT, "write_requests");
	ASSERT_EQ((ssize_t)len, pread(r->fd, r->gmem, len, 0)) TH_LOG("pread: %s", strerror(errno));
	EXPECT_EQ(0, spin_gpu_check(gpu, r->gmem, len, 10, 0, why, sizeof(why)))
		TH_LOG("pread into GPU memory: %s", why);
	ASSERT_EQ(0, spin_gpu_fill(gpu, r->gmem, len, 11, 0))
		TH_LOG("the host could not write GPU memory");
	ASSERT_EQ((ssize_t)len, pwrite(r->fd, r->gmem, len, 0))
		TH_LOG("pwrite: %s", strerror(errno));
	r1 = spin_stat_get(GSTAT, "requests");
	nb1 = spin_stat_get(GSTAT, "fallback_no_bdev");
	w1 = spin_stat_get(GSTAT, "write_requests");
	EXPECT_EQ(1, r1 - r0) TH_LOG("read requests +%lld, want +1", r1 - r0);
	EXPECT_EQ(1, nb1 - nb0) TH_LOG("fallback_no_bdev +%lld, want +1", nb1 - nb0);
	EXPECT_EQ(1, w1 - w0) TH_LOG("write requests +%lld, want +1", w1 - w0);
	ASSERT_EQ(0, spin_uncache(r->fd)) TH_LOG("dropping the file's pages: %s", strerror(errno));
	ASSERT_EQ((ssize_t)len, pread(r->fd, r->host, len, 0))
		TH_LOG("CPU pread: %s", strerror(errno));
	EXPECT_GT(0, spin_pattern_check(r->host, 0, len, 11))
		TH_LOG("the file does not hold the written bytes");
}

TEST_HARNESS_MAIN
