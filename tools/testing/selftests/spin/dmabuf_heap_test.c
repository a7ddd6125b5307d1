// SPDX-License-Identifier: GPL-2.0
/*
 * GPU memory as a dma-buf: the p2pdma heap of the stand-in GPU
 * (/dev/dma_heap/p2p-<bdf>). Allocation, mapping, what the host side of GPU
 * memory sees, lifetime, and every bad input with its defined result.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../kselftest_harness.h"
#include "spin_lib.h"

#define MiB (1024UL * 1024)
#define BUF_LEN (4 * MiB)
#define PATTERN_FILE "/tmp/dmabuf_heap_test.dat"
/* The host-side agent answers over a serial port: a lost answer costs 25 s. */
#define TIMEOUT 120

static char gpu[PATH_MAX];

static long long p2pmem_available(void)
{
	char path[PATH_MAX + 32];

	snprintf(path, sizeof(path), "%s/p2pmem/available", gpu);
	return spin_read_ll(path);
}

static void *map(int fd, size_t len, int prot, int flags, off_t off)
{
	return mmap(NULL, len, prot, flags, fd, off);
}

/* A file on tmpfs holding the pattern of seed @seed, open read-only; -1 with errno. */
static int pattern_file(size_t len, uint64_t seed)
{
	char *buf = malloc(len);
	int fd = open(PATTERN_FILE, O_RDWR | O_CREAT | O_TRUNC, 0600);
	ssize_t n = -1;

	if (fd >= 0 && buf) {
		spin_pattern_fill(buf, 0, len, seed);
		n = write(fd, buf, len);
	}
	free(buf);
	if (fd >= 0)
		close(fd);
	if (n != (ssize_t)len) {
		if (n >= 0)
			errno = EIO;
		return -1;
	}
	return open(PATTERN_FILE, O_RDONLY);
}

/* Resident KiB of the mapping that starts at @addr, from /proc/self/smaps; -1 if none. */
static long long rss_kib(const void *addr)
{
	FILE *f = fopen("/proc/self/smaps", "r");
	char line[256], want[32];
	long long kib = -1;
	int in = 0;

	snprintf(want, sizeof(want), "%lx-", (unsigned long)addr);
	while (f && fgets(line, sizeof(line), f)) {
		if (strchr(line, '-') && strchr(line, ' ') && strchr(line, '-') < strchr(line, ' '))
			in = !strncmp(line, want, strlen(want));
		else if (in && sscanf(line, "Rss: %lld kB", &kib) == 1)
			break;
	}
	if (f)
		fclose(f);
	return kib;
}

/* The heap of the stand-in GPU, and the provider's free memory before the test. */
FIXTURE(heap) {
	long long avail0;
	int heap;
};

FIXTURE_SETUP(heap)
{
	if (spin_gpu_find(gpu, sizeof(gpu)))
		SKIP(return, "not on the spin rig: stand-in GPU not found");
	self->heap = spin_heap_open(gpu);
	ASSERT_LE(0, self->heap) TH_LOG("no dma-buf heap for %s: %s", gpu, strerror(errno));
	self->avail0 = p2pmem_available();
}

FIXTURE_TEARDOWN(heap)
{
	close(self->heap);
}

TEST_F(heap, root_only)
{
	char node[PATH_MAX + 32];
	struct stat st;

	snprintf(node, sizeof(node), "/dev/dma_heap/p2p-%s", strrchr(gpu, '/') + 1);
	ASSERT_EQ(0, stat(node, &st)) TH_LOG("%s: %s", node, strerror(errno));
	EXPECT_EQ(0600U, st.st_mode & 0777) TH_LOG("%s has mode %o", node, st.st_mode & 0777);
	EXPECT_EQ(0U, st.st_uid) TH_LOG("%s belongs to uid %u", node, st.st_uid);
}

TEST_F(heap, heap_flags_einval)
{
	EXPECT_EQ(-EINVAL, spin_heap_alloc(self->heap, MiB, O_RDWR, 1));
}

TEST_F(heap, zero_length_einval)
{
	EXPECT_EQ(-EINVAL, spin_heap_alloc(self->heap, 0, O_RDWR, 0));
}

/* 4097 bytes round up to two pages. */
TEST_F(heap, length_rounded_up)
{
	int fd = spin_heap_alloc(self->heap, 4097, O_RDWR, 0);

	ASSERT_LE(0, fd) TH_LOG("4097 bytes: %s", strerror(-fd));
	EXPECT_EQ(8192, lseek(fd, 0, SEEK_END));
	close(fd);
}

TEST_F(heap, one_tib_enomem)
{
	EXPECT_EQ(-ENOMEM, spin_heap_alloc(self->heap, 1ULL << 40, O_RDWR, 0));
}

/* Exhausting the BAR 16 MiB at a time gives ENOMEM; freeing it all leaks nothing. */
TEST_F(heap, exhaustion_enomem_nothing_leaked)
{
	int fds[1024], nfds = 0, ret;
	long long avail;

	for (;;) {
		ret = spin_heap_alloc(self->heap, 16 * MiB, O_RDWR | O_CLOEXEC, 0);
		if (ret < 0 || nfds == 1024)
			break;
		fds[nfds++] = ret;
	}
	avail = p2pmem_available();
	TH_LOG("%d x 16 MiB allocated, %lld bytes left of %lld", nfds, avail, self->avail0);
	EXPECT_EQ(-ENOMEM, ret) TH_LOG("after %d x 16 MiB", nfds);
	EXPECT_GT((long long)(16 * MiB), avail) TH_LOG("%lld bytes left", avail);
	while (nfds)
		close(fds[--nfds]);
	EXPECT_EQ(self->avail0, p2pmem_available()) TH_LOG("leaked after freeing everything");
}

/*
 * The stand-in GPU's memory is registered in folios (p2pdma_bar's default
 * folio_order, 12): its first 16 MiB in 2 MiB folios, the rest in 16 MiB
 * ones. A buffer takes whole folios, of the size that rounds it up least (the
 * larger of two that round it up the same), or of the other size where those
 * have no room.
 */
#define FOLIO_ORDER_FILE "/sys/kernel/debug/p2pdma_bar/folio_order"

static void expect_folio_layout(struct __test_metadata *_metadata, long long avail0)
{
	char path[PATH_MAX + 32], order[16] = "";

	ASSERT_LE(0, spin_read_file(FOLIO_ORDER_FILE, order, sizeof(order)))
		TH_LOG("%s: %s", FOLIO_ORDER_FILE, strerror(errno));
	ASSERT_EQ(12, atoi(order)) TH_LOG("the rig registers its GPU in 16 MiB folios");
	snprintf(path, sizeof(path), "%s/p2pmem/size", gpu);
	ASSERT_EQ(spin_read_ll(path), avail0) TH_LOG("the test needs all GPU memory free");
}

TEST_F(heap, whole_folios_taken_and_freed)
{
	static const struct {
		size_t len;
		long long taken;
	} cases[] = {
		{ 4096, 2 * MiB },			/* one 2 MiB folio */
		{ 4 * MiB + 4096, 6 * MiB },		/* three of them */
		{ 32 * MiB, 32 * MiB },			/* two 16 MiB folios */
		{ 17 * MiB, 32 * MiB },			/* 18 MiB of 2 MiB folios: no room */
		{ 16 * MiB - 4096, 16 * MiB },		/* both round up 4 KiB: the larger */
		{ 8 * MiB, 8 * MiB },			/* the last 2 MiB folios */
		{ 4096, 16 * MiB },			/* none left: a 16 MiB folio */
	};
	int fds[ARRAY_SIZE(cases)];
	long long before;

	expect_folio_layout(_metadata, self->avail0);
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		before = p2pmem_available();
		fds[i] = spin_heap_alloc(self->heap, cases[i].len, O_RDWR | O_CLOEXEC, 0);
		ASSERT_LE(0, fds[i]) TH_LOG("%zu bytes: %s", cases[i].len, strerror(-fds[i]));
		EXPECT_EQ((off_t)cases[i].len, lseek(fds[i], 0, SEEK_END));
		EXPECT_EQ(cases[i].taken, before - p2pmem_available())
			TH_LOG("a buffer of %zu bytes", cases[i].len);
	}
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++)
		close(fds[i]);
	EXPECT_EQ(self->avail0, p2pmem_available()) TH_LOG("leaked after freeing everything");
}

/*
 * A buffer that ends inside a folio: the folio's pages past the buffer hold
 * no reference, so it goes back to the pool with the buffer's last page, here
 * the mapping's, and not before.
 */
TEST_F(heap, partial_folio_freed_with_its_pages)
{
	size_t len = 17 * MiB;
	int fd;
	char *p;

	expect_folio_layout(_metadata, self->avail0);
	fd = spin_heap_alloc(self->heap, len, O_RDWR | O_CLOEXEC, 0);
	ASSERT_LE(0, fd) TH_LOG("17 MiB: %s", strerror(-fd));
	p = map(fd, len, PROT_READ | PROT_WRITE, MAP_SHARED, 0);
	ASSERT_NE(MAP_FAILED, p) TH_LOG("mmap: %s", strerror(errno));
	for (size_t off = 0; off < len; off += 2 * MiB)
		p[off] = 1;
	p[len - 1] = 1;
	close(fd);
	EXPECT_EQ(self->avail0 - (long long)(32 * MiB), p2pmem_available())
		TH_LOG("two 16 MiB folios while the mapping lives");
	munmap(p, len);
	EXPECT_EQ(self->avail0, p2pmem_available()) TH_LOG("the folios after the munmap");
}

/* A 4 MiB buffer from the heap, mapped MAP_SHARED and not yet touched. */
FIXTURE(buffer) {
	long long avail0;
	int heap, fd;
	char *p;
};

FIXTURE_SETUP(buffer)
{
	if (spin_gpu_find(gpu, sizeof(gpu)))
		SKIP(return, "not on the spin rig: stand-in GPU not found");
	self->heap = spin_heap_open(gpu);
	ASSERT_LE(0, self->heap) TH_LOG("no dma-buf heap for %s: %s", gpu, strerror(errno));
	self->avail0 = p2pmem_available();
	self->fd = spin_heap_alloc(self->heap, BUF_LEN, O_RDWR | O_CLOEXEC, 0);
	ASSERT_LE(0, self->fd) TH_LOG("allocate 4 MiB: %s", strerror(-self->fd));
	self->p = map(self->fd, BUF_LEN, PROT_READ | PROT_WRITE, MAP_SHARED, 0);
	ASSERT_NE(MAP_FAILED, self->p) TH_LOG("mmap 4 MiB MAP_SHARED: %s", strerror(errno));
}

FIXTURE_TEARDOWN(buffer)
{
	if (self->p != MAP_FAILED)
		munmap(self->p, BUF_LEN);
	if (self->fd >= 0)
		close(self->fd);
	close(self->heap);
}

/*
 * Pages are mapped on first touch, 2 MiB at a time, not in mmap()
 * (whose population held the mmap lock for the whole buffer).
 */
TEST_F(buffer, mapped_on_first_touch)
{
	char *byte = self->p + 3 * MiB;
	long long before = rss_kib(self->p), after;

	*byte = 1;
	after = rss_kib(self->p);
	EXPECT_EQ(0, before) TH_LOG("%lld KiB resident after mmap", before);
	EXPECT_EQ(2048, after) TH_LOG("%lld KiB resident after one store", after);
}

TEST_F_TIMEOUT(buffer, cpu_stores_reach_gpu, TIMEOUT)
{
	char why[256];

	spin_pattern_fill(self->p, 0, BUF_LEN, 11);
	EXPECT_EQ(0, spin_gpu_check(gpu, self->p, BUF_LEN, 11, 0, why, sizeof(why)))
		TH_LOG("CPU stores through the mapping are not in GPU memory: %s", why);
}

TEST_F_TIMEOUT(buffer, gpu_writes_reach_cpu, TIMEOUT)
{
	ASSERT_EQ(0, spin_gpu_fill(gpu, self->p + MiB, MiB, 12, 0))
		TH_LOG("the host could not write GPU memory");
	EXPECT_GT(0, spin_pattern_check(self->p + MiB, 0, MiB, 12))
		TH_LOG("GPU memory written by the host does not read back through the mapping");
}

TEST_F(buffer, mmap_past_end_einval)
{
	void *q = map(self->fd, 8 * MiB, PROT_READ | PROT_WRITE, MAP_SHARED, 0);
	int e = errno;

	EXPECT_EQ(MAP_FAILED, q);
	EXPECT_EQ(EINVAL, e) TH_LOG("%s", strerror(e));
}

TEST_F(buffer, map_private_einval)
{
	void *q = map(self->fd, MiB, PROT_READ | PROT_WRITE, MAP_PRIVATE, 0);
	int e = errno;

	EXPECT_EQ(MAP_FAILED, q);
	EXPECT_EQ(EINVAL, e) TH_LOG("%s", strerror(e));
}

/* A mapping at offset 1 MiB maps that part of the buffer: its pages and its bytes. */
TEST_F_TIMEOUT(buffer, mmap_at_offset, TIMEOUT)
{
	char *part;

	ASSERT_EQ(0, spin_gpu_fill(gpu, self->p + MiB, MiB, 12, 0))
		TH_LOG("the host could not write GPU memory");
	part = map(self->fd, MiB, PROT_READ | PROT_WRITE, MAP_SHARED, MiB);
	ASSERT_NE(MAP_FAILED, part) TH_LOG("mmap at offset 1 MiB: %s", strerror(errno));
	EXPECT_EQ(spin_virt_to_phys(self->p + MiB), spin_virt_to_phys(part))
		TH_LOG("not the pages at offset 1 MiB of the buffer");
	EXPECT_GT(0, spin_pattern_check(part, 0, MiB, 12))
		TH_LOG("not the bytes at offset 1 MiB of the buffer");
	munmap(part, MiB);
}

/*
 * The fd closed while mapped: the mapping stays valid and holds the memory;
 * the last munmap gives it back to the provider.
 */
TEST_F_TIMEOUT(buffer, mapping_outlives_fd, TIMEOUT)
{
	char why[256];

	close(self->fd);
	self->fd = -1;
	spin_pattern_fill(self->p, 0, BUF_LEN, 13);
	EXPECT_EQ(0, spin_gpu_check(gpu, self->p, BUF_LEN, 13, 0, why, sizeof(why)))
		TH_LOG("mapping not valid after close: %s", why);
	EXPECT_EQ(self->avail0 - (long long)BUF_LEN, p2pmem_available())
		TH_LOG("the memory is not held by the mapping alone");
	munmap(self->p, BUF_LEN);
	self->p = MAP_FAILED;
	EXPECT_EQ(self->avail0, p2pmem_available())
		TH_LOG("not all memory back after the last munmap");
}

/* The child's stores through the inherited mapping reach GPU memory. */
TEST_F_TIMEOUT(buffer, fork_child_stores, TIMEOUT)
{
	char why[256];
	int status;
	pid_t pid;

	pid = fork();
	ASSERT_LE(0, pid) TH_LOG("fork: %s", strerror(errno));
	if (pid == 0) {
		spin_pattern_fill(self->p, 0, MiB, 14);
		_exit(0);
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	EXPECT_TRUE(WIFEXITED(status) && !WEXITSTATUS(status))
		TH_LOG("child: wait status %#x", status);
	EXPECT_EQ(0, spin_gpu_check(gpu, self->p, MiB, 14, 0, why, sizeof(why)))
		TH_LOG("the child's stores are not in GPU memory: %s", why);
}

/*
 * A 4 KiB read of a pattern file into a read-only 1 MiB mapping of GPU
 * memory, or, if @unmap, into its range once it is unmapped and its buffer
 * closed: refused with EFAULT either way.
 */
static void pread_readonly_efault(struct __test_metadata *_metadata, int heap, bool unmap)
{
	int file, fd2, e;
	char *q;
	ssize_t n;

	file = pattern_file(MiB, 15);
	ASSERT_LE(0, file) TH_LOG("pattern file: %s", strerror(errno));
	fd2 = spin_heap_alloc(heap, MiB, O_RDWR | O_CLOEXEC, 0);
	ASSERT_LE(0, fd2) TH_LOG("allocate 1 MiB: %s", strerror(-fd2));
	q = map(fd2, MiB, PROT_READ, MAP_SHARED, 0);
	ASSERT_NE(MAP_FAILED, q) TH_LOG("mmap PROT_READ: %s", strerror(errno));
	if (unmap) {
		munmap(q, MiB);
		close(fd2);
	}
	n = pread(file, q, 4096, 0);
	e = errno;
	EXPECT_EQ(-1, n);
	EXPECT_EQ(EFAULT, e) TH_LOG("%s", strerror(e));
	if (!unmap) {
		munmap(q, MiB);
		close(fd2);
	}
	close(file);
}

/* A read into a read-only mapping of GPU memory is refused. */
TEST_F(buffer, pread_into_readonly_mapping_efault)
{
	pread_readonly_efault(_metadata, self->heap, false);
}

/* A read into the range of a GPU mapping just unmapped is refused. */
TEST_F(buffer, pread_into_unmapped_range_efault)
{
	pread_readonly_efault(_metadata, self->heap, true);
}

/* A buffered pread into GPU memory returns the file's bytes (a CPU copy). */
TEST_F_TIMEOUT(buffer, buffered_pread_into_gpu, TIMEOUT)
{
	char why[256];
	int file;
	ssize_t n;

	file = pattern_file(MiB, 15);
	ASSERT_LE(0, file) TH_LOG("pattern file: %s", strerror(errno));
	n = pread(file, self->p, MiB, 0);
	EXPECT_EQ((ssize_t)MiB, n) TH_LOG("pread: %s", strerror(errno));
	EXPECT_EQ(0, spin_gpu_check(gpu, self->p, MiB, 15, 0, why, sizeof(why)))
		TH_LOG("GPU memory does not hold the file's bytes: %s", why);
	close(file);
}

/* One iovec in host memory, one in GPU memory. */
TEST_F_TIMEOUT(buffer, preadv_host_and_gpu, TIMEOUT)
{
	char *host = malloc(MiB), why[256];
	struct iovec iov[2] = { { host, MiB / 2 }, { self->p + 2 * MiB, MiB / 2 } };
	int file;
	ssize_t n;

	ASSERT_NE(NULL, host);
	file = pattern_file(MiB, 15);
	ASSERT_LE(0, file) TH_LOG("pattern file: %s", strerror(errno));
	n = preadv(file, iov, 2, 0);
	EXPECT_EQ((ssize_t)MiB, n) TH_LOG("preadv: %s", strerror(errno));
	EXPECT_GT(0, spin_pattern_check(host, 0, MiB / 2, 15))
		TH_LOG("host memory does not hold the file's bytes");
	EXPECT_EQ(0, spin_gpu_check(gpu, self->p + 2 * MiB, MiB / 2, 15, MiB / 2, why,
				    sizeof(why)))
		TH_LOG("GPU memory does not hold the file's bytes: %s", why);
	free(host);
	close(file);
}

TEST_HARNESS_MAIN
