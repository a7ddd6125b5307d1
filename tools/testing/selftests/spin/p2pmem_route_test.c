// SPDX-License-Identifier: GPL-2.0
/*
 * Buffered I/O with upstream's p2pmem/allocate mappings: the router
 * recognises GPU memory by its pages (p2pdma pages of a provider), not only
 * spin's dma-buf mappings, so unmodified tools that map p2pmem/allocate get
 * routed reads and writes.
 *
 * On ext4 (spin-nvme0) and xfs (spin-nvme1), with the stand-in GPU's
 * p2pmem/allocate mapped MAP_SHARED:
 *  - a buffered pread of an uncached file into it: the bytes, checked from
 *    the host side of the GPU memory; the disk's counters show P2P bytes;
 *  - a buffered pwrite from it of an aligned range: the file holds the bytes
 *    once its pages are dropped; the counters show all of them as P2P bytes;
 * fio_test runs fio with such mappings through every entry point.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/io_uring.h>

#include "../kselftest_harness.h"
#include "spin_lib.h"

#define KiB 1024UL
#define MiB (1024 * KiB)
#define MAP_LEN (8 * MiB)
/* The harness's default of 30 s is too short for the rig's throttled disks under TCG. */
#define TIMEOUT 600

/* Made and mounted once, before the tests; a test whose disk is missing skips. */
static struct spin_fs all[] = {
	SPIN_FS_EXT4("/mnt/pm-ext4", 301),
	SPIN_FS_XFS("/mnt/pm-xfs", 401),
};

static int made[ARRAY_SIZE(all)];	/* 0 made, else the errno of spin_fs_setup() */
static char gpu[PATH_MAX];

/* The stand-in GPU's p2pmem/allocate, mapped MAP_SHARED. */
static void *map_p2pmem(void)
{
	char p2pmem[PATH_MAX + 32];
	void *map;
	int fd;

	snprintf(p2pmem, sizeof(p2pmem), "%s/p2pmem/allocate", gpu);
	fd = open(p2pmem, O_RDWR);
	if (fd < 0)
		return MAP_FAILED;
	map = mmap(NULL, MAP_LEN, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	return map;
}

FIXTURE(p2pmem) {
	uint8_t *map, *host;
	struct spin_fs *fs;
	int fd;
};

FIXTURE_VARIANT(p2pmem) {
	int fs;
};

FIXTURE_VARIANT_ADD(p2pmem, ext4) { .fs = 0 };
FIXTURE_VARIANT_ADD(p2pmem, xfs) { .fs = 1 };

/* The file <dir>/data of the test pattern, written and out of the page cache. */
FIXTURE_SETUP(p2pmem)
{
	self->fd = -1;
	self->fs = &all[variant->fs];
	if (made[variant->fs] == ENODEV)
		SKIP(return, "not on the spin rig: no disk %s", self->fs->serial);
	ASSERT_EQ(0, made[variant->fs])
		TH_LOG("%s on %s (%s): %s", self->fs->type, self->fs->dev, self->fs->serial,
		       strerror(made[variant->fs]));
	self->map = map_p2pmem();
	ASSERT_NE(MAP_FAILED, self->map) TH_LOG("mmap p2pmem/allocate: %s", strerror(errno));
	self->host = spin_alloc_aligned(MAP_LEN);
	ASSERT_NE(NULL, self->host);
	self->fd = open(self->fs->path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	ASSERT_LE(0, self->fd) TH_LOG("%s: %s", self->fs->path, strerror(errno));
	spin_pattern_fill(self->host, 0, MAP_LEN, self->fs->seed);
	ASSERT_EQ((ssize_t)MAP_LEN, pwrite(self->fd, self->host, MAP_LEN, 0))
		TH_LOG("%s: setup: %s", self->fs->name, strerror(errno));
	ASSERT_EQ(0, fsync(self->fd));
	ASSERT_EQ(0, spin_uncache(self->fd));
}

FIXTURE_TEARDOWN(p2pmem)
{
	if (self->fd >= 0) {
		close(self->fd);
		unlink(self->fs->path);
	}
}

/*
 * A buffered pread of the uncached file into p2pmem/allocate is routed:
 * the disk counts P2P bytes, and the GPU memory holds the file's bytes.
 */
TEST_F_TIMEOUT(p2pmem, buffered_pread_routed, TIMEOUT)
{
	char why[256] = "ok";
	long long p0, p1;
	ssize_t n;

	p0 = spin_stat_get(self->fs->stat, "bytes_p2p");
	n = pread(self->fd, self->map, MAP_LEN, 0);
	p1 = spin_stat_get(self->fs->stat, "bytes_p2p");
	ASSERT_EQ((ssize_t)MAP_LEN, n) TH_LOG("pread: %zd (%s)", n, strerror(errno));
	ASSERT_EQ(0, spin_gpu_check(gpu, self->map, MAP_LEN, self->fs->seed, 0, why,
				    sizeof(why))) TH_LOG("%s", why);
	ASSERT_LT(0, p1 - p0) TH_LOG("no P2P bytes counted");
	TH_LOG("%s: %lld P2P bytes, bytes right", self->fs->name, p1 - p0);
}

/*
 * A buffered pwrite of an aligned range from p2pmem/allocate: every byte
 * goes by P2P, and the file holds them once its pages are dropped.
 */
TEST_F_TIMEOUT(p2pmem, buffered_pwrite_p2p, TIMEOUT)
{
	const uint64_t pos = 8192, len = 4 * MiB, body = len;
	uint64_t seed = self->fs->seed + 1;
	long long p0, p1;
	ssize_t n;

	ASSERT_EQ(0, spin_gpu_fill(gpu, self->map + pos, len, seed, pos));
	p0 = spin_stat_get(self->fs->stat, "write_bytes_p2p");
	n = pwrite(self->fd, self->map + pos, len, pos);
	p1 = spin_stat_get(self->fs->stat, "write_bytes_p2p");
	ASSERT_EQ((ssize_t)len, n) TH_LOG("pwrite: %zd (%s)", n, strerror(errno));
	ASSERT_EQ((long long)body, p1 - p0)
		TH_LOG("P2P bytes %lld, want %llu", p1 - p0, (unsigned long long)body);
	ASSERT_EQ(0, spin_uncache(self->fd));
	ASSERT_EQ((ssize_t)len, pread(self->fd, self->host, len, pos));
	ASSERT_GT(0, spin_pattern_check(self->host, pos, len, seed))
		TH_LOG("the file does not hold the written bytes");
}

/*
 * io_uring registered buffers in GPU memory: registration pins the pages
 * long-term without FOLL_PCI_P2PDMA, which GUP refuses for p2pdma pages, so
 * READ_FIXED/WRITE_FIXED with GPU memory cannot exist; registration fails
 * cleanly with EFAULT (io_pin_pages() turns the pages it could not pin into
 * EFAULT), as Documentation/spin/router.rst says.
 */
TEST(io_uring_register_gpu_memory_efault)
{
	struct io_uring_params p = { 0 };
	struct iovec iov;
	int ring, ret, e = 0;
	void *map;

	map = map_p2pmem();
	ASSERT_NE(MAP_FAILED, map) TH_LOG("mmap p2pmem/allocate: %s", strerror(errno));
	iov = (struct iovec){ map, MAP_LEN };
	ring = syscall(__NR_io_uring_setup, 4, &p);
	ASSERT_LE(0, ring) TH_LOG("io_uring_setup: %s", strerror(errno));
	ret = syscall(__NR_io_uring_register, ring, IORING_REGISTER_BUFFERS, &iov, 1);
	if (ret)
		e = errno;
	close(ring);
	ASSERT_EQ(-1, ret) TH_LOG("registered");
	ASSERT_EQ(EFAULT, e) TH_LOG("%s, want EFAULT", strerror(e));
}

int main(int argc, char **argv)
{
	int ret;

	if (spin_gpu_find(gpu, sizeof(gpu)))
		SPIN_SKIP_MISSING("stand-in GPU not found");
	ret = spin_sysfs_set(SPIN_SYS "/mode", "auto");
	if (ret)
		ksft_exit_fail_msg("spin mode: %s\n", strerror(-ret));
	for (size_t i = 0; i < ARRAY_SIZE(all); i++)
		made[i] = spin_fs_setup(&all[i], 0) ? errno : 0;
	return test_harness_run(argc, argv);
}
