// SPDX-License-Identifier: GPL-2.0
/*
 * Asynchronous entry points into and out of GPU memory, every
 * byte checked from the host side of the GPU memory:
 *  - io_uring IORING_OP_READ, READV, WRITE and WRITEV, and eight reads in
 *    flight at once, on buffered files on ext4 (spin-nvme0) and xfs
 *    (spin-nvme1): reads are checked from the host side, writes by CPU
 *    reads of the uncached file; the disk's counters must show P2P bytes,
 *    except for a write from two iovecs, which goes whole through the page
 *    cache (write_fallback_split);
 *  - aio (io_submit) IOCB_CMD_PREAD, PREADV, PWRITE and PWRITEV, the same;
 *  - NVMe passthrough into and out of GPU memory, below any filesystem:
 *    NVME_IOCTL_IO64_CMD on the namespace's block device and io_uring
 *    URING_CMD (NVME_URING_CMD_IO) on its generic character device, reads
 *    and writes of raw blocks compared with O_DIRECT reads and writes of
 *    host memory.
 * The passthrough tests run first, before any filesystem is made on the
 * disk; each filesystem is made by its first test and kept for the others,
 * and each test writes a fresh file.
 * The rings and aio contexts are set up with raw system calls (no liburing
 * or libaio in the guest).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/aio_abi.h>
#include <linux/io_uring.h>
#include <linux/nvme_ioctl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "../kselftest_harness.h"
#include "spin_lib.h"

#define KiB 1024UL
#define MiB (1024 * KiB)
#define GPU_LEN (32 * MiB)
#define FILE_LEN (12 * MiB + 1234)
#define POS 8192UL			/* file offset of the requests: aligned, so */
#define LEN (4 * MiB)			/* that a write from one buffer goes direct */
#define RAW_OFF (256 * MiB)		/* passthrough: raw disk offset */
#define RAW_MAX (1 * MiB)		/* passthrough: at most this per command */
/* The harness's default of 30 s is too short for the rig's throttled disks under TCG. */
#define TIMEOUT 600

static const struct spin_fs all[] = {
	SPIN_FS_EXT4("/mnt/async-ext4", 41),
	SPIN_FS_XFS("/mnt/async-xfs", 51),
};

/*
 * The filesystems, each made by its first test and kept for the others, in
 * memory shared by the tests' processes.
 */
static struct {
	struct spin_fs fs[ARRAY_SIZE(all)];
	int err[ARRAY_SIZE(all)];	/* -1 not made yet, 0 made, else the errno */
} *made;

/* A passthrough command is not split: at most the queue's max_hw_sectors_kb. */
static size_t raw_len;

/* The stand-in GPU, and the running test's GPU and host memory. */
static char gpu[PATH_MAX];
static uint8_t *gmem, *host;

/* ---- helpers -------------------------------------------------------------- */

/* GPU address for file offset @pos: congruent to it modulo 4 KiB, from @base. */
static uint8_t *gaddr(size_t base, uint64_t pos)
{
	return gmem + base + pos % 4096;
}

/* The GPU buffer of a test: its dma-buf heap and buffer. */
struct rig {
	int heap, buf;
};

/*
 * GPU_LEN bytes of GPU memory at gmem, FILE_LEN + 4 KiB of host memory at
 * host, the router in auto mode; false when the test skips (no stand-in GPU).
 */
static bool rig_setup(struct __test_metadata *_metadata, struct rig *r)
{
	int ret;

	r->heap = -1;
	r->buf = -1;
	gmem = MAP_FAILED;
	ret = spin_gpu_setup(gpu, GPU_LEN, &gmem, &r->heap, &r->buf, FILE_LEN + 4096, &host) ?
	      errno : 0;
	if (ret == ENODEV)
		SKIP(return false, "not on the spin rig: stand-in GPU not found");
	ASSERT_EQ(0, ret)
		TH_LOG("GPU set-up (4 KiB pages, memory, mode auto): %s", strerror(ret));
	return true;
}

static void rig_release(struct rig *r)
{
	if (gmem != MAP_FAILED)
		munmap(gmem, GPU_LEN);
	gmem = MAP_FAILED;
	if (r->buf >= 0)
		close(r->buf);
	if (r->heap >= 0)
		close(r->heap);
	free(host);
	host = NULL;
}

/* The test file: FILE_LEN bytes of pattern fs->seed, uncached. */
static int fresh_file(struct spin_fs *fs)
{
	int fd = open(fs->path, O_RDWR | O_CREAT | O_TRUNC, 0644);

	spin_pattern_fill(host, 0, FILE_LEN, fs->seed);
	if (fd < 0 || spin_write_uncached(fd, host, FILE_LEN, 0)) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

/*
 * Checks the file after a write of pattern @seed at POS..+LEN: by CPU reads
 * of the uncached file, the old pattern around it.
 */
static void expect_written(struct __test_metadata *_metadata, struct spin_fs *fs, int fd,
			   uint64_t seed)
{
	ASSERT_EQ((ssize_t)FILE_LEN, spin_read_uncached(fd, host, FILE_LEN, 0))
		TH_LOG("reading back: %s", strerror(errno));
	EXPECT_GT(0, spin_pattern_check(host, 0, POS, fs->seed))
		TH_LOG("CPU read of the uncached file: a byte before the write wrong");
	EXPECT_GT(0, spin_pattern_check(host + POS, POS, LEN, seed))
		TH_LOG("CPU read of the uncached file: a written byte wrong");
	EXPECT_GT(0, spin_pattern_check(host + POS + LEN, POS + LEN, FILE_LEN - POS - LEN,
					fs->seed))
		TH_LOG("CPU read of the uncached file: a byte after the write wrong");
}

enum op { READ_ONE, READ_VEC, WRITE_ONE, WRITE_VEC };
static const char *const op_name[] = { "read", "readv", "write", "writev" };

/*
 * Runs @op at POS..+LEN through io_uring (@uring) or aio into or out of GPU
 * memory, as one buffer or two iovecs split at POS + 1 MiB + 11; returns the
 * result of the request.
 */
static long long submit(int uring, enum op op, int fd)
{
	int write = op == WRITE_ONE || op == WRITE_VEC, vec = op == READ_VEC || op == WRITE_VEC;
	size_t len1 = MiB + 11;
	struct iovec iov[2] = {
		{ gaddr(0, POS), len1 },
		{ gaddr(16 * MiB, POS + len1), LEN - len1 },
	};
	struct iocb cb = {
		.aio_fildes = fd,
		.aio_lio_opcode = vec ? (write ? IOCB_CMD_PWRITEV : IOCB_CMD_PREADV) :
					(write ? IOCB_CMD_PWRITE : IOCB_CMD_PREAD),
		.aio_buf = vec ? (uintptr_t)iov : (uintptr_t)gaddr(0, POS),
		.aio_nbytes = vec ? 2 : LEN,
		.aio_offset = POS,
	};
	struct io_uring_sqe *sqe;
	int res = -EIO;
	long long ret;
	struct spin_ring r;

	if (!uring)
		return spin_aio_one(&cb);
	if (spin_ring_init(&r, 4, 0))
		return -errno;
	sqe = spin_ring_sqe(&r, 0);
	sqe->opcode = vec ? (write ? IORING_OP_WRITEV : IORING_OP_READV) :
			    (write ? IORING_OP_WRITE : IORING_OP_READ);
	sqe->fd = fd;
	sqe->off = POS;
	sqe->addr = cb.aio_buf;
	sqe->len = cb.aio_nbytes;
	ret = spin_ring_run(&r, 1, &res) ? -errno : res;
	spin_ring_exit(&r);
	return ret;
}

/* ---- NVMe passthrough ------------------------------------------------------ */

/*
 * Passthrough read (opcode 0x02) or write (0x01) of raw_len bytes at RAW_OFF
 * of the namespace, data in GPU memory at @buf: by ioctl on @fd (the block
 * device) or, with @ng >= 0, by io_uring URING_CMD on the generic device.
 */
static int passthru(int fd, int ng, unsigned int nsid, unsigned int lbs, int write, void *buf,
		    char *why, size_t wl)
{
	uint64_t slba = RAW_OFF / lbs;
	uint32_t nlb = raw_len / lbs - 1;
	struct nvme_passthru_cmd64 c = {
		.opcode = write ? 0x01 : 0x02,
		.nsid = nsid,
		.addr = (uintptr_t)buf,
		.data_len = raw_len,
		.cdw10 = slba & 0xffffffff,
		.cdw11 = slba >> 32,
		.cdw12 = nlb,
	};
	struct nvme_uring_cmd *uc;
	struct io_uring_sqe *sqe;
	int ret, res = -EIO;
	struct spin_ring r;

	if (ng < 0) {
		ret = ioctl(fd, NVME_IOCTL_IO64_CMD, &c);
		if (ret)
			snprintf(why, wl, "NVME_IOCTL_IO64_CMD: %d (%s)", ret,
				 ret < 0 ? strerror(errno) : "NVMe status");
		return ret ? -1 : 0;
	}
	if (spin_ring_init(&r, 4, IORING_SETUP_SQE128 | IORING_SETUP_CQE32)) {
		snprintf(why, wl, "io_uring_setup: %s", strerror(errno));
		return -1;
	}
	sqe = spin_ring_sqe(&r, 0);
	sqe->opcode = IORING_OP_URING_CMD;
	sqe->fd = ng;
	sqe->cmd_op = NVME_URING_CMD_IO;
	uc = (void *)sqe->cmd;
	uc->opcode = c.opcode;
	uc->nsid = c.nsid;
	uc->addr = c.addr;
	uc->data_len = c.data_len;
	uc->cdw10 = c.cdw10;
	uc->cdw11 = c.cdw11;
	uc->cdw12 = c.cdw12;
	ret = spin_ring_run(&r, 1, &res) || res;
	if (ret)
		snprintf(why, wl, "URING_CMD: %d (%s)", res,
			 res < 0 ? strerror(-res) : "NVMe status");
	spin_ring_exit(&r);
	return ret ? -1 : 0;
}

/* spin-nvme0's namespace: its block device and its generic character device. */
FIXTURE(passthru) {
	struct rig r;
	int fd, ng, nsid;
	long long lbs;
};

/* By ioctl on the block device, or by io_uring URING_CMD on the generic device. */
FIXTURE_VARIANT(passthru) {
	int uring;
};

FIXTURE_VARIANT_ADD(passthru, ioctl) { .uring = 0 };
FIXTURE_VARIANT_ADD(passthru, uring_cmd) { .uring = 1 };

FIXTURE_SETUP(passthru)
{
	char dev[64], ngdev[64], path[PATH_MAX];

	self->fd = -1;
	self->ng = -1;
	if (!rig_setup(_metadata, &self->r))
		return;
	if (spin_nvme_blockdev(SPIN_NVME0_SERIAL, dev, sizeof(dev)))
		SKIP(return, "not on the spin rig: no disk %s", SPIN_NVME0_SERIAL);
	/* /dev/nvmeXnY -> /dev/ngXnY, the namespace's generic character device. */
	snprintf(ngdev, sizeof(ngdev), "/dev/ng%s", dev + strlen("/dev/nvme"));
	snprintf(path, sizeof(path), "/sys/block/%s/queue/logical_block_size", dev + 5);
	self->lbs = spin_read_ll(path);
	snprintf(path, sizeof(path), "/sys/block/%s/queue/max_hw_sectors_kb", dev + 5);
	raw_len = spin_read_ll(path) * KiB;
	if (raw_len > RAW_MAX)
		raw_len = RAW_MAX;
	TH_LOG("passthrough commands of %zu bytes on %s and %s", raw_len, dev, ngdev);
	self->fd = open(dev, O_RDWR | O_DIRECT);
	ASSERT_LE(0, self->fd) TH_LOG("%s: %s", dev, strerror(errno));
	self->ng = open(ngdev, O_RDWR);
	ASSERT_LE(0, self->ng) TH_LOG("%s: %s", ngdev, strerror(errno));
	self->nsid = ioctl(self->fd, NVME_IOCTL_ID);
	ASSERT_LT(0, self->nsid) TH_LOG("NVME_IOCTL_ID on %s: %s", dev, strerror(errno));
	ASSERT_LE(512, self->lbs) TH_LOG("%s: logical block size %lld", dev, self->lbs);
	ASSERT_LE((size_t)self->lbs, raw_len)
		TH_LOG("%s: max_hw_sectors_kb of %zu bytes, less than a block", dev, raw_len);
}

FIXTURE_TEARDOWN(passthru)
{
	if (self->ng >= 0)
		close(self->ng);
	if (self->fd >= 0)
		close(self->fd);
	rig_release(&self->r);
}

/* Raw blocks written from host memory by O_DIRECT, read into GPU memory. */
TEST_F_TIMEOUT(passthru, read_into_gpu, TIMEOUT)
{
	uint64_t seed = 300 + variant->uring;
	char why[256] = "";

	spin_pattern_fill(host, RAW_OFF, raw_len, seed);
	ASSERT_EQ((ssize_t)raw_len, pwrite(self->fd, host, raw_len, RAW_OFF))
		TH_LOG("O_DIRECT write: %s", strerror(errno));
	ASSERT_EQ(0, passthru(self->fd, variant->uring ? self->ng : -1, self->nsid, self->lbs, 0,
			      gmem, why, sizeof(why)))
		TH_LOG("%s", why);
	EXPECT_EQ(0, spin_gpu_check(gpu, gmem, raw_len, seed, RAW_OFF, why, sizeof(why)))
		TH_LOG("%s", why);
}

/* GPU memory filled from the host side, written, read back by O_DIRECT. */
TEST_F_TIMEOUT(passthru, write_from_gpu, TIMEOUT)
{
	uint64_t seed = 310 + variant->uring;
	char why[256] = "";

	ASSERT_EQ(0, spin_gpu_fill(gpu, gmem + 4 * MiB, raw_len, seed, RAW_OFF))
		TH_LOG("filling GPU memory from the host side");
	ASSERT_EQ(0, passthru(self->fd, variant->uring ? self->ng : -1, self->nsid, self->lbs, 1,
			      gmem + 4 * MiB, why, sizeof(why)))
		TH_LOG("%s", why);
	ASSERT_EQ((ssize_t)raw_len, pread(self->fd, host, raw_len, RAW_OFF))
		TH_LOG("O_DIRECT read: %s", strerror(errno));
	EXPECT_GT(0, spin_pattern_check(host, RAW_OFF, raw_len, seed))
		TH_LOG("the blocks read back differ");
}

/* ---- io_uring and aio on each filesystem ---------------------------------- */

FIXTURE(async) {
	struct rig r;
	struct spin_fs *fs;
	int fd;
};

FIXTURE_VARIANT(async) {
	int fs;
};

FIXTURE_VARIANT_ADD(async, ext4) { .fs = 0 };
FIXTURE_VARIANT_ADD(async, xfs) { .fs = 1 };

/* The GPU buffer, the filesystem (made by its first test) and its fresh file "f". */
FIXTURE_SETUP(async)
{
	struct spin_fs *fs = &made->fs[variant->fs];
	int *err = &made->err[variant->fs];

	self->fd = -1;
	if (!rig_setup(_metadata, &self->r))
		return;
	if (*err < 0) {
		*err = spin_fs_setup(fs, 0) ? errno : 0;
		snprintf(fs->path, sizeof(fs->path), "%s/f", fs->dir);
		if (!*err)
			TH_LOG("%s on %s (%s), logical block %u", fs->type, fs->dev, fs->serial,
			       fs->lbs);
	}
	if (*err == ENODEV)
		SKIP(return, "not on the spin rig: no disk %s", fs->serial);
	ASSERT_EQ(0, *err)
		TH_LOG("%s on %s (%s): %s", fs->type, fs->dev, fs->serial, strerror(*err));
	self->fs = fs;
	self->fd = fresh_file(fs);
	ASSERT_LE(0, self->fd) TH_LOG("%s: the file: %s", fs->name, strerror(errno));
}

FIXTURE_TEARDOWN(async)
{
	if (self->fd >= 0)
		close(self->fd);
	rig_release(&self->r);
}

/*
 * @op at POS..+LEN of the file through io_uring (@uring) or aio, into or out
 * of GPU memory: the result, the disk's counters and every byte.
 */
static void run_op(struct __test_metadata *_metadata, struct spin_fs *fs, int fd, int uring,
		   enum op op)
{
	int write = op == WRITE_ONE || op == WRITE_VEC, vec = op == READ_VEC || op == WRITE_VEC;
	const char *ctr = write ? "write_bytes_p2p" : "bytes_p2p";
	uint64_t wseed = fs->seed + 100 + op;
	long long p0, p1, s0, s1, ret;
	size_t len1 = MiB + 11;
	char why[256] = "";

	/* One buffer: all at gaddr(0, POS); two iovecs: split at POS + len1. */
	if (!vec)
		len1 = LEN;
	if (write) {
		ASSERT_EQ(0, spin_gpu_fill(gpu, gaddr(0, POS), len1, wseed, POS))
			TH_LOG("filling GPU memory from the host side");
		if (vec) {
			ASSERT_EQ(0, spin_gpu_fill(gpu, gaddr(16 * MiB, POS + len1), LEN - len1,
						   wseed, POS + len1))
				TH_LOG("filling GPU memory from the host side");
		}
	}
	p0 = spin_stat_get(fs->stat, ctr);
	s0 = spin_stat_get(fs->stat, "write_fallback_split");
	ret = submit(uring, op, fd);
	p1 = spin_stat_get(fs->stat, ctr);
	s1 = spin_stat_get(fs->stat, "write_fallback_split");
	TH_LOG("%s: %s %s %s GPU memory: %s +%lld", fs->name, uring ? "io_uring" : "aio",
	       op_name[op], write ? "from" : "into", ctr, p1 - p0);
	ASSERT_EQ((long long)LEN, ret)
		TH_LOG("result %lld (%s), want %lu", ret, ret < 0 ? strerror(-ret) : "short", LEN);
	if (write && vec) {
		EXPECT_EQ(p0, p1)
			TH_LOG("%s +%lld, want none: the write goes through the page cache", ctr,
			       p1 - p0);
		EXPECT_EQ(1, s1 - s0) TH_LOG("write_fallback_split +%lld, want 1", s1 - s0);
	} else {
		EXPECT_LE((long long)(LEN / 2), p1 - p0)
			TH_LOG("%s +%lld of %lu", ctr, p1 - p0, LEN);
	}
	if (write) {
		expect_written(_metadata, fs, fd, wseed);
		return;
	}
	EXPECT_EQ(0, spin_gpu_check(gpu, gaddr(0, POS), len1, fs->seed, POS, why, sizeof(why)))
		TH_LOG("%s", why);
	if (vec) {
		EXPECT_EQ(0, spin_gpu_check(gpu, gaddr(16 * MiB, POS + len1), LEN - len1, fs->seed,
					    POS + len1, why, sizeof(why)))
			TH_LOG("the second iovec: %s", why);
	}
}

TEST_F_TIMEOUT(async, io_uring_read, TIMEOUT)
{
	run_op(_metadata, self->fs, self->fd, 1, READ_ONE);
}

TEST_F_TIMEOUT(async, io_uring_readv, TIMEOUT)
{
	run_op(_metadata, self->fs, self->fd, 1, READ_VEC);
}

TEST_F_TIMEOUT(async, io_uring_write, TIMEOUT)
{
	run_op(_metadata, self->fs, self->fd, 1, WRITE_ONE);
}

TEST_F_TIMEOUT(async, io_uring_writev, TIMEOUT)
{
	run_op(_metadata, self->fs, self->fd, 1, WRITE_VEC);
}

TEST_F_TIMEOUT(async, aio_read, TIMEOUT)
{
	run_op(_metadata, self->fs, self->fd, 0, READ_ONE);
}

TEST_F_TIMEOUT(async, aio_readv, TIMEOUT)
{
	run_op(_metadata, self->fs, self->fd, 0, READ_VEC);
}

TEST_F_TIMEOUT(async, aio_write, TIMEOUT)
{
	run_op(_metadata, self->fs, self->fd, 0, WRITE_ONE);
}

TEST_F_TIMEOUT(async, aio_writev, TIMEOUT)
{
	run_op(_metadata, self->fs, self->fd, 0, WRITE_VEC);
}

/*
 * Eight 1 MiB reads at different offsets in flight in one io_uring_enter().
 * Each starts two pages past the page where the one before it ends, so that
 * none continues another's stream, which the page cache may read ahead
 * instead, whatever order io_uring's workers run them in.
 */
#define IN_FLIGHT_STEP (MiB + 2 * 4096 + 3)
TEST_F_TIMEOUT(async, io_uring_8_reads_in_flight, TIMEOUT)
{
	struct spin_fs *fs = self->fs;
	char why[256] = "";
	long long p0, p1;
	struct spin_ring r;
	int res[8], ret;

	ASSERT_EQ(0, spin_ring_init(&r, 8, 0)) TH_LOG("io_uring_setup: %s", strerror(errno));
	p0 = spin_stat_get(fs->stat, "bytes_p2p");
	for (int i = 0; i < 8; i++) {
		struct io_uring_sqe *sqe = spin_ring_sqe(&r, i);
		uint64_t pos = POS + i * IN_FLIGHT_STEP;

		sqe->opcode = IORING_OP_READ;
		sqe->fd = self->fd;
		sqe->off = pos;
		sqe->addr = (uintptr_t)gaddr(i * 2 * MiB, pos);
		sqe->len = MiB;
		res[i] = -EIO;
	}
	ret = spin_ring_run(&r, 8, res) ? errno : 0;
	spin_ring_exit(&r);
	p1 = spin_stat_get(fs->stat, "bytes_p2p");
	ASSERT_EQ(0, ret) TH_LOG("io_uring_enter: %s", strerror(ret));
	for (int i = 0; i < 8; i++) {
		uint64_t pos = POS + i * IN_FLIGHT_STEP;

		EXPECT_EQ((int)MiB, res[i]) TH_LOG("read %d: result %d", i, res[i]);
		if (res[i] != (int)MiB)
			continue;
		EXPECT_EQ(0, spin_gpu_check(gpu, gaddr(i * 2 * MiB, pos), MiB, fs->seed, pos, why,
					    sizeof(why)))
			TH_LOG("read %d: %s", i, why);
	}
	EXPECT_LE((long long)(4 * MiB), p1 - p0) TH_LOG("bytes_p2p +%lld of 8 MiB", p1 - p0);
}

int main(int argc, char **argv)
{
	made = mmap(NULL, sizeof(*made), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1,
		    0);
	if (made == MAP_FAILED)
		ksft_exit_fail_msg("mmap: %s\n", strerror(errno));
	for (size_t i = 0; i < ARRAY_SIZE(all); i++) {
		made->fs[i] = all[i];
		made->err[i] = -1;
	}
	return test_harness_run(argc, argv);
}
