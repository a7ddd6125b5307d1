// SPDX-License-Identifier: GPL-2.0
/*
 * Read a file into GPU memory with plain pread(), write it out again with
 * plain pwrite(). Needs only libc and the kernel's uapi headers.
 *
 *   gpu_pread_example HEAP IN OUT LENGTH
 *   e.g. gpu_pread_example /dev/dma_heap/p2p-0000:05:00.0 data.bin copy.bin 4194304
 *
 * Exit status 0 if all went well, else 1.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>
#include <linux/dma-heap.h>

static uint32_t crc32(const unsigned char *p, size_t n)	/* zlib's CRC-32 */
{
	uint32_t c = ~0u;

	while (n--) {
		c ^= *p++;
		for (int k = 0; k < 8; k++)
			c = c >> 1 ^ (0xEDB88320 & -(c & 1));
	}
	return ~c;
}

int main(int argc, char **argv)
{
	struct dma_heap_allocation_data alloc = { .fd_flags = O_RDWR | O_CLOEXEC };
	int heap, in, out;
	unsigned char *gpu;
	ssize_t n;

	if (argc != 5) {
		fprintf(stderr, "usage: %s HEAP IN OUT LENGTH\n", argv[0]);
		return 1;
	}
	alloc.len = strtoull(argv[4], NULL, 0);

	/* GPU memory: a dma-buf from the GPU's DMA-BUF heap, mapped shared. */
	heap = open(argv[1], O_RDONLY | O_CLOEXEC);
	if (heap < 0 || ioctl(heap, DMA_HEAP_IOCTL_ALLOC, &alloc)) {
		perror(argv[1]);
		return 1;
	}
	gpu = mmap(NULL, alloc.len, PROT_READ | PROT_WRITE, MAP_SHARED, alloc.fd, 0);
	if (gpu == MAP_FAILED) {
		perror("mmap");
		return 1;
	}

	/* Ordinary buffered I/O: the kernel picks page cache or P2P DMA. */
	in = open(argv[2], O_RDONLY);
	n = in < 0 ? -1 : pread(in, gpu, alloc.len, 0);
	if (n != (ssize_t)alloc.len) {
		fprintf(stderr, "%s: %s\n", argv[2], n < 0 ? strerror(errno) : "short read");
		return 1;
	}
	out = open(argv[3], O_WRONLY | O_CREAT | O_TRUNC, 0644);
	n = out < 0 ? -1 : pwrite(out, gpu, alloc.len, 0);
	if (n != (ssize_t)alloc.len) {
		fprintf(stderr, "%s: %s\n", argv[3], n < 0 ? strerror(errno) : "short write");
		return 1;
	}

	/* The CPU reads GPU memory through the mapping too (slowly, on a real GPU). */
	printf("%llu bytes from %s through GPU memory to %s, crc32 %08x\n",
	       (unsigned long long)alloc.len, argv[2], argv[3], crc32(gpu, alloc.len));

	munmap(gpu, alloc.len);
	close(alloc.fd);
	close(heap);
	close(in);
	close(out);
	return 0;
}
