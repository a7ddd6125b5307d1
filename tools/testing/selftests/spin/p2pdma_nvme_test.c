// SPDX-License-Identifier: GPL-2.0
/*
 * The baseline every spin test builds on: upstream p2pdma between the two
 * NVMe controllers of the rig. O_DIRECT pread from spin-nvme0's namespace
 * into spin-nvme1's CMB, mapped through p2pmem/allocate, and O_DIRECT pwrite
 * back out of it; every byte is verified. A variant is one size at one place
 * in the mapping and on the disk; after each test, all of the CMB's p2pmem
 * must be back once it is unmapped.
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

#include "../kselftest_harness.h"
#include "spin_lib.h"

#define P2P_LEN (8UL << 20)
#define HOST_LEN (4UL << 20)
/* The harness's default of 30 s is too short for the rig's throttled disks under TCG. */
#define TIMEOUT 600

/* spin-nvme1's CMB: its p2pmem/allocate mapped. */
struct cmb {
	char pcidir[PATH_MAX];
	long long avail;	/* p2pmem available before the mapping */
	char *p2p;
	int pfd;
};

/* The namespace of spin-nvme0, open O_DIRECT, and spin-nvme1's p2pmem mapped. */
FIXTURE(p2pdma) {
	struct cmb cmb;
	char *host;
	int fd;
};

FIXTURE_VARIANT(p2pdma) {
	size_t len;	/* bytes per pread */
	size_t buf_off;	/* where in the p2pmem mapping */
	off_t disk_off;	/* where on the disk */
};

FIXTURE_VARIANT_ADD(p2pdma, len_4k_at_0) { 4096, 0, 0 };
FIXTURE_VARIANT_ADD(p2pdma, len_4k_at_1m) { 4096, 4096 * 3, 1 << 20 };
FIXTURE_VARIANT_ADD(p2pdma, len_64k_at_492k) { 65536, 8192, 123 * 4096 };
FIXTURE_VARIANT_ADD(p2pdma, len_1m_at_64m) { 1 << 20, 1 << 20, 64 << 20 };
FIXTURE_VARIANT_ADD(p2pdma, len_4m_at_300m) { 4 << 20, 4 << 20, 300 << 20 };

static long long p2pmem_available(const char *pcidir)
{
	char path[PATH_MAX + 32];

	snprintf(path, sizeof(path), "%s/p2pmem/available", pcidir);
	return spin_read_ll(path);
}

/* The variant's data at its place on the disk, written from host memory; p2pmem mapped. */
FIXTURE_SETUP(p2pdma)
{
	char dev[64], path[PATH_MAX + 32];

	self->fd = -1;
	self->cmb.pfd = -1;
	self->cmb.p2p = MAP_FAILED;
	if (spin_nvme_blockdev(SPIN_NVME0_SERIAL, dev, sizeof(dev)) ||
	    spin_nvme_pcidir(SPIN_NVME1_SERIAL, self->cmb.pcidir, sizeof(self->cmb.pcidir)))
		SKIP(return, "not on the spin rig: rig devices not found");
	self->fd = open(dev, O_RDWR | O_DIRECT);
	ASSERT_LE(0, self->fd) TH_LOG("open %s: %s", dev, strerror(errno));
	self->host = spin_alloc_aligned(HOST_LEN);
	ASSERT_NE(NULL, self->host);
	spin_pattern_fill(self->host, variant->disk_off, variant->len, 1);
	ASSERT_EQ((ssize_t)variant->len,
		  pwrite(self->fd, self->host, variant->len, variant->disk_off))
		TH_LOG("pwrite %s: %s", dev, strerror(errno));

	self->cmb.avail = p2pmem_available(self->cmb.pcidir);
	snprintf(path, sizeof(path), "%s/p2pmem/allocate", self->cmb.pcidir);
	self->cmb.pfd = open(path, O_RDWR);
	ASSERT_LE(0, self->cmb.pfd) TH_LOG("%s: %s", path, strerror(errno));
	self->cmb.p2p = mmap(NULL, P2P_LEN, PROT_READ | PROT_WRITE, MAP_SHARED, self->cmb.pfd, 0);
	ASSERT_NE(MAP_FAILED, self->cmb.p2p)
		TH_LOG("mmap %lu MiB of %s's p2pmem: %s", P2P_LEN >> 20, SPIN_NVME1_SERIAL,
		       strerror(errno));
}

FIXTURE_TEARDOWN(p2pdma)
{
	if (self->cmb.p2p != MAP_FAILED)
		munmap(self->cmb.p2p, P2P_LEN);
	if (self->cmb.pfd >= 0)
		close(self->cmb.pfd);
	close(self->fd);
	free(self->host);
}

/* Unmaps p2pmem: all of it must be back in the CMB's pool. */
static void unmap_p2pmem(struct __test_metadata *_metadata, struct cmb *cmb)
{
	long long now;

	munmap(cmb->p2p, P2P_LEN);
	cmb->p2p = MAP_FAILED;
	close(cmb->pfd);
	cmb->pfd = -1;
	now = p2pmem_available(cmb->pcidir);
	EXPECT_LT(0, cmb->avail) TH_LOG("no p2pmem available before the mapping");
	EXPECT_EQ(cmb->avail, now)
		TH_LOG("p2pmem not all returned after munmap: %lld available, %lld before",
		       now, cmb->avail);
}

TEST_F_TIMEOUT(p2pdma, pread_into_p2pmem, TIMEOUT)
{
	char *buf = self->cmb.p2p + variant->buf_off;
	ssize_t got;

	memset(buf, 0xa5, variant->len);
	got = pread(self->fd, buf, variant->len, variant->disk_off);
	EXPECT_EQ((ssize_t)variant->len, got)
		TH_LOG("O_DIRECT pread %zu B @%lld into p2pmem+%zu: %s", variant->len,
		       (long long)variant->disk_off, variant->buf_off,
		       got < 0 ? strerror(errno) : "short");
	if (got == (ssize_t)variant->len) {
		EXPECT_EQ(-1, spin_pattern_check(buf, variant->disk_off, variant->len, 1))
			TH_LOG("p2pmem does not hold the disk's bytes");
	}
	unmap_p2pmem(_metadata, &self->cmb);
}

/* And back: O_DIRECT pwrite out of p2pmem, read back into host memory. */
TEST_F_TIMEOUT(p2pdma, pwrite_from_p2pmem, TIMEOUT)
{
	char *buf = self->cmb.p2p + variant->buf_off;
	off_t out = (512 << 20) + variant->disk_off;
	ssize_t put, got;

	spin_pattern_fill(buf, out, variant->len, 2);
	put = pwrite(self->fd, buf, variant->len, out);
	EXPECT_EQ((ssize_t)variant->len, put)
		TH_LOG("O_DIRECT pwrite %zu B from p2pmem+%zu @%lld: %s", variant->len,
		       variant->buf_off, (long long)out, put < 0 ? strerror(errno) : "short");
	memset(self->host, 0, variant->len);
	if (put == (ssize_t)variant->len) {
		got = pread(self->fd, self->host, variant->len, out);
		EXPECT_EQ((ssize_t)variant->len, got)
			TH_LOG("reading it back: %s", got < 0 ? strerror(errno) : "short");
		if (got == (ssize_t)variant->len) {
			EXPECT_EQ(-1, spin_pattern_check(self->host, out, variant->len, 2))
				TH_LOG("the disk does not hold the bytes written from p2pmem");
		}
	}
	unmap_p2pmem(_metadata, &self->cmb);
}

TEST_HARNESS_MAIN
