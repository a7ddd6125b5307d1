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
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/io_uring.h>

#include "../kselftest.h"
#include "spin_lib.h"

#define KiB 1024UL
#define MiB (1024 * KiB)
#define MAP_LEN (8 * MiB)

struct fs {
	const char *name, *serial, *type, *mkfs, *dir;
	char dev[64], disk[32], stat[PATH_MAX];
	unsigned int lbs;
	uint64_t seed;
};

static char gpu[PATH_MAX], p2pmem[PATH_MAX + 32];
static uint8_t *map, *host;
static pid_t main_pid;
static const char *mounted[2];

static void restore(void)
{
	if (getpid() != main_pid)
		return;
	for (size_t i = 0; i < ARRAY_SIZE(mounted); i++)
		if (mounted[i] && umount(mounted[i]))
			ksft_print_msg("umount %s: %s\n", mounted[i], strerror(errno));
}

static void test_rw(struct fs *fs)
{
	char path[PATH_MAX], why[256] = "ok";
	const uint64_t pos = 8192, len = 4 * MiB, body = len;
	long long p0, p1;
	int fd, ok = 1;
	ssize_t n;

	snprintf(path, sizeof(path), "%s/data", fs->dir);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	spin_pattern_fill(host, 0, MAP_LEN, fs->seed);
	if (fd < 0 || pwrite(fd, host, MAP_LEN, 0) != (ssize_t)MAP_LEN || fsync(fd) ||
	    spin_uncache(fd)) {
		ksft_test_result_fail("%s: setup: %s\n", fs->name, strerror(errno));
		ksft_test_result_fail("%s: write: not run\n", fs->name);
		if (fd >= 0)
			close(fd);
		return;
	}
	p0 = spin_stat_get(fs->stat, "bytes_p2p");
	n = pread(fd, map, MAP_LEN, 0);
	p1 = spin_stat_get(fs->stat, "bytes_p2p");
	if (n != (ssize_t)MAP_LEN) {
		snprintf(why, sizeof(why), "pread: %zd (%s)", n, strerror(errno));
		ok = 0;
	}
	if (ok && spin_gpu_check(gpu, map, MAP_LEN, fs->seed, 0, why, sizeof(why)))
		ok = 0;
	if (ok && p1 - p0 <= 0) {
		snprintf(why, sizeof(why), "no P2P bytes counted");
		ok = 0;
	}
	ksft_test_result(ok,
			 "%s: buffered pread into p2pmem/allocate: routed, %lld P2P bytes, bytes right (%s)\n",
			 fs->name, p1 - p0, why);

	snprintf(why, sizeof(why), "ok");
	ok = !spin_gpu_fill(gpu, map + pos, len, fs->seed + 1, pos);
	p0 = spin_stat_get(fs->stat, "write_bytes_p2p");
	n = ok ? pwrite(fd, map + pos, len, pos) : -1;
	p1 = spin_stat_get(fs->stat, "write_bytes_p2p");
	if (n != (ssize_t)len) {
		snprintf(why, sizeof(why), "pwrite: %zd (%s)", n, strerror(errno));
		ok = 0;
	}
	if (ok && p1 - p0 != (long long)body) {
		snprintf(why, sizeof(why), "P2P bytes %lld, want %llu", p1 - p0,
			 (unsigned long long)body);
		ok = 0;
	}
	if (ok && (spin_uncache(fd) || pread(fd, host, len, pos) != (ssize_t)len ||
		   spin_pattern_check(host, pos, len, fs->seed + 1) >= 0)) {
		snprintf(why, sizeof(why), "the file does not hold the written bytes");
		ok = 0;
	}
	ksft_test_result(ok,
			 "%s: buffered pwrite from p2pmem/allocate: an aligned write by P2P (%s)\n",
			 fs->name, why);
	close(fd);
	unlink(path);
}

/*
 * io_uring registered buffers in GPU memory: registration pins the pages
 * long-term without FOLL_PCI_P2PDMA, which GUP refuses for p2pdma pages, so
 * READ_FIXED/WRITE_FIXED with GPU memory cannot exist; registration fails
 * cleanly with EFAULT (io_pin_pages() turns the pages it could not pin into
 * EFAULT), as Documentation/spin/router.rst says.
 */
static void test_fixed(void)
{
	struct io_uring_params p = { 0 };
	struct iovec iov = { map, MAP_LEN };
	int ring, ret, e = 0;

	ring = syscall(__NR_io_uring_setup, 4, &p);
	if (ring < 0) {
		ksft_test_result_fail("io_uring_setup: %s\n", strerror(errno));
		return;
	}
	ret = syscall(__NR_io_uring_register, ring, IORING_REGISTER_BUFFERS, &iov, 1);
	if (ret)
		e = errno;
	close(ring);
	ksft_test_result(ret == -1 && e == EFAULT,
			 "io_uring buffer registration of GPU memory: %d (%s), want EFAULT\n",
			 ret, ret ? strerror(e) : "registered");
}

static void fs_setup(struct fs *fs, int slot)
{
	char path[PATH_MAX];

	if (spin_fs_make(fs->serial, fs->mkfs, fs->type, fs->dir, 0, fs->dev, sizeof(fs->dev),
			 fs->disk, sizeof(fs->disk)))
		ksft_exit_fail_msg("%s on %s (%s): %s\n", fs->type, fs->dev, fs->serial,
				   strerror(errno));
	mounted[slot] = fs->dir;
	snprintf(fs->stat, sizeof(fs->stat), "/sys/block/%s/spin/stat", fs->disk);
	snprintf(path, sizeof(path), "/sys/block/%s/queue/logical_block_size", fs->disk);
	fs->lbs = spin_read_ll(path);
	if (fs->lbs < 512 || fs->lbs > 4096)
		ksft_exit_fail_msg("%s: logical block size %u\n", fs->disk, fs->lbs);
}

int main(void)
{
	struct fs all[] = {
		{ .name = "ext4", .serial = SPIN_NVME0_SERIAL, .type = "ext4",
		  .mkfs = SPIN_MKFS_EXT4, .dir = "/mnt/pm-ext4", .seed = 301 },
		{ .name = "xfs", .serial = SPIN_NVME1_SERIAL, .type = "xfs",
		  .mkfs = "mkfs.xfs -q -f", .dir = "/mnt/pm-xfs", .seed = 401 },
	};
	int fd;

	main_pid = getpid();
	ksft_print_header();
	ksft_set_plan(ARRAY_SIZE(all) * 2 + 1);
	if (spin_gpu_find(gpu, sizeof(gpu)))
		ksft_exit_fail_msg("stand-in GPU not found\n");
	if (spin_write_file("/sys/kernel/spin/mode", "auto"))
		ksft_exit_fail_msg("spin mode: %s\n", strerror(errno));
	snprintf(p2pmem, sizeof(p2pmem), "%s/p2pmem/allocate", gpu);
	fd = open(p2pmem, O_RDWR);
	map = fd < 0 ? MAP_FAILED : mmap(NULL, MAP_LEN, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	host = spin_alloc_aligned(MAP_LEN);
	if (map == MAP_FAILED || !host)
		ksft_exit_fail_msg("mmap %s: %s\n", p2pmem, strerror(errno));
	atexit(restore);

	for (size_t i = 0; i < ARRAY_SIZE(all); i++) {
		struct fs *fs = &all[i];

		fs_setup(fs, i);
		test_rw(fs);
		mounted[i] = NULL;
		if (umount(fs->dir))
			ksft_print_msg("umount %s: %s\n", fs->dir, strerror(errno));
	}
	test_fixed();
	munmap(map, MAP_LEN);
	close(fd);
	ksft_finished();
}
