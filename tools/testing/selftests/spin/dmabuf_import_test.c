// SPDX-License-Identifier: GPL-2.0
/*
 * A peer device importing a GPU dma-buf gets PCI bus addresses when it can
 * reach the GPU by peer-to-peer DMA, and is refused when it cannot, or when
 * it does not take peer memory or cannot be revoked (as vfio-pci's exporter
 * refuses them: their mappings would hold up the GPU's unbind). The rig has
 * no importing driver, so the exporter's test importer in debugfs
 * (/sys/kernel/debug/spin_exporter/import_check, see
 * Documentation/spin/gpu-memory.rst) attaches a PCI device and maps the buffer.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../kselftest.h"
#include "spin_lib.h"

#define CHECK "/sys/kernel/debug/spin_exporter/import_check"
#define MiB (1024UL * 1024)

/* Ask the test importer; 0 or -errno of the write. @result gets what it recorded. */
static int import(const char *request, char *result, size_t len)
{
	int fd = open(CHECK, O_RDWR), ret = 0;

	if (fd < 0)
		return -ENOENT;
	if (write(fd, request, strlen(request)) < 0)
		ret = -errno;
	close(fd);
	if (spin_read_file(CHECK, result, len))
		snprintf(result, len, "?");
	return ret;
}

int main(void)
{
	char gpu[PATH_MAX], nvme0[PATH_MAX], nvme2[PATH_MAX], req[128], res[256];
	int heap, buf, big, ret;

	ksft_print_header();
	ksft_set_plan(9);
	if (spin_gpu_find(gpu, sizeof(gpu)) ||
	    spin_nvme_pcidir(SPIN_NVME0_SERIAL, nvme0, sizeof(nvme0)) ||
	    spin_nvme_pcidir(SPIN_NVME2_SERIAL, nvme2, sizeof(nvme2)))
		SPIN_SKIP_MISSING("rig devices not found");
	heap = spin_heap_open(gpu);
	buf = heap < 0 ? -1 : spin_heap_alloc(heap, 4 * MiB, O_RDWR | O_CLOEXEC, 0);
	if (buf < 0)
		ksft_exit_fail_msg("no GPU memory\n");

	snprintf(req, sizeof(req), "%d %s", buf, strrchr(nvme0, '/') + 1);
	ret = import(req, res, sizeof(res));
	ksft_test_result(!ret && !strncmp(res, "ok ", 3) && strstr(res, "len=4194304"),
			 "NVMe behind the same switch imports the buffer: %s\n", res);
	ksft_test_result(!ret && strstr(res, "bus_address=1"),
			 "... and gets PCI bus addresses\n");

	snprintf(req, sizeof(req), "%d %s", buf, strrchr(nvme2, '/') + 1);
	ret = import(req, res, sizeof(res));
	ksft_test_result(ret == -EINVAL && !strncmp(res, "error", 5),
			 "NVMe outside the switch is refused: %s (%s)\n", strerror(-ret), res);

	snprintf(req, sizeof(req), "%d %s nopeer", buf, strrchr(nvme0, '/') + 1);
	ret = import(req, res, sizeof(res));
	ksft_test_result(ret == -EOPNOTSUPP,
			 "an importer that does not take peer memory is refused: %s\n",
			 strerror(-ret));
	snprintf(req, sizeof(req), "%d %s pinned", buf, strrchr(nvme0, '/') + 1);
	ret = import(req, res, sizeof(res));
	ksft_test_result(ret == -EOPNOTSUPP,
			 "a pinned (static) importer, which cannot be revoked, is refused: %s\n",
			 strerror(-ret));
	snprintf(req, sizeof(req), "%d %s sideways", buf, strrchr(nvme0, '/') + 1);
	ret = import(req, res, sizeof(res));
	ksft_test_result(ret == -EINVAL, "an unknown importer kind: %s\n", strerror(-ret));

	/* The table is built 2 MiB at a time; contiguous memory still gives one segment. */
	big = spin_heap_alloc(heap, 64 * MiB, O_RDWR | O_CLOEXEC, 0);
	snprintf(req, sizeof(req), "%d %s", big, strrchr(nvme0, '/') + 1);
	ret = big < 0 ? big : import(req, res, sizeof(res));
	ksft_test_result(!ret && strstr(res, "segments=1 ") && strstr(res, "len=67108864"),
			 "a 64 MiB buffer maps as one segment: %s\n", res);
	if (big >= 0)
		close(big);

	snprintf(req, sizeof(req), "%d %s", 0, strrchr(nvme0, '/') + 1);
	ret = import(req, res, sizeof(res));
	ksft_test_result(ret < 0, "an fd that is not a dma-buf is refused: %s\n", strerror(-ret));
	ret = import("nonsense", res, sizeof(res));
	ksft_test_result(ret == -EINVAL, "a malformed request: %s\n", strerror(-ret));

	close(buf);
	close(heap);
	ksft_finished();
}
