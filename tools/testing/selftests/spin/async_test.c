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
 * The rings and aio contexts are set up with raw system calls (no liburing
 * or libaio in the guest).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/aio_abi.h>
#include <linux/io_uring.h>
#include <linux/nvme_ioctl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "../kselftest.h"
#include "spin_lib.h"

#define KiB 1024UL
#define MiB (1024 * KiB)
#define GPU_LEN (32 * MiB)
#define FILE_LEN (12 * MiB + 1234)
#define POS 8192UL			/* file offset of the requests: aligned, so */
#define LEN (4 * MiB)			/* that a write from one buffer goes direct */
#define RAW_OFF (256 * MiB)		/* passthrough: raw disk offset */
#define RAW_MAX (1 * MiB)		/* passthrough: at most this per command */

/* A passthrough command is not split: at most the queue's max_hw_sectors_kb. */
static size_t raw_len;

static char gpu[PATH_MAX];
static uint8_t *gmem, *host;

/* ---- helpers -------------------------------------------------------------- */

/* GPU address for file offset @pos: congruent to it modulo 4 KiB, from @base. */
static uint8_t *gaddr(size_t base, uint64_t pos)
{
	return gmem + base + pos % 4096;
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
static int written_ok(struct spin_fs *fs, int fd, uint64_t seed, char *why, size_t wl)
{
	ssize_t bad;

	if (spin_read_uncached(fd, host, FILE_LEN, 0) != (ssize_t)FILE_LEN) {
		snprintf(why, wl, "reading back: %s", strerror(errno));
		return -1;
	}
	bad = spin_pattern_check(host, 0, POS, fs->seed);
	if (bad < 0)
		bad = spin_pattern_check(host + POS, POS, LEN, seed);
	if (bad < 0)
		bad = spin_pattern_check(host + POS + LEN, POS + LEN, FILE_LEN - POS - LEN,
					 fs->seed);
	if (bad >= 0) {
		snprintf(why, wl, "CPU read of the uncached file: a byte wrong");
		return -1;
	}
	return 0;
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

static void test_op(struct spin_fs *fs, int uring, enum op op)
{
	int write = op == WRITE_ONE || op == WRITE_VEC, vec = op == READ_VEC || op == WRITE_VEC;
	const char *ctr = write ? "write_bytes_p2p" : "bytes_p2p";
	uint64_t wseed = fs->seed + 100 + op;
	char why[256] = "ok";
	long long p0, p1, s0, s1, ret;
	size_t len1 = MiB + 11;
	int fd = fresh_file(fs), ok = fd >= 0;

	if (!ok)
		snprintf(why, sizeof(why), "the file: %s", strerror(errno));
	/* One buffer: all at gaddr(0, POS); two iovecs: split at POS + len1. */
	if (!vec)
		len1 = LEN;
	if (ok && write &&
	    (spin_gpu_fill(gpu, gaddr(0, POS), len1, wseed, POS) ||
	     (vec && spin_gpu_fill(gpu, gaddr(16 * MiB, POS + len1), LEN - len1, wseed,
				   POS + len1)))) {
		snprintf(why, sizeof(why), "filling GPU memory from the host side");
		ok = 0;
	}
	p0 = spin_stat_get(fs->stat, ctr);
	s0 = spin_stat_get(fs->stat, "write_fallback_split");
	ret = ok ? submit(uring, op, fd) : 0;
	p1 = spin_stat_get(fs->stat, ctr);
	s1 = spin_stat_get(fs->stat, "write_fallback_split");
	if (ok && ret != (long long)LEN) {
		snprintf(why, sizeof(why), "result %lld (%s), want %lu", ret,
			 ret < 0 ? strerror(-ret) : "short", LEN);
		ok = 0;
	}
	if (ok && write && vec && (p1 != p0 || s1 - s0 != 1)) {
		snprintf(why, sizeof(why), "%s +%lld, write_fallback_split +%lld", ctr, p1 - p0,
			 s1 - s0);
		ok = 0;
	} else if (ok && !(write && vec) && p1 - p0 < (long long)(LEN / 2)) {
		snprintf(why, sizeof(why), "%s +%lld of %lu", ctr, p1 - p0, LEN);
		ok = 0;
	}
	if (ok && !write &&
	    (spin_gpu_check(gpu, gaddr(0, POS), len1, fs->seed, POS, why, sizeof(why)) ||
	     (vec && spin_gpu_check(gpu, gaddr(16 * MiB, POS + len1), LEN - len1, fs->seed,
				    POS + len1, why, sizeof(why)))))
		ok = 0;
	if (ok && write && written_ok(fs, fd, wseed, why, sizeof(why)))
		ok = 0;
	ksft_test_result(ok, "%s: %s %s %s GPU memory (%s +%lld; %s)\n", fs->name,
			 uring ? "io_uring" : "aio", op_name[op], write ? "from" : "into", ctr,
			 p1 - p0, why);
	if (fd >= 0)
		close(fd);
}

/* Eight 1 MiB reads at different offsets in flight in one io_uring_enter(). */
static void test_uring_depth(struct spin_fs *fs)
{
	int res[8], fd = fresh_file(fs), ok = fd >= 0;
	char why[256] = "ok";
	long long p0, p1;
	struct spin_ring r;

	if (ok && spin_ring_init(&r, 8, 0)) {
		snprintf(why, sizeof(why), "io_uring_setup: %s", strerror(errno));
		close(fd);
		fd = -1;
		ok = 0;
	}
	p0 = spin_stat_get(fs->stat, "bytes_p2p");
	for (int i = 0; ok && i < 8; i++) {
		struct io_uring_sqe *sqe = spin_ring_sqe(&r, i);
		uint64_t pos = POS + i * (MiB + 4096 + 3);

		sqe->opcode = IORING_OP_READ;
		sqe->fd = fd;
		sqe->off = pos;
		sqe->addr = (uintptr_t)gaddr(i * 2 * MiB, pos);
		sqe->len = MiB;
		res[i] = -EIO;
	}
	if (ok && spin_ring_run(&r, 8, res)) {
		snprintf(why, sizeof(why), "io_uring_enter: %s", strerror(errno));
		ok = 0;
	}
	p1 = spin_stat_get(fs->stat, "bytes_p2p");
	for (int i = 0; ok && i < 8; i++) {
		uint64_t pos = POS + i * (MiB + 4096 + 3);

		if (res[i] != (int)MiB) {
			snprintf(why, sizeof(why), "read %d: result %d", i, res[i]);
			ok = 0;
		} else if (spin_gpu_check(gpu, gaddr(i * 2 * MiB, pos), MiB, fs->seed, pos, why,
					  sizeof(why))) {
			ok = 0;
		}
	}
	if (ok && p1 - p0 < (long long)(4 * MiB)) {
		snprintf(why, sizeof(why), "bytes_p2p +%lld of 8 MiB", p1 - p0);
		ok = 0;
	}
	ksft_test_result(ok, "%s: io_uring, 8 reads into GPU memory in flight (%s)\n", fs->name,
			 why);
	if (fd >= 0) {
		spin_ring_exit(&r);
		close(fd);
	}
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

static void test_passthru(void)
{
	char dev[64], ngdev[64], path[PATH_MAX], why[256];
	int fd, ng, nsid;
	long long lbs;

	if (spin_nvme_blockdev(SPIN_NVME0_SERIAL, dev, sizeof(dev))) {
		for (int i = 0; i < 4; i++)
			ksft_test_result_fail("NVMe passthrough: %s not found\n",
					      SPIN_NVME0_SERIAL);
		return;
	}
	/* /dev/nvmeXnY -> /dev/ngXnY, the namespace's generic character device. */
	snprintf(ngdev, sizeof(ngdev), "/dev/ng%s", dev + strlen("/dev/nvme"));
	snprintf(path, sizeof(path), "/sys/block/%s/queue/logical_block_size", dev + 5);
	lbs = spin_read_ll(path);
	snprintf(path, sizeof(path), "/sys/block/%s/queue/max_hw_sectors_kb", dev + 5);
	raw_len = spin_read_ll(path) * KiB;
	if (raw_len > RAW_MAX)
		raw_len = RAW_MAX;
	ksft_print_msg("passthrough commands of %zu bytes on %s and %s\n", raw_len, dev, ngdev);
	fd = open(dev, O_RDWR | O_DIRECT);
	ng = open(ngdev, O_RDWR);
	nsid = fd >= 0 ? ioctl(fd, NVME_IOCTL_ID) : -1;
	if (fd < 0 || ng < 0 || nsid <= 0 || lbs < 512 || raw_len < (size_t)lbs) {
		for (int i = 0; i < 4; i++)
			ksft_test_result_fail("NVMe passthrough: %s / %s: %s\n", dev, ngdev,
					      strerror(errno));
		if (fd >= 0)
			close(fd);
		if (ng >= 0)
			close(ng);
		return;
	}
	for (int uring = 0; uring < 2; uring++) {
		const char *how = uring ? "io_uring URING_CMD" : "NVME_IOCTL_IO64_CMD";
		uint64_t rseed = 300 + uring, wseed = 310 + uring;
		int ok;

		/* Read: raw blocks written from host memory, read into GPU memory. */
		snprintf(why, sizeof(why), "ok");
		spin_pattern_fill(host, RAW_OFF, raw_len, rseed);
		ok = pwrite(fd, host, raw_len, RAW_OFF) == (ssize_t)raw_len;
		if (!ok)
			snprintf(why, sizeof(why), "O_DIRECT write: %s", strerror(errno));
		ok = ok && !passthru(fd, uring ? ng : -1, nsid, lbs, 0, gmem, why, sizeof(why)) &&
		     !spin_gpu_check(gpu, gmem, raw_len, rseed, RAW_OFF, why, sizeof(why));
		ksft_test_result(ok, "NVMe passthrough read into GPU memory, %s (%s)\n", how, why);

		/* Write: GPU memory filled from the host side, written, read back by O_DIRECT. */
		snprintf(why, sizeof(why), "ok");
		ok = !spin_gpu_fill(gpu, gmem + 4 * MiB, raw_len, wseed, RAW_OFF) &&
		     !passthru(fd, uring ? ng : -1, nsid, lbs, 1, gmem + 4 * MiB, why,
			       sizeof(why));
		if (ok && pread(fd, host, raw_len, RAW_OFF) != (ssize_t)raw_len) {
			snprintf(why, sizeof(why), "O_DIRECT read: %s", strerror(errno));
			ok = 0;
		}
		if (ok && spin_pattern_check(host, RAW_OFF, raw_len, wseed) >= 0) {
			snprintf(why, sizeof(why), "the blocks read back differ");
			ok = 0;
		}
		ksft_test_result(ok, "NVMe passthrough write from GPU memory, %s (%s)\n", how, why);
	}
	close(ng);
	close(fd);
}

/* Each filesystem's tests, on its file "f". */
static void test_fs(struct spin_fs *fs, size_t i)
{
	snprintf(fs->path, sizeof(fs->path), "%s/f", fs->dir);
	for (int uring = 1; uring >= 0; uring--)
		for (int op = READ_ONE; op <= WRITE_VEC; op++)
			test_op(fs, uring, op);
	test_uring_depth(fs);
}

int main(void)
{
	struct spin_fs all[] = {
		SPIN_FS_EXT4("/mnt/async-ext4", 41),
		SPIN_FS_XFS("/mnt/async-xfs", 51),
	};
	int heap, buf;

	ksft_print_header();
	ksft_set_plan(ARRAY_SIZE(all) * 9 + 4);
	SPIN_GPU_SETUP_OR_EXIT(gpu, GPU_LEN, &gmem, &heap, &buf, FILE_LEN + 4096, &host);

	/* Below any file system first: the raw blocks are outside them anyway. */
	test_passthru();
	SPIN_FS_EACH_OR_EXIT(all, ARRAY_SIZE(all), 0, test_fs);
	munmap(gmem, GPU_LEN);
	close(buf);
	close(heap);
	ksft_finished();
}
