// SPDX-License-Identifier: GPL-2.0
/*
 * The rig is what the other tests assume: two NVMe controllers found by
 * serial, the stand-in GPU found by vendor:device, all on one PCIe switch,
 * one controller a p2pdma provider, spin loaded, and the host-side GPU agent
 * seeing exactly what the guest writes into the GPU BAR and vice versa.
 */
#define _GNU_SOURCE
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/klog.h>
#include <sys/mman.h>

#include "../kselftest.h"
#include "spin_lib.h"

static int kernel_log_has(const char *needle)
{
	int len = klogctl(10 /* SYSLOG_ACTION_SIZE_BUFFER */, NULL, 0);
	char *buf;
	int n, found;

	if (len <= 0)
		return 0;
	buf = calloc(1, len + 1);
	if (!buf)
		return 0;
	n = klogctl(3 /* SYSLOG_ACTION_READ_ALL */, buf, len);
	found = n > 0 && strstr(buf, needle);
	free(buf);
	return found;
}

int main(void)
{
	char nvme0[PATH_MAX], nvme1[PATH_MAX], gpu[PATH_MAX], dev0[64], dev1[64];
	char up0[PATH_MAX], up1[PATH_MAX], upg[PATH_MAX], path[PATH_MAX + 32];
	char nvme2[PATH_MAX], up2[PATH_MAX], dev2[64], vblk[64];
	char reply[128];
	size_t size = 0;
	uint8_t *bar;
	ssize_t bad;

	ksft_print_header();
	ksft_set_plan(12);

	ksft_test_result(!spin_nvme_pcidir(SPIN_NVME0_SERIAL, nvme0, sizeof(nvme0)) &&
			 !spin_nvme_blockdev(SPIN_NVME0_SERIAL, dev0, sizeof(dev0)),
			 "nvme %s found (%s)\n", SPIN_NVME0_SERIAL, dev0);
	ksft_test_result(!spin_nvme_pcidir(SPIN_NVME1_SERIAL, nvme1, sizeof(nvme1)) &&
			 !spin_nvme_blockdev(SPIN_NVME1_SERIAL, dev1, sizeof(dev1)),
			 "nvme %s found (%s)\n", SPIN_NVME1_SERIAL, dev1);
	ksft_test_result(!spin_gpu_find(gpu, sizeof(gpu)),
			 "stand-in GPU %04x:%04x found\n", SPIN_GPU_VENDOR, SPIN_GPU_DEVICE);

	spin_pci_upstream(nvme0, up0, sizeof(up0));
	spin_pci_upstream(nvme1, up1, sizeof(up1));
	spin_pci_upstream(gpu, upg, sizeof(upg));
	ksft_print_msg("switch upstream port: %s\n", up0);
	ksft_test_result(!strcmp(up0, up1) && !strcmp(up0, upg),
			 "both NVMe and the GPU sit under one PCIe switch\n");

	ksft_test_result(!spin_nvme_pcidir(SPIN_NVME2_SERIAL, nvme2, sizeof(nvme2)) &&
			 !spin_nvme_blockdev(SPIN_NVME2_SERIAL, dev2, sizeof(dev2)) &&
			 !spin_pci_upstream(nvme2, up2, sizeof(up2)) && strcmp(up2, up0),
			 "nvme %s found (%s), outside the switch\n", SPIN_NVME2_SERIAL, dev2);
	ksft_test_result(!spin_virtio_blockdev(SPIN_VBLK_SERIAL, vblk, sizeof(vblk)),
			 "virtio-blk %s found (%s)\n", SPIN_VBLK_SERIAL, vblk);

	snprintf(path, sizeof(path), "%s/p2pmem/available", nvme1);
	ksft_test_result(spin_read_ll(path) > 0,
			 "%s's CMB is a p2pdma provider (%lld bytes available)\n",
			 SPIN_NVME1_SERIAL, spin_read_ll(path));

	ksft_test_result(kernel_log_has("spin: loaded"), "the spin module is loaded\n");

	bar = spin_gpu_map(gpu, &size);
	ksft_test_result(bar && size >= (256UL << 20),
			 "stand-in GPU BAR%d mapped, %zu MiB\n", SPIN_GPU_BAR, size >> 20);
	if (!bar) {
		ksft_test_result_fail("GPU agent: no BAR\n");
		ksft_test_result_fail("guest write seen by host: no BAR\n");
		ksft_test_result_fail("host write seen by guest: no BAR\n");
		ksft_finished();
	}

	ksft_test_result(!spin_agent(reply, sizeof(reply), "PING") &&
			 strtoull(reply + 5, NULL, 0) == size,
			 "GPU agent answers and sees the same BAR size (%s)\n", reply);

	/* Guest writes through the BAR, host checks the pattern in its file. */
	spin_pattern_fill(bar + 4096 + 3, 4096 + 3, 1 << 20, 7);
	ksft_test_result(!spin_agent(reply, sizeof(reply), "CHECK %d %d 7", 4096 + 3, 1 << 20),
			 "guest write into GPU memory is seen by the host (%s)\n", reply);

	/* Host writes its file, guest checks what the BAR shows. */
	spin_agent(reply, sizeof(reply), "FILL %d %d 9", 8 << 20, 1 << 20);
	bad = spin_pattern_check(bar + (8 << 20), 8 << 20, 1 << 20, 9);
	ksft_test_result(bad < 0,
			 "host write into GPU memory is seen by the guest (first bad %zd)\n",
			 bad);

	munmap(bar, size);
	ksft_finished();
}
