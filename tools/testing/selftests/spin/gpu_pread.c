// SPDX-License-Identifier: GPL-2.0
/*
 * gpu_pread: read a file into GPU memory with a plain pread(), the way an
 * unmodified application would, and show what the GPU got.
 *
 *   gpu_pread [-b] FILE [OFFSET [LENGTH]]
 *
 * Allocates LENGTH bytes (default: the rest of the file, at most 64 MiB) of the
 * stand-in GPU's memory from its dma-buf heap (/dev/dma_heap/p2p-<bdf>), maps
 * it, preads the file into it (O_DIRECT; -b: buffered), then prints the CRC-32
 * of the file range as the CPU reads it from the file next to the CRC-32 of the
 * GPU memory as the host side of the stand-in GPU sees it. Exit status 0 only
 * if they match.
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
#include <unistd.h>

#include "spin_lib.h"

#define MiB (1024UL * 1024)

int main(int argc, char **argv)
{
	int direct = 1, opt, heap, buf, fd;
	char gpu[PATH_MAX], reply[128];
	off_t off = 0;
	size_t len;
	struct stat st;
	uint32_t file_crc = 0;
	long long phys, bar;
	double t0, t1;
	uint8_t *p, *host;
	ssize_t n;

	while ((opt = getopt(argc, argv, "b")) != -1)
		direct = opt == 'b' ? 0 : direct;
	if (optind >= argc) {
		fprintf(stderr, "usage: %s [-b] FILE [OFFSET [LENGTH]]\n", argv[0]);
		return 2;
	}
	fd = open(argv[optind], O_RDONLY | (direct ? O_DIRECT : 0));
	if (fd < 0 || fstat(fd, &st)) {
		fprintf(stderr, "%s: %s\n", argv[optind], strerror(errno));
		return 1;
	}
	if (optind + 1 < argc)
		off = strtoll(argv[optind + 1], NULL, 0);
	len = st.st_size > off ? st.st_size - off : 0;
	if (len > 64 * MiB)
		len = 64 * MiB;
	if (optind + 2 < argc)
		len = strtoull(argv[optind + 2], NULL, 0);
	if (!len) {
		fprintf(stderr, "nothing to read at offset %lld\n", (long long)off);
		return 1;
	}

	if (spin_gpu_find(gpu, sizeof(gpu))) {
		fprintf(stderr, "no stand-in GPU (1af4:1110)\n");
		return 1;
	}
	heap = spin_heap_open(gpu);
	buf = heap < 0 ? -errno : spin_heap_alloc(heap, len, O_RDWR | O_CLOEXEC, 0);
	if (buf < 0) {
		fprintf(stderr, "GPU memory from /dev/dma_heap/p2p-%s: %s\n", strrchr(gpu, '/') + 1,
			strerror(-buf));
		return 1;
	}
	p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, buf, 0);
	if (p == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	phys = spin_virt_to_phys(p);
	bar = spin_pci_bar_start(gpu, SPIN_GPU_BAR);
	printf("file   %s, offset %lld, %zu bytes\n", argv[optind], (long long)off, len);
	printf("GPU    %zu bytes from /dev/dma_heap/p2p-%s at BAR%d offset 0x%llx, mapped at %p\n",
	       len, strrchr(gpu, '/') + 1, SPIN_GPU_BAR, phys - bar, p);

	t0 = spin_now();
	n = pread(fd, p, len, off);
	t1 = spin_now();
	if (n != (ssize_t)len) {
		printf("pread  %s: %zd (%s)\n", direct ? "O_DIRECT" : "buffered", n,
		       n < 0 ? strerror(errno) : "short");
		return 1;
	}
	printf("pread  %s, %zd bytes in %.1f ms (%.0f MiB/s, emulated devices)\n",
	       direct ? "O_DIRECT" : "buffered", n, (t1 - t0) * 1e3, n / MiB / (t1 - t0));

	/* The file as the CPU reads it, through the page cache into host memory. */
	host = malloc(MiB);
	close(fd);
	fd = open(argv[optind], O_RDONLY);
	for (size_t done = 0; done < len; done += MiB) {
		size_t chunk = len - done < MiB ? len - done : MiB;

		if (pread(fd, host, chunk, off + done) != (ssize_t)chunk) {
			perror("pread (host)");
			return 1;
		}
		file_crc = spin_crc32(file_crc, host, chunk);
	}
	/* GPU memory as the host side of the stand-in GPU sees it (one contiguous range). */
	if (spin_agent(reply, sizeof(reply), "CRC %lld %zu", phys - bar, len)) {
		printf("agent  %s\n", reply);
		return 1;
	}
	printf("crc32  file, read by the CPU:              %08x\n", file_crc);
	printf("crc32  GPU memory, read by the host side:  %s  %s\n", reply + 3,
	       strtoul(reply + 3, NULL, 16) == file_crc ? "MATCH" : "MISMATCH");
	return strtoul(reply + 3, NULL, 16) == file_crc ? 0 : 1;
}
