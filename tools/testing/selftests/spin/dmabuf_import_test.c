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

#include "../kselftest_harness.h"
#include "spin_lib.h"

#define CHECK "/sys/kernel/debug/spin_exporter/import_check"
#define MiB (1024UL * 1024)

/* What the test importer recorded of the last request (each test runs in its own process). */
static char res[256];

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

/* A 4 MiB GPU buffer, and the PCI names of an NVMe drive inside and one outside the switch. */
FIXTURE(import) {
	char nvme0[PATH_MAX], nvme2[PATH_MAX];
	int heap, buf;
};

FIXTURE_SETUP(import)
{
	char gpu[PATH_MAX];

	self->heap = -1;
	self->buf = -1;
	if (spin_gpu_find(gpu, sizeof(gpu)) ||
	    spin_nvme_pcidir(SPIN_NVME0_SERIAL, self->nvme0, sizeof(self->nvme0)) ||
	    spin_nvme_pcidir(SPIN_NVME2_SERIAL, self->nvme2, sizeof(self->nvme2)))
		SKIP(return, "not on the spin rig: rig devices not found");
	self->heap = spin_heap_open(gpu);
	if (self->heap >= 0)
		self->buf = spin_heap_alloc(self->heap, 4 * MiB, O_RDWR | O_CLOEXEC, 0);
	ASSERT_LE(0, self->buf) TH_LOG("no GPU memory");
}

FIXTURE_TEARDOWN(import)
{
	if (self->buf >= 0)
		close(self->buf);
	if (self->heap >= 0)
		close(self->heap);
}

/* Asks the test importer to import @fd into the device at PCI path @dev, as @kind. */
static int import_into(int fd, const char *dev, const char *kind)
{
	char req[PATH_MAX + 64];

	snprintf(req, sizeof(req), "%d %s%s%s", fd, strrchr(dev, '/') + 1,
		 *kind ? " " : "", kind);
	return import(req, res, sizeof(res));
}

TEST_F(import, same_switch)
{
	EXPECT_EQ(0, import_into(self->buf, self->nvme0, ""));
	EXPECT_EQ(0, strncmp(res, "ok ", 3)) TH_LOG("%s", res);
	EXPECT_NE(NULL, strstr(res, "len=4194304")) TH_LOG("%s", res);
}

TEST_F(import, bus_addresses)
{
	EXPECT_EQ(0, import_into(self->buf, self->nvme0, ""));
	EXPECT_NE(NULL, strstr(res, "bus_address=1")) TH_LOG("%s", res);
}

TEST_F(import, outside_switch_refused)
{
	EXPECT_EQ(-EINVAL, import_into(self->buf, self->nvme2, ""));
	EXPECT_EQ(0, strncmp(res, "error", 5)) TH_LOG("%s", res);
}

/* An importer that does not take peer memory. */
TEST_F(import, nopeer_refused)
{
	EXPECT_EQ(-EOPNOTSUPP, import_into(self->buf, self->nvme0, "nopeer"));
}

/* A pinned (static) importer cannot be revoked: its mappings would hold up the unbind. */
TEST_F(import, pinned_refused)
{
	EXPECT_EQ(-EOPNOTSUPP, import_into(self->buf, self->nvme0, "pinned"));
}

TEST_F(import, unknown_kind)
{
	EXPECT_EQ(-EINVAL, import_into(self->buf, self->nvme0, "sideways"));
}

/* The table is built 2 MiB at a time; contiguous memory still gives one segment. */
TEST_F(import, big_buffer_one_segment)
{
	int big = spin_heap_alloc(self->heap, 64 * MiB, O_RDWR | O_CLOEXEC, 0);

	ASSERT_LE(0, big);
	EXPECT_EQ(0, import_into(big, self->nvme0, ""));
	EXPECT_NE(NULL, strstr(res, "segments=1 ")) TH_LOG("%s", res);
	EXPECT_NE(NULL, strstr(res, "len=67108864")) TH_LOG("%s", res);
	close(big);
}

TEST_F(import, not_a_dmabuf)
{
	EXPECT_GT(0, import_into(0, self->nvme0, ""));
}

TEST_F(import, malformed_request)
{
	EXPECT_EQ(-EINVAL, import("nonsense", res, sizeof(res)));
}

TEST_HARNESS_MAIN
