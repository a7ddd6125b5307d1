// SPDX-License-Identifier: GPL-2.0
/*
 * Plain O_DIRECT pread()/pwrite() between NVMe and GPU memory mapped from the
 * stand-in GPU's dma-buf heap: from the raw namespace, a file on ext4 and a
 * file on xfs, 4 KiB to 64 MiB at offsets across the buffer, every byte
 * checked from the host side of the GPU memory. Also the same provider through
 * upstream's p2pmem/allocate, and fio with --iomem=mmapshared and crc32c verify.
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
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../kselftest.h"
#include "spin_lib.h"

#define MiB (1024UL * 1024)
#define BUF_LEN (80 * MiB)
#define DATA_LEN (80 * MiB)

static char gpu[PATH_MAX];

static const char fio_job[] = "--name=gpu --filename=/mnt/ext4/fio.dat --size=32M --bs=1M";
static const char fio_verify[] = "--rw=write --direct=1 --verify=crc32c --verify_fatal=1";

static const size_t sizes[] = { 4096, 65536, MiB, 8 * MiB, 64 * MiB };
static const size_t buf_offs[] = { 0, 3 * 4096, MiB + 4096 };
static const off_t file_offs[] = { 0, 5 * 4096, 7 * MiB };

static void write_pattern(int fd, uint64_t seed)
{
	uint8_t *buf = spin_alloc_aligned(8 * MiB);

	for (off_t off = 0; off < (off_t)DATA_LEN; off += 8 * MiB) {
		spin_pattern_fill(buf, off, 8 * MiB, seed);
		if (spin_write_uncached(fd, buf, 8 * MiB, off))
			ksft_exit_fail_msg("writing test data: %s\n", strerror(errno));
	}
	free(buf);
}

/* The read matrix: every size at every buffer and file offset that fits. */
static void read_matrix(const char *what, int fd, uint8_t *gpu_buf, uint64_t seed)
{
	int bad = 0, runs = 0;
	char why[256] = "ok";
	double t_read = 0, t_check = 0, t;

	for (size_t s = 0; s < ARRAY_SIZE(sizes); s++)
		for (size_t b = 0; b < ARRAY_SIZE(buf_offs); b++)
			for (size_t f = 0; f < ARRAY_SIZE(file_offs); f++) {
				size_t len = sizes[s];
				ssize_t got;

				if (buf_offs[b] + len > BUF_LEN || file_offs[f] + len > DATA_LEN)
					continue;
				runs++;
				t = spin_now();
				got = pread(fd, gpu_buf + buf_offs[b], len, file_offs[f]);
				t_read += spin_now() - t;
				if (got != (ssize_t)len) {
					snprintf(why, sizeof(why), "%zu B @%lld: pread %zd (%s)",
						 len, (long long)file_offs[f], got,
						 strerror(errno));
					bad++;
					continue;
				}
				t = spin_now();
				if (spin_gpu_check(gpu, gpu_buf + buf_offs[b], len, seed,
						   file_offs[f], why, sizeof(why)))
					bad++;
				t_check += spin_now() - t;
			}
	ksft_print_msg("%s: %.1f s in pread, %.1f s checking\n", what, t_read, t_check);
	ksft_test_result(!bad,
			 "%s: O_DIRECT pread into GPU memory, %d reads 4 KiB..64 MiB, %d bad (%s)\n",
			 what, runs, bad, why);
}

static void write_back(const char *what, int fd, uint8_t *gpu_buf)
{
	uint8_t *host = spin_alloc_aligned(8 * MiB);
	off_t off = DATA_LEN;	/* past the pattern the read matrices check */
	ssize_t put = -1, got = -1, bad = -2;

	if (!spin_gpu_fill(gpu, gpu_buf, 8 * MiB, 41, off)) {
		put = pwrite(fd, gpu_buf, 8 * MiB, off);
		got = pread(fd, host, 8 * MiB, off);
		bad = spin_pattern_check(host, off, 8 * MiB, 41);
	}
	ksft_test_result(put == (ssize_t)(8 * MiB) && got == put && bad == -1,
			 "%s: O_DIRECT pwrite of 8 MiB from GPU memory reads back (%zd, %zd, %zd)\n",
			 what, put, got, bad);
	free(host);
}

static int run(const char *cmd)
{
	int status = system(cmd);

	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* mkfs + mount @dev at @dir, then an uncached pattern file "data". */
static int fs_file(const char *mkfs, const char *type, const char *dev, const char *dir)
{
	char cmd[256], path[PATH_MAX];
	int fd;

	snprintf(cmd, sizeof(cmd), "%s %s >/dev/null 2>&1", mkfs, dev);
	mkdir(dir, 0755);
	if (run(cmd) || mount(dev, dir, type, 0, NULL))
		ksft_exit_fail_msg("%s on %s: %s\n", type, dev, strerror(errno));
	snprintf(path, sizeof(path), "%s/data", dir);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		ksft_exit_fail_msg("%s: %s\n", path, strerror(errno));
	write_pattern(fd, 32);
	close(fd);
	return open(path, O_RDWR | O_DIRECT);
}

int main(void)
{
	char dev0[64], dev1[64], path[PATH_MAX + 64], cmd[PATH_MAX + 512], why[256];
	uint8_t *p, *q;
	int heap, buf, fd;
	ssize_t n;

	ksft_print_header();
	ksft_set_plan(10);

	if (spin_gpu_find(gpu, sizeof(gpu)) ||
	    spin_nvme_blockdev(SPIN_NVME0_SERIAL, dev0, sizeof(dev0)) ||
	    spin_nvme_blockdev(SPIN_NVME1_SERIAL, dev1, sizeof(dev1)))
		SPIN_SKIP_MISSING("rig devices not found");
	heap = spin_heap_open(gpu);
	buf = heap < 0 ? -1 : spin_heap_alloc(heap, BUF_LEN, O_RDWR | O_CLOEXEC, 0);
	p = buf < 0 ? MAP_FAILED : mmap(NULL, BUF_LEN, PROT_READ | PROT_WRITE, MAP_SHARED, buf, 0);
	if (p == MAP_FAILED)
		ksft_exit_fail_msg("no GPU memory from the heap: %s\n", strerror(errno));

	/* Raw namespace. */
	fd = open(dev0, O_RDWR | O_DIRECT);
	if (fd < 0)
		ksft_exit_fail_msg("%s: %s\n", dev0, strerror(errno));
	write_pattern(fd, 31);
	read_matrix("raw nvme", fd, p, 31);
	write_back("raw nvme", fd, p);
	close(fd);

	/* ext4 and xfs files. */
	fd = fs_file(SPIN_MKFS_EXT4, "ext4", dev0, "/mnt/ext4");
	read_matrix("ext4", fd, p, 32);
	write_back("ext4", fd, p);
	close(fd);
	fd = fs_file(SPIN_MKFS_XFS, "xfs", dev1, "/mnt/xfs");
	read_matrix("xfs", fd, p, 32);
	write_back("xfs", fd, p);
	close(fd);

	/* Buffered pread into GPU memory from xfs: a CPU copy, correct bytes. */
	fd = open("/mnt/xfs/data", O_RDONLY);
	n = pread(fd, p + 4096, 3 * MiB + 5, 12345);
	ksft_test_result(n == (ssize_t)(3 * MiB + 5) &&
			 !spin_gpu_check(gpu, p + 4096, n, 32, 12345, why, sizeof(why)),
			 "xfs: buffered pread of 3 MiB + 5 B at an odd offset into GPU memory (%s)\n",
			 why);
	close(fd);
	/* O_DIRECT preadv: one iovec in host memory, one in GPU memory. */
	fd = open("/mnt/xfs/data", O_RDONLY | O_DIRECT);
	{
		uint8_t *host = spin_alloc_aligned(MiB);
		struct iovec iov[2] = { { host, MiB }, { p + 2 * MiB, 2 * MiB } };

		n = preadv(fd, iov, 2, 4 * MiB);
		ksft_test_result(n == (ssize_t)(3 * MiB) &&
				 spin_pattern_check(host, 4 * MiB, MiB, 32) < 0 &&
				 !spin_gpu_check(gpu, p + 2 * MiB, 2 * MiB, 32, 5 * MiB, why,
						 sizeof(why)),
				 "O_DIRECT preadv mixing host and GPU memory: %zd (%s)\n", n, why);
		free(host);
	}
	close(fd);
	munmap(p, BUF_LEN);
	close(buf);

	/* The same provider through upstream's p2pmem/allocate: the whole matrix. */
	snprintf(path, sizeof(path), "%s/p2pmem/allocate", gpu);
	buf = open(path, O_RDWR);
	q = buf < 0 ? MAP_FAILED : mmap(NULL, BUF_LEN, PROT_READ | PROT_WRITE, MAP_SHARED, buf, 0);
	if (q == MAP_FAILED)
		ksft_exit_fail_msg("mmap p2pmem/allocate: %s\n", strerror(errno));
	fd = open("/mnt/ext4/data", O_RDONLY | O_DIRECT);
	read_matrix("ext4 into p2pmem/allocate", fd, q, 32);
	close(fd);
	munmap(q, BUF_LEN);
	close(buf);

	/* fio writes and verifies (crc32c) with its buffers in GPU memory. */
	snprintf(cmd, sizeof(cmd), "fio %s --iomem=mmapshared:%s %s >/tmp/fio.log 2>&1", fio_job,
		 path, fio_verify);
	ksft_test_result(run(cmd) == 0, "fio --iomem=mmapshared:p2pmem/allocate, verify=crc32c\n");
	if (run("grep -q 'err= 0' /tmp/fio.log") != 0)
		run("cat /tmp/fio.log >&2");

	umount("/mnt/ext4");
	umount("/mnt/xfs");
	close(heap);
	ksft_finished();
}
