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
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../kselftest.h"
#include "spin_lib.h"

#define MiB (1024UL * 1024)

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

/* A file on tmpfs holding the pattern of seed @seed. */
static int pattern_file(size_t len, uint64_t seed, int oflags)
{
	char *buf = malloc(len);
	int fd = open("/tmp/dmabuf_heap_test.dat", O_RDWR | O_CREAT | O_TRUNC, 0600);

	if (fd < 0 || !buf)
		ksft_exit_fail_msg("pattern file: %s\n", strerror(errno));
	spin_pattern_fill(buf, 0, len, seed);
	if (write(fd, buf, len) != (ssize_t)len)
		ksft_exit_fail_msg("pattern file write: %s\n", strerror(errno));
	free(buf);
	close(fd);
	return open("/tmp/dmabuf_heap_test.dat", O_RDONLY | oflags);
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

int main(void)
{
	char why[256];
	long long avail0, avail;
	int heap, fd, fd2, ret, status, file;
	uint8_t *p, *q, *part;
	size_t n;
	pid_t pid;

	ksft_print_header();
	ksft_set_plan(22);

	if (spin_gpu_find(gpu, sizeof(gpu)))
		SPIN_SKIP_MISSING("stand-in GPU not found");
	heap = spin_heap_open(gpu);
	if (heap < 0)
		ksft_exit_fail_msg("no dma-buf heap for %s: %s\n", gpu, strerror(errno));
	avail0 = p2pmem_available();
	ksft_print_msg("GPU %s: %lld bytes of p2pmem available\n", gpu, avail0);
	{
		char node[PATH_MAX + 32];
		struct stat st;

		snprintf(node, sizeof(node), "/dev/dma_heap/p2p-%s", strrchr(gpu, '/') + 1);
		ksft_test_result(!stat(node, &st) && (st.st_mode & 0777) == 0600 && st.st_uid == 0,
				 "%s is root-only (mode %o)\n", node, st.st_mode & 0777);
	}

	/* 1-3: allocate, map, CPU stores reach GPU memory, GPU writes reach the CPU. */
	fd = spin_heap_alloc(heap, 4 * MiB, O_RDWR | O_CLOEXEC, 0);
	ksft_test_result(fd >= 0, "allocate 4 MiB (fd %d)\n", fd);
	if (fd < 0)
		ksft_exit_fail_msg("cannot allocate: %s\n", strerror(-fd));
	p = map(fd, 4 * MiB, PROT_READ | PROT_WRITE, MAP_SHARED, 0);
	ksft_test_result(p != MAP_FAILED, "mmap 4 MiB MAP_SHARED\n");
	if (p == MAP_FAILED)
		ksft_exit_fail_msg("cannot map: %s\n", strerror(errno));
	/*
	 * Pages are mapped on first touch, 2 MiB at a time, not in mmap()
	 * (whose population held the mmap lock for the whole buffer).
	 */
	{
		uint8_t *byte = p + 3 * MiB;
		long long before = rss_kib(p), after;

		*byte = 1;
		after = rss_kib(p);
		ksft_test_result(before == 0 && after == 2048,
				 "mapped on first touch: %lld KiB resident after mmap, %lld KiB after one store\n",
				 before, after);
	}
	spin_pattern_fill(p, 0, 4 * MiB, 11);
	ret = spin_gpu_check(gpu, p, 4 * MiB, 11, 0, why, sizeof(why));
	ksft_test_result(!ret, "CPU stores through the mapping land in GPU memory (%s)\n", why);
	ret = spin_gpu_fill(gpu, p + MiB, MiB, 12, 0);
	ksft_test_result(!ret && spin_pattern_check(p + MiB, 0, MiB, 12) < 0,
			 "GPU memory written by the host reads back through the mapping\n");

	/* 4-7: bad requests to the heap. */
	ret = spin_heap_alloc(heap, MiB, O_RDWR, 1);
	ksft_test_result(ret == -EINVAL, "heap_flags != 0: %s\n", strerror(-ret));
	ret = spin_heap_alloc(heap, 0, O_RDWR, 0);
	ksft_test_result(ret == -EINVAL, "zero length: %s\n", strerror(ret < 0 ? -ret : 0));
	fd2 = spin_heap_alloc(heap, 4097, O_RDWR, 0);
	ksft_test_result(fd2 >= 0 && lseek(fd2, 0, SEEK_END) == 8192,
			 "4097 bytes round up to 8192 (size %lld)\n",
			 fd2 >= 0 ? (long long)lseek(fd2, 0, SEEK_END) : -1LL);
	if (fd2 >= 0)
		close(fd2);
	ret = spin_heap_alloc(heap, 1ULL << 40, O_RDWR, 0);
	ksft_test_result(ret == -ENOMEM, "1 TiB: %s\n", strerror(ret < 0 ? -ret : 0));

	/* 8-10: bad and partial mappings. */
	q = map(fd, 8 * MiB, PROT_READ | PROT_WRITE, MAP_SHARED, 0);
	ksft_test_result(q == MAP_FAILED && errno == EINVAL, "mmap past the end: EINVAL\n");
	q = map(fd, MiB, PROT_READ | PROT_WRITE, MAP_PRIVATE, 0);
	ksft_test_result(q == MAP_FAILED && errno == EINVAL, "MAP_PRIVATE: EINVAL\n");
	part = map(fd, MiB, PROT_READ | PROT_WRITE, MAP_SHARED, MiB);
	ksft_test_result(part != MAP_FAILED &&
			 spin_virt_to_phys(part) == spin_virt_to_phys(p + MiB) &&
			 spin_pattern_check(part, 0, MiB, 12) < 0,
			 "mmap at offset 1 MiB maps that part of the buffer\n");
	if (part != MAP_FAILED)
		munmap(part, MiB);

	/* 11: the fd closed while mapped: the mapping stays valid. */
	close(fd);
	spin_pattern_fill(p, 0, 4 * MiB, 13);
	ret = spin_gpu_check(gpu, p, 4 * MiB, 13, 0, why, sizeof(why));
	ksft_test_result(!ret && p2pmem_available() == avail0 - 4 * (long long)MiB,
			 "fd closed while mapped: mapping valid, memory still held (%s)\n", why);

	/* 12: fork: the child writes through the inherited mapping. */
	pid = fork();
	if (pid == 0) {
		spin_pattern_fill(p, 0, MiB, 14);
		_exit(0);
	}
	waitpid(pid, &status, 0);
	ret = spin_gpu_check(gpu, p, MiB, 14, 0, why, sizeof(why));
	ksft_test_result(WIFEXITED(status) && !WEXITSTATUS(status) && !ret,
			 "fork: child's stores through the mapping reach GPU memory (%s)\n", why);

	/* 13-14: read targets that are not writable GPU memory. */
	file = pattern_file(MiB, 15, 0);
	fd2 = spin_heap_alloc(heap, MiB, O_RDWR | O_CLOEXEC, 0);
	q = map(fd2, MiB, PROT_READ, MAP_SHARED, 0);
	n = q == MAP_FAILED ? 0 : (size_t)pread(file, q, 4096, 0);
	ksft_test_result(q != MAP_FAILED && n == (size_t)-1 && errno == EFAULT,
			 "pread into a read-only mapping: EFAULT\n");
	if (q != MAP_FAILED)
		munmap(q, MiB);
	close(fd2);
	n = pread(file, q, 4096, 0);
	ksft_test_result(n == (size_t)-1 && errno == EFAULT,
			 "pread into an unmapped range: EFAULT\n");

	/* 15: buffered pread into GPU memory returns the file's bytes (a CPU copy). */
	n = pread(file, p, MiB, 0);
	ret = spin_gpu_check(gpu, p, MiB, 15, 0, why, sizeof(why));
	ksft_test_result(n == MiB && !ret, "buffered pread into GPU memory: %zd bytes (%s)\n",
			 n, why);

	/* 16: one iovec in host memory, one in GPU memory. */
	{
		char *host = malloc(MiB);
		struct iovec iov[2] = { { host, MiB / 2 }, { p + 2 * MiB, MiB / 2 } };

		n = preadv(file, iov, 2, 0);
		ret = spin_gpu_check(gpu, p + 2 * MiB, MiB / 2, 15, MiB / 2, why, sizeof(why));
		ksft_test_result(n == MiB && spin_pattern_check(host, 0, MiB / 2, 15) < 0 && !ret,
				 "preadv mixing host and GPU memory (%s)\n", why);
		free(host);
	}
	close(file);

	/* 17: the last mapping gone: the memory returns to the provider. */
	munmap(p, 4 * MiB);
	ksft_test_result(p2pmem_available() == avail0,
			 "all memory back after the last munmap (%lld)\n",
			 p2pmem_available());

	/* 18-19: exhausting the BAR, then freeing everything. */
	{
		int fds[1024], nfds = 0;

		for (;;) {
			ret = spin_heap_alloc(heap, 16 * MiB, O_RDWR | O_CLOEXEC, 0);
			if (ret < 0 || nfds == 1024)
				break;
			fds[nfds++] = ret;
		}
		avail = p2pmem_available();
		ksft_test_result(ret == -ENOMEM && avail < (long long)(16 * MiB),
				 "exhaustion: ENOMEM after %d x 16 MiB (%lld bytes left)\n",
				 nfds, avail);
		while (nfds)
			close(fds[--nfds]);
	}
	ksft_test_result(p2pmem_available() == avail0,
			 "nothing leaked: %lld available, %lld at start\n",
			 p2pmem_available(), avail0);
	close(heap);
	ksft_finished();
}
