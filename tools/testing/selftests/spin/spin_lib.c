// SPDX-License-Identifier: GPL-2.0
/*
 * Helpers shared by the spin selftests. See spin_lib.h.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>

#include "spin_lib.h"

int spin_read_file(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = read(fd, buf, len - 1);
	close(fd);
	if (n < 0)
		return -errno;
	buf[n] = '\0';
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
		buf[--n] = '\0';
	return 0;
}

long long spin_read_ll(const char *path)
{
	char buf[64];

	if (spin_read_file(path, buf, sizeof(buf)))
		return -1;
	return strtoll(buf, NULL, 0);
}

/* The NVMe controller (nvmeN) whose serial is @serial. */
int spin_nvme_ctrl(const char *serial, char *ctrl, size_t len)
{
	DIR *d = opendir("/sys/class/nvme");
	struct dirent *e;
	char path[PATH_MAX], buf[128];
	int ret = -ENODEV;

	if (!d)
		return -errno;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/sys/class/nvme/%s/serial", e->d_name);
		if (spin_read_file(path, buf, sizeof(buf)) || strcmp(buf, serial))
			continue;
		snprintf(ctrl, len, "%s", e->d_name);
		ret = 0;
		break;
	}
	closedir(d);
	return ret;
}

/*
 * The block device of namespace 1 of the NVMe device with @serial. With
 * multipath the disk belongs to the subsystem, which has the serial too.
 */
int spin_nvme_blockdev(const char *serial, char *dev, size_t len)
{
	DIR *d = opendir("/sys/block");
	struct dirent *e;
	char path[PATH_MAX], buf[128];
	int ret = -ENODEV;

	if (!d)
		return -errno;
	while ((e = readdir(d))) {
		if (strncmp(e->d_name, "nvme", 4))
			continue;
		snprintf(path, sizeof(path), "/dev/%s", e->d_name);
		if (access(path, F_OK))
			continue;	/* hidden per-path disk */
		snprintf(path, sizeof(path), "/sys/block/%s/device/serial", e->d_name);
		if (spin_read_file(path, buf, sizeof(buf)) || strcmp(buf, serial))
			continue;
		snprintf(dev, len, "/dev/%s", e->d_name);
		ret = 0;
		break;
	}
	closedir(d);
	return ret;
}

/* The sysfs directory of the PCI function of the NVMe controller with @serial. */
int spin_nvme_pcidir(const char *serial, char *dir, size_t len)
{
	char ctrl[64], path[PATH_MAX];
	int ret = spin_nvme_ctrl(serial, ctrl, sizeof(ctrl));

	if (ret)
		return ret;
	snprintf(path, sizeof(path), "/sys/class/nvme/%s/device", ctrl);
	if (!realpath(path, dir))
		return -errno;
	(void)len;
	return 0;
}

/* The sysfs directory (real path) of the first PCI function @vendor:@device. */
int spin_pci_find(unsigned int vendor, unsigned int device, char *dir, size_t len)
{
	DIR *d = opendir("/sys/bus/pci/devices");
	struct dirent *e;
	char path[PATH_MAX];
	int ret = -ENODEV;

	if (!d)
		return -errno;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/vendor", e->d_name);
		if (spin_read_ll(path) != vendor)
			continue;
		snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/device", e->d_name);
		if (spin_read_ll(path) != device)
			continue;
		snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s", e->d_name);
		if (realpath(path, dir))
			ret = 0;
		break;
	}
	closedir(d);
	(void)len;
	return ret;
}

/* The switch upstream port above a device: two levels up its sysfs path. */
int spin_pci_upstream(const char *pcidir, char *up, size_t len)
{
	char *slash;

	snprintf(up, len, "%s", pcidir);
	for (int i = 0; i < 2; i++) {
		slash = strrchr(up, '/');
		if (!slash)
			return -EINVAL;
		*slash = '\0';
	}
	return 0;
}

/* Map BAR2 of the stand-in GPU through sysfs, as the host sees it. */
void *spin_gpu_map(const char *pcidir, size_t *size)
{
	char path[PATH_MAX];
	struct stat st;
	void *p;
	int fd;

	snprintf(path, sizeof(path), "%s/resource%d", pcidir, SPIN_GPU_BAR);
	fd = open(path, O_RDWR | O_SYNC);
	if (fd < 0)
		return NULL;
	if (fstat(fd, &st)) {
		close(fd);
		return NULL;
	}
	*size = st.st_size;
	p = mmap(NULL, st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	return p == MAP_FAILED ? NULL : p;
}

static uint64_t pattern_word(uint64_t seed, uint64_t index)
{
	uint64_t x = (seed << 32) + index + 0x9E3779B97F4A7C15ULL;

	x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
	x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
	return x ^ (x >> 31);
}

static uint8_t pattern_byte(uint64_t seed, uint64_t off)
{
	return pattern_word(seed, off / 8) >> (8 * (off % 8));
}

/* Fill @buf with the test pattern of bytes [@off, @off + @len) of a file. */
void spin_pattern_fill(void *buf, uint64_t off, size_t len, uint64_t seed)
{
	uint8_t *p = buf;
	size_t i = 0;

	for (; i < len && (off + i) % 8; i++)
		p[i] = pattern_byte(seed, off + i);
	for (; i + 8 <= len; i += 8) {
		uint64_t w = pattern_word(seed, (off + i) / 8);

		memcpy(p + i, &w, 8);
	}
	for (; i < len; i++)
		p[i] = pattern_byte(seed, off + i);
}

/* Index of the first byte of @buf that differs from the pattern, or -1. */
ssize_t spin_pattern_check(const void *buf, uint64_t off, size_t len, uint64_t seed)
{
	const volatile uint8_t *p = buf;

	for (size_t i = 0; i < len; i++)
		if (p[i] != pattern_byte(seed, off + i))
			return i;
	return -1;
}

/* zlib's CRC-32 (reflected, polynomial 0xEDB88320). */
uint32_t spin_crc32(uint32_t crc, const void *buf, size_t len)
{
	static uint32_t table[256];
	const uint8_t *p = buf;

	if (!table[1]) {
		for (uint32_t i = 0; i < 256; i++) {
			uint32_t c = i;

			for (int k = 0; k < 8; k++)
				c = c & 1 ? 0xEDB88320 ^ (c >> 1) : c >> 1;
			table[i] = c;
		}
	}
	crc = ~crc;
	while (len--)
		crc = table[(crc ^ *p++) & 0xff] ^ (crc >> 8);
	return ~crc;
}

static int agent_fd = -1;

/* The GPU agent listens on the guest's third serial port. */
int spin_agent_open(void)
{
	struct termios t;

	if (agent_fd >= 0)
		return 0;
	agent_fd = open("/dev/ttyS2", O_RDWR | O_NOCTTY);
	if (agent_fd < 0)
		return -errno;
	if (tcgetattr(agent_fd, &t) == 0) {
		cfmakeraw(&t);
		t.c_cc[VMIN] = 1;
		t.c_cc[VTIME] = 0;
		tcsetattr(agent_fd, TCSANOW, &t);
	}
	tcflush(agent_fd, TCIOFLUSH);
	return 0;
}

/* Send one request line, read one answer line into @reply. 0 if it starts with OK/PONG. */
int spin_agent(char *reply, size_t len, const char *fmt, ...)
{
	char line[256];
	size_t n = 0;
	va_list ap;
	int m;

	if (spin_agent_open())
		return -ENODEV;
	va_start(ap, fmt);
	m = vsnprintf(line, sizeof(line) - 1, fmt, ap);
	va_end(ap);
	line[m++] = '\n';
	if (write(agent_fd, line, m) != m)
		return -EIO;
	while (n + 1 < len) {
		char c;

		if (read(agent_fd, &c, 1) != 1)
			return -EIO;
		if (c == '\n')
			break;
		if (c != '\r')
			reply[n++] = c;
	}
	reply[n] = '\0';
	return strncmp(reply, "OK", 2) && strncmp(reply, "PONG", 4) ? -EINVAL : 0;
}

void *spin_alloc_aligned(size_t len)
{
	void *p = NULL;

	if (posix_memalign(&p, 4096, len ? len : 1))
		return NULL;
	return p;
}
