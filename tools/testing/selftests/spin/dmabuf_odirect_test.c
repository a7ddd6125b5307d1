// SPDX-License-Identifier: GPL-2.0
/*
 * Plain O_DIRECT pread()/pwrite() between NVMe and GPU memory mapped from the
 * stand-in GPU's dma-buf heap: from the raw namespace, a file on ext4 and a
 * file on xfs (a variant each), 4 KiB to 64 MiB at offsets across the buffer,
 * every byte checked from the host side of the GPU memory. Also the same
 * provider through upstream's p2pmem/allocate, and fio with
 * --iomem=mmapshared and crc32c verify.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../kselftest_harness.h"
#include "spin_lib.h"

#define MiB (1024UL * 1024)
#define BUF_LEN (80 * MiB)
#define DATA_LEN (80 * MiB)
/*
 * What a fixture writes: enough for every test but the read matrix, which
 * writes the rest of DATA_LEN itself.
 */
#define SETUP_LEN (8 * MiB)
/* The harness's default of 30 s is too short for the rig's throttled disks under TCG. */
#define TIMEOUT 600

static char gpu[PATH_MAX];

static const char fio_job[] = "--name=gpu --filename=/mnt/ext4/fio.dat --size=32M --bs=1M";
static const char fio_verify[] = "--rw=write --direct=1 --verify=crc32c --verify_fatal=1";

static const size_t sizes[] = { 4096, 65536, MiB, 8 * MiB, 64 * MiB };
static const size_t buf_offs[] = { 0, 3 * 4096, MiB + 4096 };
static const off_t file_offs[] = { 0, 5 * 4096, 7 * MiB };

/*
 * Where the data is: the raw namespace (no type), or the file "data" of a
 * filesystem made and mounted for the test. All hold the pattern of their
 * seed.
 */
static struct spin_fs disks[] = {
	{ .name = "raw nvme", .serial = SPIN_NVME0_SERIAL, .seed = 31 },
	SPIN_FS_EXT4("/mnt/ext4", 32),
	SPIN_FS_XFS("/mnt/xfs", 32),
};

enum { RAW, EXT4, XFS };

/* One of @disks set up for a test, and GPU memory from the heap if it has any. */
struct target {
	struct spin_fs *fs;
	int fd;		/* the namespace or the file, open O_DIRECT */
	int heap, buf;
	char *gmem;	/* BUF_LEN bytes of GPU memory, or MAP_FAILED */
};

static int run(const char *cmd)
{
	int status = system(cmd);

	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* The pattern of @seed in [@from, @to) of @fd, 8 MiB at a time. */
static int write_pattern(int fd, unsigned long long seed, off_t from, off_t to)
{
	char *buf = spin_alloc_aligned(8 * MiB);
	int ret = buf ? 0 : -1;

	for (off_t off = from; !ret && off < to; off += 8 * MiB) {
		spin_pattern_fill(buf, off, 8 * MiB, seed);
		ret = spin_write_uncached(fd, buf, 8 * MiB, off);
	}
	free(buf);
	return ret;
}

/* What the rig lacks for disks[@i], or NULL. */
static const char *missing(int i)
{
	char dev[64];

	if (spin_gpu_find(gpu, sizeof(gpu)))
		return "stand-in GPU not found";
	if (spin_nvme_blockdev(disks[i].serial, dev, sizeof(dev)))
		return disks[i].serial;
	return NULL;
}

/*
 * The raw namespace, or a new filesystem and its file "data", holding
 * SETUP_LEN bytes of the pattern and open O_DIRECT in @t->fd. With @heap,
 * @t->gmem gets BUF_LEN bytes of GPU memory from the heap.
 */
static void target_setup(struct __test_metadata *_metadata, struct target *t, int i, bool heap)
{
	struct spin_fs *fs = &disks[i];
	int fd;

	t->fs = fs;
	t->fd = -1;
	t->heap = -1;
	t->buf = -1;
	t->gmem = MAP_FAILED;
	if (!fs->type) {
		ASSERT_EQ(0, spin_nvme_blockdev(fs->serial, fs->dev, sizeof(fs->dev)));
		t->fd = open(fs->dev, O_RDWR | O_DIRECT);
		ASSERT_LE(0, t->fd) TH_LOG("%s: %s", fs->dev, strerror(errno));
		ASSERT_EQ(0, write_pattern(t->fd, fs->seed, 0, SETUP_LEN))
			TH_LOG("writing test data: %s", strerror(errno));
	} else {
		ASSERT_EQ(0, spin_fs_setup(fs, 0))
			TH_LOG("%s on %s (%s): %s", fs->type, fs->dev, fs->serial, strerror(errno));
		fd = open(fs->path, O_RDWR | O_CREAT | O_TRUNC, 0644);
		ASSERT_LE(0, fd) TH_LOG("%s: %s", fs->path, strerror(errno));
		ASSERT_EQ(0, write_pattern(fd, fs->seed, 0, SETUP_LEN))
			TH_LOG("writing test data: %s", strerror(errno));
		close(fd);
		t->fd = open(fs->path, O_RDWR | O_DIRECT);
		ASSERT_LE(0, t->fd) TH_LOG("%s: %s", fs->path, strerror(errno));
	}
	if (!heap)
		return;
	t->heap = spin_heap_open(gpu);
	t->buf = t->heap < 0 ? -1 : spin_heap_alloc(t->heap, BUF_LEN, O_RDWR | O_CLOEXEC, 0);
	t->gmem = t->buf < 0 ? MAP_FAILED :
		  mmap(NULL, BUF_LEN, PROT_READ | PROT_WRITE, MAP_SHARED, t->buf, 0);
	ASSERT_NE(MAP_FAILED, t->gmem) TH_LOG("no GPU memory from the heap: %s", strerror(errno));
}

static void target_teardown(struct target *t)
{
	if (t->gmem != MAP_FAILED)
		munmap(t->gmem, BUF_LEN);
	if (t->buf >= 0)
		close(t->buf);
	if (t->heap >= 0)
		close(t->heap);
	close(t->fd);
	if (t->fs->type)
		spin_fs_unmount(t->fs);
}

/*
 * The read matrix, over DATA_LEN bytes of the pattern: every size up to a
 * MiB at every buffer and file offset that fits; the larger sizes at each
 * buffer offset once, each with another file offset (the cost of a read
 * under TCG grows with its length, what it tests does not).
 */
static void read_matrix(struct __test_metadata *_metadata, const char *what, int fd,
			char *gmem, unsigned long long seed)
{
	double t_read = 0, t_check = 0, t;
	char why[256];
	int runs = 0;

	ASSERT_EQ(0, write_pattern(fd, seed, SETUP_LEN, DATA_LEN))
		TH_LOG("writing test data: %s", strerror(errno));
	for (size_t s = 0; s < ARRAY_SIZE(sizes); s++)
		for (size_t b = 0; b < ARRAY_SIZE(buf_offs); b++)
			for (size_t f = 0; f < ARRAY_SIZE(file_offs); f++) {
				size_t len = sizes[s], boff = buf_offs[b];
				off_t pos = file_offs[f];
				ssize_t got;

				if (boff + len > BUF_LEN || pos + len > DATA_LEN)
					continue;
				if (len > MiB && b != f)
					continue;
				runs++;
				t = spin_now();
				got = pread(fd, gmem + boff, len, pos);
				t_read += spin_now() - t;
				EXPECT_EQ((ssize_t)len, got)
					TH_LOG("%s: %zu B @%lld into GPU memory+%zu: %s", what,
					       len, (long long)pos, boff,
					       got < 0 ? strerror(errno) : "short");
				if (got != (ssize_t)len)
					continue;
				t = spin_now();
				EXPECT_EQ(0, spin_gpu_check(gpu, gmem + boff, len, seed, pos, why,
							    sizeof(why)))
					TH_LOG("%s: %zu B @%lld into GPU memory+%zu: %s", what,
					       len, (long long)pos, boff, why);
				t_check += spin_now() - t;
			}
	ksft_print_msg("%s: %d reads, %.1f s in pread, %.1f s checking\n", what, runs, t_read,
		       t_check);
}

/* The GPU buffer of the heap, over the raw namespace, a file on ext4, a file on xfs. */
FIXTURE(heap_buffer) {
	struct target t;
};

FIXTURE_VARIANT(heap_buffer) {
	int disk;
};

FIXTURE_VARIANT_ADD(heap_buffer, raw) { .disk = RAW };
FIXTURE_VARIANT_ADD(heap_buffer, ext4) { .disk = EXT4 };
FIXTURE_VARIANT_ADD(heap_buffer, xfs) { .disk = XFS };

FIXTURE_SETUP(heap_buffer)
{
	const char *why = missing(variant->disk);

	if (why)
		SKIP(return, "not on the spin rig: %s", why);
	target_setup(_metadata, &self->t, variant->disk, true);
}

FIXTURE_TEARDOWN(heap_buffer)
{
	target_teardown(&self->t);
}

TEST_F_TIMEOUT(heap_buffer, direct_pread_matrix, TIMEOUT)
{
	read_matrix(_metadata, self->t.fs->name, self->t.fd, self->t.gmem, self->t.fs->seed);
}

/* O_DIRECT pwrite of 8 MiB from GPU memory, past the pattern, reads back. */
TEST_F_TIMEOUT(heap_buffer, direct_pwrite_reads_back, TIMEOUT)
{
	char *host = spin_alloc_aligned(8 * MiB);
	off_t off = DATA_LEN;
	ssize_t put, got;

	ASSERT_NE(NULL, host);
	ASSERT_EQ(0, spin_gpu_fill(gpu, self->t.gmem, 8 * MiB, 41, off))
		TH_LOG("the host could not write GPU memory");
	put = pwrite(self->t.fd, self->t.gmem, 8 * MiB, off);
	EXPECT_EQ((ssize_t)(8 * MiB), put) TH_LOG("pwrite: %s", strerror(errno));
	got = pread(self->t.fd, host, 8 * MiB, off);
	EXPECT_EQ(put, got) TH_LOG("pread: %s", strerror(errno));
	EXPECT_EQ(-1, spin_pattern_check(host, off, 8 * MiB, 41))
		TH_LOG("the disk does not hold the bytes written from GPU memory");
	free(host);
}

#define TRIM_IOVS 300	/* more than a bio holds (BIO_MAX_VECS) */

static long long p2pmem_available(void)
{
	char path[PATH_MAX + 32];

	snprintf(path, sizeof(path), "%s/p2pmem/available", gpu);
	return spin_read_ll(path);
}

/*
 * O_DIRECT preadv into GPU memory of more iovecs than a bio holds, each two
 * pages of one folio long or a little more, their lengths multiples of the
 * DMA alignment but the first bio's not of the block: the block layer cuts
 * the bio back to a whole block, and the pages the cut leaves out must be
 * unpinned. The bytes are right, and once the buffer is freed the memory it
 * took is available again: no folio is kept by a leaked pin.
 */
TEST_F_TIMEOUT(heap_buffer, direct_preadv_trimmed_bio_unpins, TIMEOUT)
{
	const size_t stride = 8192, len = TRIM_IOVS * stride;
	struct iovec iov[TRIM_IOVS];
	long long avail0, avail1, lbs;
	char why[256], path[160];
	size_t total = 0;
	int buf;
	char *g;

	/* The read's block: the disk's logical block (a file's is the same here). */
	snprintf(path, sizeof(path), "/sys/block/%s/queue/logical_block_size",
		 strrchr(self->t.fs->dev, '/') + 1);
	lbs = spin_read_ll(path);
	ASSERT_LT(0, lbs) TH_LOG("%s: %s", path, strerror(errno));

	avail0 = p2pmem_available();
	buf = spin_heap_alloc(self->t.heap, len, O_RDWR | O_CLOEXEC, 0);
	ASSERT_LE(0, buf) TH_LOG("heap allocation: %s", strerror(errno));
	g = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, buf, 0);
	ASSERT_NE(MAP_FAILED, g) TH_LOG("mmap: %s", strerror(errno));
	for (int k = 0; k < TRIM_IOVS; k++) {
		iov[k].iov_base = g + k * stride;
		iov[k].iov_len = k == 0 ? 4104 : 4100;
	}
	/* The last length makes the whole read a multiple of the block. */
	for (int k = 0; k < TRIM_IOVS - 1; k++)
		total += iov[k].iov_len;
	iov[TRIM_IOVS - 1].iov_len = 4100 + (lbs - (total + 4100) % lbs) % lbs;
	total += iov[TRIM_IOVS - 1].iov_len;
	ASSERT_NE(0, (4104 + 255 * 4100) % lbs) TH_LOG("the first bio would not be cut");

	EXPECT_EQ((ssize_t)total, preadv(self->t.fd, iov, TRIM_IOVS, 0))
		TH_LOG("preadv: %s", strerror(errno));
	for (int k = 0, off = 0, bad = 0; !bad && k < TRIM_IOVS; off += iov[k].iov_len, k++) {
		bad = spin_gpu_check(gpu, iov[k].iov_base, iov[k].iov_len, self->t.fs->seed, off,
				     why, sizeof(why));
		EXPECT_EQ(0, bad) TH_LOG("iovec %d (%zu B at file offset %d): %s", k,
					 iov[k].iov_len, off, why);
	}
	munmap(g, len);
	close(buf);
	avail1 = p2pmem_available();
	EXPECT_EQ(avail0, avail1)
		TH_LOG("%lld bytes of GPU memory still taken after the buffer was freed",
		       avail0 - avail1);
}

/* The GPU buffer of the heap and the file on xfs. */
FIXTURE(xfs_file) {
	struct target t;
};

FIXTURE_SETUP(xfs_file)
{
	const char *why = missing(XFS);

	if (why)
		SKIP(return, "not on the spin rig: %s", why);
	target_setup(_metadata, &self->t, XFS, true);
}

FIXTURE_TEARDOWN(xfs_file)
{
	target_teardown(&self->t);
}

/* A buffered pread into GPU memory: a CPU copy, correct bytes. */
TEST_F_TIMEOUT(xfs_file, buffered_pread_odd_offset, TIMEOUT)
{
	const size_t len = 3 * MiB + 5;
	char *at = self->t.gmem + 4096, why[256];
	int fd = open(self->t.fs->path, O_RDONLY);
	ssize_t n;

	ASSERT_LE(0, fd) TH_LOG("%s: %s", self->t.fs->path, strerror(errno));
	n = pread(fd, at, len, 12345);
	EXPECT_EQ((ssize_t)len, n) TH_LOG("pread: %s", strerror(errno));
	if (n == (ssize_t)len) {
		EXPECT_EQ(0, spin_gpu_check(gpu, at, n, 32, 12345, why, sizeof(why)))
			TH_LOG("3 MiB + 5 B at offset 12345: %s", why);
	}
	close(fd);
}

/* O_DIRECT preadv: one iovec in host memory, one in GPU memory. */
TEST_F_TIMEOUT(xfs_file, direct_preadv_host_and_gpu, TIMEOUT)
{
	char *host = spin_alloc_aligned(MiB), why[256];
	struct iovec iov[2] = { { host, MiB }, { self->t.gmem + 2 * MiB, 2 * MiB } };
	int fd = open(self->t.fs->path, O_RDONLY | O_DIRECT);
	ssize_t n;

	ASSERT_NE(NULL, host);
	ASSERT_LE(0, fd) TH_LOG("%s: %s", self->t.fs->path, strerror(errno));
	n = preadv(fd, iov, 2, 4 * MiB);
	EXPECT_EQ((ssize_t)(3 * MiB), n) TH_LOG("preadv: %s", strerror(errno));
	if (n == (ssize_t)(3 * MiB)) {
		EXPECT_GT(0, spin_pattern_check(host, 4 * MiB, MiB, 32))
			TH_LOG("host memory does not hold the file's bytes");
		EXPECT_EQ(0, spin_gpu_check(gpu, self->t.gmem + 2 * MiB, 2 * MiB, 32, 5 * MiB,
					    why, sizeof(why)))
			TH_LOG("GPU memory: %s", why);
	}
	close(fd);
	free(host);
}

/* The file on ext4, and the provider's memory through upstream's p2pmem/allocate. */
FIXTURE(p2pmem_allocate) {
	struct target t;
	char path[PATH_MAX + 32];	/* p2pmem/allocate */
};

FIXTURE_SETUP(p2pmem_allocate)
{
	const char *why = missing(EXT4);

	if (why)
		SKIP(return, "not on the spin rig: %s", why);
	target_setup(_metadata, &self->t, EXT4, false);
	snprintf(self->path, sizeof(self->path), "%s/p2pmem/allocate", gpu);
}

FIXTURE_TEARDOWN(p2pmem_allocate)
{
	target_teardown(&self->t);
}

TEST_F_TIMEOUT(p2pmem_allocate, direct_pread_matrix, TIMEOUT)
{
	int buf = open(self->path, O_RDWR);
	char *q;

	ASSERT_LE(0, buf) TH_LOG("%s: %s", self->path, strerror(errno));
	q = mmap(NULL, BUF_LEN, PROT_READ | PROT_WRITE, MAP_SHARED, buf, 0);
	ASSERT_NE(MAP_FAILED, q) TH_LOG("mmap p2pmem/allocate: %s", strerror(errno));
	read_matrix(_metadata, "ext4 into p2pmem/allocate", self->t.fd, q, self->t.fs->seed);
	munmap(q, BUF_LEN);
	close(buf);
}

/* fio writes and verifies (crc32c) with its buffers in GPU memory. */
TEST_F_TIMEOUT(p2pmem_allocate, fio_verify_crc32c, TIMEOUT)
{
	char cmd[PATH_MAX + 512];

	snprintf(cmd, sizeof(cmd), "fio %s --iomem=mmapshared:%s %s >/tmp/fio.log 2>&1",
		 fio_job, self->path, fio_verify);
	EXPECT_EQ(0, run(cmd)) TH_LOG("fio --iomem=mmapshared:p2pmem/allocate, verify=crc32c");
	if (run("grep -q 'err= 0' /tmp/fio.log") != 0)
		run("cat /tmp/fio.log >&2");
}

TEST_HARNESS_MAIN
