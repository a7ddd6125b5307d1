// SPDX-License-Identifier: GPL-2.0
/*
 * The baseline every spin test builds on: upstream p2pdma between the two
 * NVMe controllers of the rig. O_DIRECT pread from spin-nvme0's namespace
 * into spin-nvme1's CMB, mapped through p2pmem/allocate, and O_DIRECT pwrite
 * back out of it; every byte is verified.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../kselftest.h"
#include "spin_lib.h"

#define P2P_LEN (8UL << 20)

static const struct {
	size_t len;	/* bytes per pread */
	size_t buf_off;	/* where in the p2pmem mapping */
	off_t disk_off;	/* where on the disk */
} cases[] = {
	{ 4096, 0, 0 },
	{ 4096, 4096 * 3, 1 << 20 },
	{ 65536, 8192, 123 * 4096 },
	{ 1 << 20, 1 << 20, 64 << 20 },
	{ 4 << 20, 4 << 20, 300 << 20 },
};

int main(void)
{
	char dev[64], pcidir[PATH_MAX], path[PATH_MAX + 32];
	size_t n = ARRAY_SIZE(cases);
	const char *what;
	uint8_t *host, *p2p;
	long long avail;
	int fd, pfd;

	ksft_print_header();
	ksft_set_plan(2 * n + 2);

	if (spin_nvme_blockdev(SPIN_NVME0_SERIAL, dev, sizeof(dev)) ||
	    spin_nvme_pcidir(SPIN_NVME1_SERIAL, pcidir, sizeof(pcidir)))
		SPIN_SKIP_MISSING("rig devices not found");
	fd = open(dev, O_RDWR | O_DIRECT);
	if (fd < 0)
		ksft_exit_fail_msg("open %s: %s\n", dev, strerror(errno));

	/* The data, written from host memory. */
	host = spin_alloc_aligned(4 << 20);
	if (!host)
		ksft_exit_fail_msg("out of memory\n");
	for (size_t i = 0; i < n; i++) {
		spin_pattern_fill(host, cases[i].disk_off, cases[i].len, 1);
		if (pwrite(fd, host, cases[i].len, cases[i].disk_off) != (ssize_t)cases[i].len)
			ksft_exit_fail_msg("pwrite %s: %s\n", dev, strerror(errno));
	}

	snprintf(path, sizeof(path), "%s/p2pmem/available", pcidir);
	avail = spin_read_ll(path);
	snprintf(path, sizeof(path), "%s/p2pmem/allocate", pcidir);
	pfd = open(path, O_RDWR);
	p2p = pfd < 0 ? MAP_FAILED :
	      mmap(NULL, P2P_LEN, PROT_READ | PROT_WRITE, MAP_SHARED, pfd, 0);
	ksft_test_result(p2p != MAP_FAILED, "mmap %zu MiB of %s's p2pmem\n", P2P_LEN >> 20,
			 SPIN_NVME1_SERIAL);
	if (p2p == MAP_FAILED)
		ksft_exit_fail_msg("mmap p2pmem: %s\n", strerror(errno));

	for (size_t i = 0; i < n; i++) {
		ssize_t got, bad = -2;

		memset(p2p + cases[i].buf_off, 0xa5, cases[i].len);
		got = pread(fd, p2p + cases[i].buf_off, cases[i].len, cases[i].disk_off);
		if (got == (ssize_t)cases[i].len)
			bad = spin_pattern_check(p2p + cases[i].buf_off, cases[i].disk_off,
						 cases[i].len, 1);
		what = got < 0 ? strerror(errno) : "ok";
		ksft_test_result(bad == -1,
				 "O_DIRECT pread %zu B @%lld into p2pmem+%zu: %zd (%s), first bad %zd\n",
				 cases[i].len, (long long)cases[i].disk_off, cases[i].buf_off,
				 got, what, bad);
	}

	/* And back: O_DIRECT pwrite out of p2pmem, read back into host memory. */
	for (size_t i = 0; i < n; i++) {
		off_t out = (512 << 20) + cases[i].disk_off;
		ssize_t put, bad = -2;

		spin_pattern_fill(p2p + cases[i].buf_off, out, cases[i].len, 2);
		put = pwrite(fd, p2p + cases[i].buf_off, cases[i].len, out);
		memset(host, 0, cases[i].len);
		if (put == (ssize_t)cases[i].len &&
		    pread(fd, host, cases[i].len, out) == (ssize_t)cases[i].len)
			bad = spin_pattern_check(host, out, cases[i].len, 2);
		what = put < 0 ? strerror(errno) : "ok";
		ksft_test_result(bad == -1,
				 "O_DIRECT pwrite %zu B from p2pmem+%zu @%lld: %zd (%s), first bad %zd\n",
				 cases[i].len, cases[i].buf_off, (long long)out, put, what, bad);
	}

	munmap(p2p, P2P_LEN);
	close(pfd);
	snprintf(path, sizeof(path), "%s/p2pmem/available", pcidir);
	ksft_test_result(avail > 0 && spin_read_ll(path) == avail,
			 "p2pmem all returned after munmap (%lld available, %lld before)\n",
			 spin_read_ll(path), avail);
	close(fd);
	free(host);
	ksft_finished();
}
