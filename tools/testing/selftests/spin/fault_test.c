// SPDX-License-Identifier: GPL-2.0
/*
 * I/O errors under routed reads: fail_make_request fails a share
 * of the bios of the NVMe disk while buffered reads into GPU memory run in
 * auto and p2p mode, on ext4 (spin-nvme0) and xfs (spin-nvme1), a variant
 * each, made afresh for each test; the reads run with the filesystem mounted
 * read-only and noatime, so that only data reads meet the faults.
 *
 * Every read must return all its bytes, right, or a short count whose bytes
 * are right, or fail with EIO, and the faults must show as one or the other;
 * a P2P leg that fails is redone through the page
 * cache (counted in fallback_io_error), so faults must show up there; once the
 * faults stop, the whole file reads back right; the GPU provider's pool
 * returns to its starting size when the buffer is freed at the end of each
 * test (no page stays pinned). The debug kernel's log check catches oopses
 * and KASAN/lockdep reports on the error paths.
 *
 * A writeback error behind a P2P leg (p2p mode writes dirty pages back
 * before the device reads them) must stay visible: the read is served from
 * the page cache, as a plain buffered read would be, and the next fsync()
 * reports EIO.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <unistd.h>

#include "../kselftest_harness.h"
#include "spin_lib.h"

#define KiB 1024UL
#define MiB (1024 * KiB)
#define PG 4096UL
#define FILE_LEN (16 * MiB)
#define GPU_LEN (16 * MiB)
#define READS 150
#define FAIL_DIR "/sys/kernel/debug/fail_make_request"
/* The harness's default of 30 s is too short for the rig's throttled disks under TCG. */
#define TIMEOUT 600

static struct spin_fs all[] = {
	SPIN_FS_EXT4("/mnt/fault-ext4", 71),
	SPIN_FS_XFS("/mnt/fault-xfs", 72),
};

static char gpu[PATH_MAX];
static char fail_disk[PATH_MAX];

static long long p2pmem_available(void)
{
	char path[PATH_MAX + 32];

	snprintf(path, sizeof(path), "%s/p2pmem/available", gpu);
	return spin_read_ll(path);
}

/*
 * Faults on (a share of 1 in @every bios of the disk fails) or off (@every 0);
 * what it changes is given back at exit (spin_sysfs_set()).
 */
static int faults(int every)
{
	char v[16];

	if (!every)
		return spin_sysfs_set(fail_disk, "0") |
		       spin_sysfs_set(FAIL_DIR "/probability", "0");
	snprintf(v, sizeof(v), "%d", 100 / every);
	return spin_sysfs_set(FAIL_DIR "/verbose", "0") |
	       spin_sysfs_set(FAIL_DIR "/interval", "1") |
	       spin_sysfs_set(FAIL_DIR "/times", "-1") |
	       spin_sysfs_set(FAIL_DIR "/space", "0") |
	       spin_sysfs_set(FAIL_DIR "/probability", v) |
	       spin_sysfs_set(fail_disk, "1");
}

static unsigned long long rng_state = 0x9e3779b97f4a7c15ULL;

static unsigned long long rng(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

/* A test's filesystem, mounted noatime with its data file, and its GPU buffer. */
struct rig {
	struct spin_fs *fs;
	bool mounted;
	char *host;	/* FILE_LEN bytes */
	long long avail0;	/* the provider's pool before the buffer */
	int heap, buf;
	char *gmem;	/* GPU_LEN bytes of GPU memory, or MAP_FAILED */
};

FIXTURE(fault) {
	struct rig r;
};

FIXTURE_VARIANT(fault) {
	int fs;
};

FIXTURE_VARIANT_ADD(fault, ext4) { .fs = 0 };
FIXTURE_VARIANT_ADD(fault, xfs) { .fs = 1 };

FIXTURE_SETUP(fault)
{
	struct rig *r = &self->r;
	int fd, ret;

	r->heap = -1;
	r->buf = -1;
	r->gmem = MAP_FAILED;
	ASSERT_EQ(0, access(FAIL_DIR, F_OK))
		TH_LOG("%s is missing: a kernel without FAIL_MAKE_REQUEST", FAIL_DIR);
	if (spin_gpu_find(gpu, sizeof(gpu)))
		SKIP(return, "not on the spin rig: stand-in GPU not found");
	r->fs = &all[variant->fs];
	ret = spin_fs_setup(r->fs, MS_NOATIME) ? errno : 0;
	if (ret == ENODEV)
		SKIP(return, "not on the spin rig: no disk %s", r->fs->serial);
	ASSERT_EQ(0, ret)
		TH_LOG("%s on %s (%s): %s", r->fs->type, r->fs->dev, r->fs->serial, strerror(ret));
	r->mounted = true;
	snprintf(fail_disk, sizeof(fail_disk), "/sys/block/%s/make-it-fail", r->fs->disk);

	r->host = spin_alloc_aligned(FILE_LEN);
	ASSERT_NE(NULL, r->host);
	r->avail0 = p2pmem_available();
	ASSERT_LE(0, r->avail0) TH_LOG("%s: no p2pmem/available", gpu);
	r->gmem = spin_gpu_buffer(gpu, GPU_LEN, &r->heap, &r->buf);
	ASSERT_NE(MAP_FAILED, r->gmem) TH_LOG("no GPU memory from the heap: %s", strerror(errno));

	fd = open(r->fs->path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	spin_pattern_fill(r->host, 0, FILE_LEN, r->fs->seed);
	ASSERT_LE(0, fd) TH_LOG("%s: data file: %s", r->fs->name, strerror(errno));
	ASSERT_EQ(0, spin_write_uncached(fd, r->host, FILE_LEN, 0))
		TH_LOG("%s: data file: %s", r->fs->name, strerror(errno));
	close(fd);
}

/* Faults off, the filesystem unmounted, the GPU buffer freed. */
static void release(struct __test_metadata *_metadata, struct rig *r)
{
	faults(0);
	if (r->mounted && spin_fs_unmount(r->fs))
		TH_LOG("umount %s: %s", r->fs->dir, strerror(errno));
	r->mounted = false;
	if (r->gmem != MAP_FAILED)
		munmap(r->gmem, GPU_LEN);
	r->gmem = MAP_FAILED;
	if (r->buf >= 0)
		close(r->buf);
	r->buf = -1;
	if (r->heap >= 0)
		close(r->heap);
	r->heap = -1;
}

FIXTURE_TEARDOWN(fault)
{
	release(_metadata, &self->r);
	free(self->r.host);
}

/*
 * Faults off, the filesystem unmounted and the GPU buffer freed: the
 * provider's pool must be back to its size (no page stays pinned).
 */
static void expect_pool_back(struct __test_metadata *_metadata, struct rig *r)
{
	long long avail;

	release(_metadata, r);
	avail = p2pmem_available();
	EXPECT_EQ(r->avail0, avail)
		TH_LOG("the GPU provider's pool is %lld of %lld bytes once the buffer is freed",
		       avail, r->avail0);
}

/* Reads under faults in @mode; returns the number of reads that broke the rules. */
static int faulty_reads(struct __test_metadata *_metadata, struct rig *r, const char *mode,
			int *eio, int *shorts)
{
	struct spin_fs *fs = r->fs;
	char path[PATH_MAX], why[256];
	int bad = 0, fd;

	snprintf(path, sizeof(path), "%s/data", fs->dir);
	fd = open(path, O_RDONLY);
	ASSERT_LE(0, fd) TH_LOG("%s: %s", path, strerror(errno));
	ASSERT_EQ(0, spin_sysfs_set(SPIN_SYS "/mode", mode)) TH_LOG("mode %s", mode);
	posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
	faults(5);
	for (int i = 0; i < READS; i++) {
		/* Small sequential runs, and large reads at random places. */
		size_t len = i % 3 ? 4 * KiB << (rng() % 3) : (rng() % 2048 + 1) * PG - rng() % 512;
		off_t pos = i % 3 ? (off_t)((i / 3) % 256) * 64 * KiB : (off_t)(rng() % 2048) * PG;
		ssize_t n;

		if (pos + len > FILE_LEN)
			len = FILE_LEN - pos;
		n = pread(fd, r->gmem, len, pos);
		if (n < 0 && errno == EIO) {
			(*eio)++;
		} else if (n < 0 || n > (ssize_t)len) {
			TH_LOG("%s %s: read %zu at %lld: %zd (%s)", fs->name, mode, len,
			       (long long)pos, n, strerror(errno));
			bad++;
		} else {
			*shorts += n < (ssize_t)len;
			if (n && spin_gpu_check(gpu, r->gmem, n, fs->seed, pos, why, sizeof(why))) {
				TH_LOG("%s %s: read %zu at %lld: %zd bytes, wrong: %s", fs->name,
				       mode, len, (long long)pos, n, why);
				bad++;
			}
		}
		if (i % 16 == 15)
			posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
	}
	faults(0);
	close(fd);
	return bad;
}

/*
 * A P2P leg over dirty pages whose writeback fails: the read returns the
 * page cache's (newer) bytes and fsync() reports the error once.
 */
TEST_F_TIMEOUT(fault, writeback_error_stays_visible, TIMEOUT)
{
	const size_t len = 16 * KiB;
	struct rig *r = &self->r;
	struct spin_fs *fs = r->fs;
	long long ioerr0 = spin_stat_get(fs->stat, "fallback_io_error"), ioerr1;
	char path[PATH_MAX], why[256] = "";
	int fd, r1, r2, e1, e2;
	ssize_t n;

	snprintf(path, sizeof(path), "%s/wb", fs->dir);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	ASSERT_LE(0, fd) TH_LOG("%s: %s", path, strerror(errno));
	spin_pattern_fill(r->host, 0, len, fs->seed + 1000);
	ASSERT_EQ((ssize_t)len, pwrite(fd, r->host, len, 0))
		TH_LOG("%s: %s", path, strerror(errno));
	ASSERT_EQ(0, fsync(fd)) TH_LOG("%s: %s", path, strerror(errno));
	spin_pattern_fill(r->host, 0, len, fs->seed + 2000);
	/* Nothing else dirty: the one failing bio is the writeback of these pages. */
	ASSERT_EQ(0, syncfs(fd)) TH_LOG("%s: %s", path, strerror(errno));
	ASSERT_EQ((ssize_t)len, pwrite(fd, r->host, len, 0))
		TH_LOG("%s: %s", path, strerror(errno));
	ASSERT_EQ(0, spin_sysfs_set(SPIN_SYS "/mode", "p2p")) TH_LOG("mode p2p");
	/* Exactly one bio fails: the writeback of the four dirty pages. */
	spin_sysfs_set(FAIL_DIR "/verbose", "0");
	spin_sysfs_set(FAIL_DIR "/interval", "1");
	spin_sysfs_set(FAIL_DIR "/space", "0");
	spin_sysfs_set(FAIL_DIR "/times", "1");
	spin_sysfs_set(FAIL_DIR "/probability", "100");
	spin_sysfs_set(fail_disk, "1");
	n = pread(fd, r->gmem, len, 0);
	faults(0);
	spin_sysfs_set(SPIN_SYS "/mode", "auto");
	ioerr1 = spin_stat_get(fs->stat, "fallback_io_error");
	EXPECT_EQ((ssize_t)len, n) TH_LOG("the read: %zd bytes of %zu", n, len);
	if (n == (ssize_t)len) {
		EXPECT_EQ(0, spin_gpu_check(gpu, r->gmem, len, fs->seed + 2000, 0, why,
					    sizeof(why)))
			TH_LOG("not the written bytes of the page cache: %s", why);
	}
	EXPECT_EQ(ioerr0 + 1, ioerr1) TH_LOG("fallback_io_error +%lld", ioerr1 - ioerr0);

	r1 = fsync(fd);
	e1 = errno;
	r2 = fsync(fd);
	e2 = errno;
	EXPECT_EQ(-EIO, r1 ? -e1 : 0)
		TH_LOG("the first fsync: %s, want EIO", r1 ? strerror(e1) : "succeeded");
	EXPECT_EQ(0, r2) TH_LOG("the second fsync: %s, want success", strerror(e2));
	close(fd);
	expect_pool_back(_metadata, r);
}

/*
 * Buffered reads into GPU memory while 1 in 5 bios of the disk fails, in
 * auto and in p2p mode: each read right, short with right bytes, or EIO,
 * and the faults show; the failed P2P legs are counted as redone through the
 * page cache; with the faults off, the whole file reads back right.
 */
TEST_F_TIMEOUT(fault, reads_under_faults, TIMEOUT)
{
	static const char *const modes[] = { "auto", "p2p" };
	struct rig *r = &self->r;
	struct spin_fs *fs = r->fs;
	long long ioerr0 = spin_stat_get(fs->stat, "fallback_io_error"), ioerr1;
	char path[PATH_MAX], why[256];
	ssize_t n;
	int fd;

	/*
	 * Read-only, so that no metadata or log write meets a fault: XFS shuts
	 * down on a failed log write, and its log worker writes to an idle log.
	 */
	ASSERT_EQ(0, mount(NULL, fs->dir, NULL, MS_REMOUNT | MS_RDONLY | MS_NOATIME, NULL))
		TH_LOG("remounting %s read-only: %s", fs->dir, strerror(errno));
	for (size_t m = 0; m < ARRAY_SIZE(modes); m++) {
		int eio = 0, shorts = 0;
		int bad = faulty_reads(_metadata, r, modes[m], &eio, &shorts);

		TH_LOG("%s, %s mode, 1 in 5 bios failing: %d reads, %d EIO, %d short, %d wrong",
		       fs->name, modes[m], READS, eio, shorts, bad);
		EXPECT_EQ(0, bad) TH_LOG("%s mode: %d reads broke the rules", modes[m], bad);
		/* The faults must show: as EIO, or as short counts of right bytes. */
		EXPECT_LT(0, eio + shorts) TH_LOG("%s mode: no EIO and no short read", modes[m]);
	}
	ioerr1 = spin_stat_get(fs->stat, "fallback_io_error");
	EXPECT_LT(ioerr0, ioerr1)
		TH_LOG("failed P2P legs not counted in fallback_io_error (+%lld)",
		       ioerr1 - ioerr0);

	/* Faults off: everything reads back right, through P2P again. */
	snprintf(path, sizeof(path), "%s/data", fs->dir);
	fd = open(path, O_RDONLY);
	spin_sysfs_set(SPIN_SYS "/mode", "auto");
	posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
	n = fd < 0 ? -1 : pread(fd, r->gmem, FILE_LEN, 0);
	EXPECT_EQ((ssize_t)FILE_LEN, n)
		TH_LOG("faults off: reading the whole file: %s", n < 0 ? strerror(errno) : "short");
	if (n == (ssize_t)FILE_LEN) {
		EXPECT_EQ(0, spin_gpu_check(gpu, r->gmem, FILE_LEN, fs->seed, 0, why,
					    sizeof(why)))
			TH_LOG("faults off: the whole file does not read back right: %s", why);
	}
	close(fd);
	expect_pool_back(_metadata, r);
}

TEST_HARNESS_MAIN
