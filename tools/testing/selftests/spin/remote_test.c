// SPDX-License-Identifier: GPL-2.0
/*
 * Remote storage: NVMe over Fabrics namespaces under the router. The guest is
 * its own target and host: nvmet (set up through configfs) exports
 * spin-nvme2's namespace, and the host connects to it over TCP on the
 * loopback device, over the loop transport and over RDMA with software
 * iWARP (siw on a veth pair; under load soft-RoCE, rdma_rxe, never completes
 * its writes in the rig: see Documentation/spin/remote.rst). On each remote
 * disk, ext4 and xfs in turn:
 * reads into GPU memory and writes from it, every byte checked from the host
 * side of the GPU memory or from the disk; each request falls back with
 * reason queue, naming the remote path in the spin_route tracepoint and in
 * /sys/block/<disk>/spin/p2p, counted in the stat files; writers appending
 * from GPU memory in parallel lose nothing; spin check says why the
 * transport refuses P2P. Over TCP the target's port then loses the
 * subsystem for a while under a reader and a writer: the controller
 * reconnects, nothing hangs or reads wrong bytes, the I/O goes on, the
 * filesystem checks clean. Then md RAID-1 of a local drive and a remote one:
 * the refused member is named, the data is right. Every disk and target is
 * taken down again at the end.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <signal.h>
#include <unistd.h>

#include "../kselftest.h"
#include "router_lib.h"

#define NVMET "/sys/kernel/config/nvmet"
#define IP "/usr/sbin/ip"	/* iproute2's, for the veth pair */
#define RDMA "/usr/bin/rdma"
#define SOFT_NETDEV "spinv0"
#define SOFT_PEER "spinv1"
#define SOFT_DEV "spinsiw0"
#define SOFT_ADDR "10.77.0.1"
#define MD_DEV "/dev/md0"
#define MD_CREATE "mdadm --create " MD_DEV " --run --level=1 --raid-devices=2 --assume-clean"

/*
 * Per transport: set-up, per filesystem reads, writes and appends, spin check,
 * an outage where the transport has one, take-down; and the md RAID-1.
 */
#define FS_RESULTS 3
#define TRANSPORT_RESULTS (1 + 2 * FS_RESULTS + 1 + 1)
#define OUTAGES NR_OUTAGES	/* over TCP, one of each kind */
#define MPATH_RESULTS 4
#define RESULTS (3 * TRANSPORT_RESULTS + OUTAGES + 1 + MPATH_RESULTS)

/*
 * How a target goes away, over TCP: its port loses the subsystem (the host's
 * controller resets and reconnects until the port has it again); the link
 * goes down (the loopback device the TCP connection runs on, until the
 * keep-alive times out and the controller reconnects); or the host deletes
 * the controller (nvme disconnect: the disk is gone, the filesystem with it,
 * until the host connects again). The rig has no outage over RDMA that
 * nvme-rdma rides out. With rxe's netdev taken down and up, the reconnect
 * work never finished; a port that loses its last subsystem is disabled, which
 * trips the lock inversion described at rdma_port_keep() in spin_lib.c; and
 * with the port kept, the host's reconnect is refused for good (the subsystem
 * is unknown: DNR) and the controller deleted.
 */
enum { OUTAGE_PORT, OUTAGE_LINK, OUTAGE_DISCONNECT, NR_OUTAGES };

static const char *const outage_names[NR_OUTAGES] = {
	"port removed", "link down", "nvme disconnect",
};

/* One NVMe over Fabrics transport: the target's port and subsystem, the host's controller. */
struct transport {
	const char *name;
	struct spin_nvmet n;
	const char *why;	/* what spin check must say of the path */
	int outages;		/* the target goes away for a while in every way above */
};

static struct transport transports[] = {
	{ .name = "tcp", .n = { .trtype = "tcp", .traddr = "127.0.0.1", .svcid = "4420", .port = 1,
				.nqn = "spin-remote-tcp" },
	  .why = "is an NVMe/TCP path", .outages = 1 },
	{ .name = "loop", .n = { .trtype = "loop", .port = 2, .nqn = "spin-remote-loop" },
	  .why = "is an NVMe loop path" },
	/*
	 * Under TCG, siw's keep-alive round trip under load takes more than the
	 * default 5 s now and then: each miss is an error recovery and reconnect
	 * that costs a minute.
	 */
	{ .name = "rdma", .n = { .trtype = "rdma", .traddr = SOFT_ADDR, .svcid = "4421", .port = 3,
				 .nqn = "spin-remote-rdma", .opts = "keep_alive_tmo=30" },
	  .why = "over software RDMA (" SOFT_DEV },
};

static char backing[80];	/* the target's block device: spin-nvme2 */
static char gpu_bdf[32];

/* Software iWARP: an RDMA device on one end of a veth pair. */
static int soft_rdma_up(char *why, size_t len)
{
	static const char *const cmds[] = {
		IP " link add " SOFT_NETDEV " type veth peer name " SOFT_PEER,
		IP " addr add " SOFT_ADDR "/24 dev " SOFT_NETDEV,
		IP " link set " SOFT_PEER " up",
		IP " link set " SOFT_NETDEV " up",
		RDMA " link add " SOFT_DEV " type siw netdev " SOFT_NETDEV,
	};

	for (size_t i = 0; i < ARRAY_SIZE(cmds); i++) {
		char cmd[256];

		snprintf(cmd, sizeof(cmd), "%s >/dev/console 2>&1", cmds[i]);
		if (run(cmd)) {
			snprintf(why, len, "\"%s\" failed", cmds[i]);
			return -EIO;
		}
	}
	return 0;
}

/* The remote path the kernel names: "provider <gpu> queue <maj:min>" of spin/p2p. */
static int p2p_queue_member(const char *disk, unsigned int *maj, unsigned int *min)
{
	char path[PATH_MAX], buf[4096], want[64];
	char *line, *save;

	snprintf(path, sizeof(path), "/sys/block/%s/spin/p2p", disk);
	if (spin_read_file(path, buf, sizeof(buf)) < 0)
		return -EIO;
	snprintf(want, sizeof(want), "provider %s queue %%u:%%u", gpu_bdf);
	for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
		if (sscanf(line, want, maj, min) == 2)
			return 0;
	return -ENOENT;
}

/* The PCI device spin/p2p of @disk gives its member @maj:@min ("-": none). */
static int member_device(const char *disk, unsigned int maj, unsigned int min, char *pdev,
			 size_t len)
{
	char path[PATH_MAX], buf[4096], want[64];
	char *line, *save;

	snprintf(path, sizeof(path), "/sys/block/%s/spin/p2p", disk);
	if (spin_read_file(path, buf, sizeof(buf)) < 0)
		return -EIO;
	snprintf(want, sizeof(want), "member %u:%u ", maj, min);
	for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
		if (!strncmp(line, want, strlen(want)) &&
		    sscanf(line + strlen(want), "%63s", pdev) == 1 && strlen(pdev) < len)
			return 0;
	return -ENOENT;
}

/*
 * Reads into GPU memory: sizes from a page to 3 MiB, aligned and not, cold
 * and cached. Each goes whole through the page cache with reason queue
 * (counters, trace), names the same member as spin/p2p, and every byte is
 * right, the guard bytes around it untouched.
 */
static void remote_reads(struct router_fs *fs, const char *what)
{
	const struct {
		long long pos;
		size_t len;
		int rz;
	} c[] = {
		{ 0, PG, 0 },
		{ 0, MiB, 0 },
		{ 12345, 3 * MiB + 7, 100 },
		{ 2 * MiB, 64 * KiB, 0 },
	};
	unsigned int pmaj = 0, pmin = 0;
	char label[160], pdev[64] = "?";
	struct res r = { 0 };
	struct obs o;

	if (p2p_queue_member(fs->base.disk, &pmaj, &pmin))
		fail(&r, what, "/sys/block/%s/spin/p2p names no refused member for %s",
		     fs->base.disk, gpu_bdf);
	else if (member_device(fs->base.disk, pmaj, pmin, pdev, sizeof(pdev)) ||
		 strcmp(pdev, "-"))
		fail(&r, what, "the path %u:%u has a DMA device (%s): no device moves its data",
		     pmaj, pmin, pdev);
	for (size_t i = 0; i < ARRAY_SIZE(c); i++) {
		size_t goff = 40 * MiB + c[i].pos % PG;

		snprintf(label, sizeof(label), "%s: %zu B at %lld, %d%% cached", what, c[i].len,
			 c[i].pos, c[i].rz);
		r.runs++;
		if (!read_observed(fs, c[i].pos, c[i].len, c[i].rz, goff, &o, &r, label)) {
			if (o.d.v[ST_BYTES_P2P] || o.d.v[ST_FB_QUEUE] != 1 ||
			    route_reasons(&o) != BIT(R_QUEUE))
				fail(&r, label,
				     "expected reason queue: bytes_p2p +%lld, fallback_queue +%lld, reasons seen %#x",
				     o.d.v[ST_BYTES_P2P], o.d.v[ST_FB_QUEUE], route_reasons(&o));
			for (int k = 0; k < o.tr.nroute; k++) {
				struct route *rt = &o.tr.route[k];

				if (rt->member_maj != pmaj || rt->member_min != pmin)
					fail(&r, label,
					     "spin_route names member %u:%u, spin/p2p %u:%u",
					     rt->member_maj, rt->member_min, pmaj, pmin);
			}
		}
		trace_free(&o.tr);
	}
	res_result(&r,
		   "%s: reads into GPU memory right, reason queue, member %u:%u named (DMA device %s)",
		   what, pmaj, pmin, pdev);
}

/*
 * Writes from GPU memory (the host fills it): aligned, unaligned and
 * extending, each kept in the page cache with reason queue (write
 * counters); the file then holds every byte, read back from the disk.
 */
static void remote_writes(struct router_fs *fs, const char *what)
{
	const struct {
		long long pos;
		size_t len;
	} c[] = {
		{ 0, MiB },
		{ 3 * MiB + 100, 200 * KiB + 3 },
		{ SMALL_LEN - 4096, 2 * MiB },	/* past the end of the file */
	};
	unsigned long long seed = fs->base.seed + 1000;
	long long fb0, fb1, req0, req1;
	struct res r = { 0 };
	char label[160];
	ssize_t n;

	fb0 = spin_stat_get(fs->base.stat, "write_fallback_queue");
	req0 = spin_stat_get(fs->base.stat, "write_requests");
	for (size_t i = 0; i < ARRAY_SIZE(c); i++) {
		size_t goff = 48 * MiB + c[i].pos % PG;

		snprintf(label, sizeof(label), "%s: write of %zu B at %lld", what, c[i].len,
			 c[i].pos);
		r.runs++;
		if (spin_gpu_fill(gpu, gmem + goff, c[i].len, seed, c[i].pos)) {
			fail(&r, label, "the host could not fill GPU memory");
			continue;
		}
		n = pwrite(fs->fd, gmem + goff, c[i].len, c[i].pos);
		if (n != (ssize_t)c[i].len)
			fail(&r, label, "returned %zd (%s)", n, n < 0 ? strerror(errno) : "short");
	}
	fb1 = spin_stat_get(fs->base.stat, "write_fallback_queue");
	req1 = spin_stat_get(fs->base.stat, "write_requests");
	if (fb1 - fb0 != (long long)ARRAY_SIZE(c) || req1 - req0 != (long long)ARRAY_SIZE(c))
		fail(&r, what, "write_requests +%lld, write_fallback_queue +%lld, want +%zu each",
		     req1 - req0, fb1 - fb0, ARRAY_SIZE(c));
	if (fsync(fs->fd) || posix_fadvise(fs->fd, 0, 0, POSIX_FADV_DONTNEED))
		fail(&r, what, "fsync: %s", strerror(errno));
	for (size_t i = 0; i < ARRAY_SIZE(c); i++) {
		snprintf(label, sizeof(label), "%s: write of %zu B at %lld", what, c[i].len,
			 c[i].pos);
		n = pread(fs->fd, host, c[i].len, c[i].pos);
		if (n != (ssize_t)c[i].len)
			fail(&r, label, "read back %zd", n);
		else if (spin_pattern_check(host, c[i].pos, c[i].len, seed) >= 0)
			fail(&r, label, "byte %zd differs when read back",
			     spin_pattern_check(host, c[i].pos, c[i].len, seed));
	}
	/* The file's own pattern still around the written ranges. */
	n = pread(fs->fd, host, 4096, 2 * MiB);
	if (n != 4096 || spin_pattern_check(host, 2 * MiB, 4096, fs->base.seed) >= 0)
		fail(&r, what, "bytes that no write touched changed");
	res_result(&r, "%s: writes from GPU memory on the disk, reason queue", what);
}

#define APPENDERS 2
#define APPEND_REC (64 * KiB)
#define APPEND_RECS 24

/*
 * Writers appending from GPU memory in parallel (O_APPEND), each its own
 * record pattern: the file ends up exactly as long as everything written,
 * every record whole and of one writer.
 */
static void parallel_appends(struct router_fs *fs, const char *what)
{
	char path[PATH_MAX + 8];
	struct res r = { 0 };
	int counts[APPENDERS] = { 0 };
	pid_t pid[APPENDERS];
	struct stat st;
	int fd, status;

	snprintf(path, sizeof(path), "%s/append.dat", fs->base.dir);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_APPEND, 0644);
	if (fd < 0) {
		ksft_test_result_fail("%s: appenders: %s: %s\n", what, path, strerror(errno));
		return;
	}
	for (int w = 0; w < APPENDERS; w++)
		if (spin_gpu_fill(gpu, gmem + 60 * MiB + w * APPEND_REC, APPEND_REC, 500 + w, 0))
			fail(&r, what, "the host could not fill GPU memory");
	for (int w = 0; w < APPENDERS; w++) {
		pid[w] = fork();
		if (pid[w] == 0) {
			for (int k = 0; k < APPEND_RECS; k++)
				if (write(fd, gmem + 60 * MiB + w * APPEND_REC, APPEND_REC) !=
				    (ssize_t)APPEND_REC)
					_exit(1);
			_exit(0);
		}
	}
	for (int w = 0; w < APPENDERS; w++)
		if (pid[w] < 0 || waitpid(pid[w], &status, 0) != pid[w] || !WIFEXITED(status) ||
		    WEXITSTATUS(status))
			fail(&r, what, "appender %d failed", w);
	if (fsync(fd) || fstat(fd, &st) || posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED))
		fail(&r, what, "fsync: %s", strerror(errno));
	else if (st.st_size != (off_t)APPENDERS * APPEND_RECS * APPEND_REC)
		fail(&r, what, "file is %lld bytes, %lu were appended", (long long)st.st_size,
		     (unsigned long)APPENDERS * APPEND_RECS * APPEND_REC);
	for (off_t off = 0; !r.bad && off < st.st_size; off += APPEND_REC) {
		int w;

		if (pread(fd, host, APPEND_REC, off) != (ssize_t)APPEND_REC) {
			fail(&r, what, "read back at %lld: %s", (long long)off, strerror(errno));
			break;
		}
		for (w = 0; w < APPENDERS; w++)
			if (spin_pattern_check(host, 0, APPEND_REC, 500 + w) < 0)
				break;
		if (w == APPENDERS)
			fail(&r, what, "the record at %lld is of no writer whole", (long long)off);
		else
			counts[w]++;
	}
	for (int w = 0; !r.bad && w < APPENDERS; w++)
		if (counts[w] != APPEND_RECS)
			fail(&r, what, "writer %d has %d records, wrote %d", w, counts[w],
			     APPEND_RECS);
	close(fd);
	unlink(path);
	res_result(&r, "%s: %d writers appending from GPU memory in parallel lose nothing", what,
		   APPENDERS);
}

/* `spin check` on a file of the remote disk names the transport's refusal. */
static void tool_says(struct transport *t, const char *file)
{
	char cmd[PATH_MAX + 64], out[8192] = "";
	size_t n = 0;
	FILE *p;

	snprintf(cmd, sizeof(cmd), "spin check %.4000s 2>&1", file);
	p = popen(cmd, "r");
	if (p) {
		n = fread(out, 1, sizeof(out) - 1, p);
		pclose(p);
	}
	out[n] = '\0';
	ksft_test_result(strstr(out, t->why) && strstr(out, "queue"),
			 "%s: spin check says why: the path %s\n", t->name,
			 strstr(out, t->why) ? t->why : "(not said)");
	if (!strstr(out, t->why))
		ksft_print_msg("spin check said:\n%s\n", out);
}

/* Reads, writes and appends on ext4 and xfs on the disk of @t. */
static void fs_tests(struct transport *t)
{
	struct router_fs fss[] = {
		{ .base = { .name = "ext4", .serial = t->n.nqn, .type = "ext4",
			    .dir = "/mnt/rm-ext4", .mkfs = SPIN_MKFS_EXT4, .seed = 81 } },
		{ .base = { .name = "xfs", .serial = t->n.nqn, .type = "xfs", .dir = "/mnt/rm-xfs",
			    .mkfs = SPIN_MKFS_XFS, .seed = 82 } },
	};

	for (size_t i = 0; i < ARRAY_SIZE(fss); i++) {
		struct router_fs *fs = &fss[i];
		char what[64];

		snprintf(what, sizeof(what), "%s over %s", fs->base.name, t->name);
		fs_setup(fs, SMALL_LEN);
		remote_reads(fs, what);
		remote_writes(fs, what);
		parallel_appends(fs, what);
		if (i == 0)
			tool_says(t, fs->base.path);
		fs_teardown(fs);
	}
}

/*
 * md RAID-1 of spin-nvme0 (local, P2P-capable) and the TCP disk: the array's
 * queue lacks P2PDMA because one member's does, the remote path is named,
 * reads are right.
 */
static void mixed_raid1(struct transport *t)
{
	struct router_fs md = { .base = { .name = "md", .type = "ext4", .dir = "/mnt/rm-md",
					  .seed = 83 } };
	unsigned int pmaj = 0, pmin = 0;
	char local[80], cmd[512];
	struct res r = { 0 };
	struct obs o;

	if (spin_nvme_blockdev(SPIN_NVME0_SERIAL, local, sizeof(local))) {
		ksft_test_result_fail("md RAID-1 local + tcp: no %s\n", SPIN_NVME0_SERIAL);
		return;
	}
	snprintf(cmd, sizeof(cmd), "mdadm --zero-superblock %s /dev/%s >/dev/null 2>&1", local,
		 t->n.disk);
	run(cmd);
	snprintf(cmd, sizeof(cmd), "%s %s /dev/%s </dev/null >/dev/console 2>&1", MD_CREATE,
		 local, t->n.disk);
	if (run(cmd) || run(SPIN_MKFS_EXT4 " " MD_DEV " >/dev/null 2>&1")) {
		ksft_test_result_fail("md RAID-1 local + tcp: mdadm or mkfs failed\n");
		run("mdadm --stop " MD_DEV " >/dev/null 2>&1");
		return;
	}
	snprintf(md.base.dev, sizeof(md.base.dev), "%s", MD_DEV);
	if (spin_mount(md.base.dev, md.base.dir, "ext4", 0, NULL)) {
		ksft_test_result_fail("md RAID-1 local + tcp: mount: %s\n", strerror(errno));
		run("mdadm --stop " MD_DEV " >/dev/null 2>&1");
		return;
	}
	snprintf(md.base.disk, sizeof(md.base.disk), "%s", strrchr(md.base.dev, '/') + 1);
	snprintf(md.base.stat, sizeof(md.base.stat), "/sys/block/%s/spin/stat", md.base.disk);
	snprintf(md.base.path, sizeof(md.base.path), "%s/data", md.base.dir);
	snprintf(cmd, sizeof(cmd), "/sys/block/%s/queue/logical_block_size", md.base.disk);
	md.base.lbs = spin_read_ll(cmd);
	fs_fill(&md, SMALL_LEN);
	if (p2p_queue_member(md.base.disk, &pmaj, &pmin))
		fail(&r, "md", "spin/p2p of %s names no refused member", md.base.disk);
	if (!read_observed(&md, 4096, 2 * MiB, 0, 4096, &o, &r, "md")) {
		if (o.d.v[ST_FB_QUEUE] != 1 || route_reasons(&o) != BIT(R_QUEUE))
			fail(&r, "md", "fallback_queue +%lld, reasons seen %#x",
			     o.d.v[ST_FB_QUEUE], route_reasons(&o));
		for (int k = 0; k < o.tr.nroute; k++)
			if (o.tr.route[k].member_maj != pmaj ||
			    o.tr.route[k].member_min != pmin || !pmaj)
				fail(&r, "md", "spin_route names %u:%u, spin/p2p %u:%u",
				     o.tr.route[k].member_maj, o.tr.route[k].member_min, pmaj,
				     pmin);
	}
	trace_free(&o.tr);
	fs_teardown(&md);
	if (run("mdadm --stop " MD_DEV " >/dev/console 2>&1"))
		fail(&r, "md", "mdadm --stop failed");
	snprintf(cmd, sizeof(cmd), "mdadm --zero-superblock %s /dev/%s >/dev/null 2>&1", local,
		 t->n.disk);
	run(cmd);
	res_result(&r, "md RAID-1 of %s and the tcp disk: reads right, reason queue, member %u:%u",
		   local, pmaj, pmin);
}

/* The state of the host's controller of @t: "live", "resetting", "connecting", ... */
static void ctrl_state(struct transport *t, char *state, size_t len)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "/sys/class/nvme/%s/state", t->n.ctrl);
	if (spin_read_file(path, state, len))
		snprintf(state, len, "gone");
}

/* Takes the target of @t away (@down) or brings it back, in the way @kind. */
static int outage_set(struct transport *t, int kind, int down)
{
	char path[PATH_MAX], sub[PATH_MAX];

	switch (kind) {
	case OUTAGE_PORT:
		snprintf(path, sizeof(path), NVMET "/ports/%d/subsystems/%s", t->n.port, t->n.nqn);
		snprintf(sub, sizeof(sub), NVMET "/subsystems/%s", t->n.nqn);
		if (down)
			return unlink(path) ? -errno : 0;
		return symlink(sub, path) ? -errno : 0;
	case OUTAGE_LINK:
		return run(down ? IP " link set lo down" : IP " link set lo up") ? -EIO : 0;
	default:
		return down ? spin_nvmet_disconnect(&t->n) : 0;
	}
}

#define OUT_BUF (4 * MiB)
#define OUT_LEN MiB
#define OUT_SLOTS 8	/* the writer's file: slots of OUT_LEN, written in turn */

/* What the reader and the writer of an outage count, in memory shared with them. */
struct outage_counts {
	int phase;		/* 0 before, 1 target away, 2 back, 3 stop */
	int read_ok[3], read_err, read_bad, write_ok[3], write_err;
	unsigned int written;	/* the writer's slots of which a write and fsync succeeded */
	char bad[320];
};

/* Reads into GPU memory (@g) until told to stop, each checked from the host side. */
static void outage_reader(struct router_fs *fs, uint8_t *g, struct outage_counts *c)
{
	int fd = open(fs->base.path, O_RDONLY);
	char why[256];

	for (int i = 0; fd >= 0 && __atomic_load_n(&c->phase, __ATOMIC_RELAXED) < 3; i++) {
		off_t off = (off_t)(i * 257 % (SMALL_LEN / PG - OUT_LEN / PG)) * PG;
		int phase = __atomic_load_n(&c->phase, __ATOMIC_RELAXED);
		ssize_t n;

		posix_fadvise(fd, off, OUT_LEN, POSIX_FADV_DONTNEED);
		n = pread(fd, g, OUT_LEN, off);
		if (n < 0) {
			c->read_err++;
			continue;
		}
		if (spin_gpu_check(gpu, g, n, fs->base.seed, off, why, sizeof(why))) {
			if (!c->read_bad++)
				snprintf(c->bad, sizeof(c->bad), "%zd B at %lld: %s", n,
					 (long long)off, why);
			continue;
		}
		c->read_ok[phase > 2 ? 2 : phase]++;
	}
	_exit(fd < 0);
}

/* Writes from GPU memory (@g) to a file of its own until told to stop, with fsync. */
static void outage_writer(struct router_fs *fs, uint8_t *g, struct outage_counts *c)
{
	char path[PATH_MAX + 16];
	int fd;

	snprintf(path, sizeof(path), "%s/away.dat", fs->base.dir);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	for (int i = 0; fd >= 0 && __atomic_load_n(&c->phase, __ATOMIC_RELAXED) < 3; i++) {
		int phase = __atomic_load_n(&c->phase, __ATOMIC_RELAXED);

		if (pwrite(fd, g, OUT_LEN, (off_t)(i % OUT_SLOTS) * OUT_LEN) != (ssize_t)OUT_LEN ||
		    fsync(fd)) {
			c->write_err++;
		} else {
			c->write_ok[phase > 2 ? 2 : phase]++;
			c->written |= 1u << (i % OUT_SLOTS);
		}
	}
	_exit(fd < 0);
}

/*
 * Every slot of the writer's file that a write and its fsync() made durable
 * holds the write's bytes, read back from the disk.
 */
static void check_written(struct router_fs *fs, const struct outage_counts *c, struct res *r,
			  const char *what)
{
	char path[PATH_MAX + 16];
	int fd;

	snprintf(path, sizeof(path), "%s/away.dat", fs->base.dir);
	fd = open(path, O_RDONLY);
	if (fd < 0 || posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED)) {
		fail(r, what, "%s: %s", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return;
	}
	for (int k = 0; k < OUT_SLOTS; k++) {
		ssize_t bad;

		if (!(c->written & (1u << k)))
			continue;
		if (pread(fd, host, OUT_LEN, (off_t)k * OUT_LEN) != (ssize_t)OUT_LEN) {
			fail(r, what, "reading back slot %d of %s: %s", k, path, strerror(errno));
			break;
		}
		bad = spin_pattern_check(host, 0, OUT_LEN, 85);
		if (bad >= 0) {
			fail(r, what, "slot %d of %s: byte %zd is not what was written", k, path,
			     bad);
			break;
		}
	}
	close(fd);
}

/* How long reads and writes may take to go on once the controller is live again. */
#define RESUME_S 60

/*
 * Waits up to @secs for a read and a write that started after the target came
 * back to succeed; shows where the reader and writer wait if that takes more
 * than 10 s. Returns the seconds it took, rounded up.
 */
static int wait_resumed(struct outage_counts *c, const pid_t *pid, int secs)
{
	int i;

	for (i = 0; i < secs * 10; i++) {
		if (__atomic_load_n(&c->read_ok[2], __ATOMIC_RELAXED) &&
		    __atomic_load_n(&c->write_ok[2], __ATOMIC_RELAXED))
			break;
		if (i == 100) {
			spin_show_stack(pid[0], "the reader waits in");
			spin_show_stack(pid[1], "the writer waits in");
		}
		usleep(100000);
	}
	/* Some more I/O after the first, so that a hold-up after it shows too. */
	sleep(1);
	return (i + 9) / 10;
}

/* Waits up to @secs for the controller of @t to be in state live; its state then. */
static void ctrl_wait_live(struct transport *t, int secs, char *state, size_t len)
{
	for (int i = 0; i < secs * 10 && (ctrl_state(t, state, len), strcmp(state, "live")); i++)
		usleep(100000);
}

/*
 * The host connects again after an nvme disconnect and mounts the filesystem
 * again, which replays its journal: every byte of the data file reads right
 * into GPU memory, routed again (reason queue).
 */
static void reconnect_and_read(struct transport *t, struct router_fs *fs, uint8_t *g,
			       struct res *r, const char *what)
{
	long long fb0, fb1;
	char why[256];
	int fd;

	if (spin_nvmet_connect(&t->n, why, sizeof(why))) {
		fail(r, what, "connecting again: %s", why);
		return;
	}
	snprintf(fs->base.dev, sizeof(fs->base.dev), "/dev/%.70s", t->n.disk);
	snprintf(fs->base.disk, sizeof(fs->base.disk), "%s", t->n.disk);
	snprintf(fs->base.stat, sizeof(fs->base.stat), "/sys/block/%s/spin/stat", t->n.disk);
	if (spin_mount(fs->base.dev, fs->base.dir, fs->base.type, 0, NULL)) {
		fail(r, what, "mounting %s again: %s", fs->base.dev, strerror(errno));
		return;
	}
	fd = open(fs->base.path, O_RDONLY);
	fb0 = spin_stat_get(fs->base.stat, "fallback_queue");
	for (long long off = 0; fd >= 0 && off < (long long)SMALL_LEN; off += OUT_LEN) {
		if (pread(fd, g, OUT_LEN, off) != (ssize_t)OUT_LEN) {
			fail(r, what, "after reconnecting: read at %lld: %s", off, strerror(errno));
			break;
		}
		if (spin_gpu_check(gpu, g, OUT_LEN, fs->base.seed, off, why, sizeof(why))) {
			fail(r, what, "after reconnecting: %s at %lld", why, off);
			break;
		}
	}
	fb1 = spin_stat_get(fs->base.stat, "fallback_queue");
	if (fd < 0)
		fail(r, what, "after reconnecting: %s: %s", fs->base.path, strerror(errno));
	else if (fb1 - fb0 < (long long)(SMALL_LEN / OUT_LEN))
		fail(r, what, "after reconnecting: fallback_queue +%lld for %lld reads", fb1 - fb0,
		     (long long)(SMALL_LEN / OUT_LEN));
	if (fd >= 0)
		close(fd);
	if (spin_umount(fs->base.dir))
		fail(r, what, "umount after reconnecting: %s", strerror(errno));
}

/*
 * The target goes away under routed reads and writes, in the way @kind, and
 * comes back: the I/O held meanwhile completes or fails cleanly (never wrong
 * bytes), nothing hangs, reads and writes go on afterwards (after an nvme
 * disconnect: once the host connected again and mounted the filesystem
 * again), the GPU memory they used goes back to its pool, and the filesystem
 * checks clean.
 */
static void target_outage(struct transport *t, int kind, int xfs)
{
	struct router_fs fs = { .base = { .name = "away", .serial = t->n.nqn,
					  .dir = "/mnt/rm-away", .seed = 84 } };
	int buf = -1, away = 0, ret, gone = kind == OUTAGE_DISCONNECT, back_s = 0;
	char state[32] = "", cmd[256], what[64], again[48] = "";
	struct outage_counts *c;
	long long avail0, avail1;
	pid_t pid[2] = { -1, -1 };
	struct res r = { 0 };
	uint8_t *g = MAP_FAILED;
	char path[PATH_MAX + 32];

	fs.base.type = xfs ? "xfs" : "ext4";
	fs.base.mkfs = xfs ? SPIN_MKFS_XFS : SPIN_MKFS_EXT4;
	snprintf(what, sizeof(what), "%s: %s under I/O on %s", t->name, outage_names[kind],
		 xfs ? "xfs" : "ext4");
	c = mmap(NULL, sizeof(*c), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (c == MAP_FAILED) {
		ksft_test_result_fail("%s: %s\n", what, strerror(errno));
		return;
	}
	memset(c, 0, sizeof(*c));
	fs_setup(&fs, SMALL_LEN);
	snprintf(path, sizeof(path), "%s/p2pmem/available", gpu);
	avail0 = spin_read_ll(path);
	buf = spin_heap_alloc(spin_heap_open(gpu), OUT_BUF, O_RDWR | O_CLOEXEC, 0);
	if (buf >= 0)
		g = mmap(NULL, OUT_BUF, PROT_READ | PROT_WRITE, MAP_SHARED, buf, 0);
	if (g == MAP_FAILED || spin_gpu_fill(gpu, g + OUT_LEN, OUT_LEN, 85, 0)) {
		fail(&r, what, "GPU memory: %s", strerror(errno));
		goto out;
	}
	pid[0] = fork();
	if (pid[0] == 0)
		outage_reader(&fs, g, c);
	pid[1] = fork();
	if (pid[1] == 0)
		outage_writer(&fs, g + OUT_LEN, c);
	sleep(2);
	__atomic_store_n(&c->phase, 1, __ATOMIC_RELAXED);
	ret = outage_set(t, kind, 1);
	if (ret)
		fail(&r, what, "taking the target away: %s", strerror(-ret));
	/* Away for 4 s; a link down until the keep-alive missed it (at most 30 s). */
	for (int i = 0; !gone && (i < 40 || (kind == OUTAGE_LINK && !away && i < 300)); i++) {
		usleep(100000);
		ctrl_state(t, state, sizeof(state));
		away |= strcmp(state, "live") != 0;
	}
	if (!gone) {
		ret = outage_set(t, kind, 0);
		if (ret)
			fail(&r, what, "bringing the target back: %s", strerror(-ret));
		ctrl_wait_live(t, 30, state, sizeof(state));
		if (strcmp(state, "live"))
			fail(&r, what, "the controller is %s 30 s after the target came back",
			     state);
		if (!away)
			fail(&r, what,
			     "the controller never left state live: the target was never missed");
	}
	__atomic_store_n(&c->phase, 2, __ATOMIC_RELAXED);
	if (gone)
		sleep(1);
	else
		back_s = wait_resumed(c, pid, RESUME_S);
	__atomic_store_n(&c->phase, 3, __ATOMIC_RELAXED);
	for (int k = 0; k < 2; k++) {
		int status = 0, waited = 0;

		while (waited < 1200 && waitpid(pid[k], &status, WNOHANG) == 0) {
			usleep(100000);
			waited++;
		}
		if (waited == 1200) {
			/* Killed, it may still wait for its I/O: nothing more can be checked. */
			kill(pid[k], SIGKILL);
			ksft_test_result_fail("%s: the %s hangs (the controller is %s)\n", what,
					      k ? "writer" : "reader", state);
			ksft_exit_fail_msg("remote disk %s hangs\n", t->n.disk);
		} else if (!WIFEXITED(status) || WEXITSTATUS(status)) {
			fail(&r, what, "the %s failed", k ? "writer" : "reader");
		}
	}
	if (c->read_bad)
		fail(&r, what, "%d reads put wrong bytes in GPU memory, first %s", c->read_bad,
		     c->bad);
	if (!gone && (!c->read_ok[2] || !c->write_ok[2]))
		fail(&r, what, "%d s after the target came back: %d reads and %d writes right",
		     RESUME_S, c->read_ok[2], c->write_ok[2]);
	if (!gone)
		check_written(&fs, c, &r, what);
	if (gone && (!c->read_err || !c->write_err))
		fail(&r, what, "with the disk gone: %d reads and %d writes failed, want both > 0",
		     c->read_err, c->write_err);
out:
	fs_teardown(&fs);
	if (gone && g != MAP_FAILED)
		reconnect_and_read(t, &fs, g, &r, what);
	if (g != MAP_FAILED)
		munmap(g, OUT_BUF);
	if (buf >= 0)
		close(buf);
	avail1 = spin_read_ll(path);
	if (avail0 != avail1)
		fail(&r, what, "%lld bytes of GPU memory not back in the pool", avail0 - avail1);
	snprintf(cmd, sizeof(cmd), "%s %s >/dev/console 2>&1",
		 xfs ? "xfs_repair -n" : "e2fsck -fn", fs.base.dev);
	if (run(cmd))
		fail(&r, what, "%s finds the filesystem damaged", cmd);
	if (!gone)
		snprintf(again, sizeof(again), ", both again after %d s", back_s);
	res_result(&r, "%s: %d/%d/%d reads, %d/%d/%d writes right before/away/back, %d/%d failed%s",
		   what, c->read_ok[0], c->read_ok[1], c->read_ok[2], c->write_ok[0],
		   c->write_ok[1], c->write_ok[2], c->read_err, c->write_err, again);
	munmap(c, sizeof(*c));
}

/* A transport end to end; the results it owes are always given. */
static void transport_tests(struct transport *t)
{
	char why[256] = "";
	int ret = 0;

	if (!strcmp(t->n.trtype, "rdma"))
		ret = soft_rdma_up(why, sizeof(why));
	if (!ret)
		ret = spin_nvmet_target_up(&t->n, backing, why, sizeof(why));
	if (!ret)
		ret = spin_nvmet_connect(&t->n, why, sizeof(why));
	ksft_test_result(!ret, "%s: target and host connected: disk %s\n", t->name,
			 ret ? why : t->n.disk);
	if (ret) {
		int owed = 2 * FS_RESULTS + 1 + t->outages * OUTAGES + !strcmp(t->name, "tcp");

		for (int i = 0; i < owed; i++)
			ksft_test_result_fail("%s: not run: no remote disk\n", t->name);
	} else {
		fs_tests(t);
		/*
		 * One filesystem per kind keeps the run short; both checkers
		 * run. xfs takes the disconnect: its log is replayed on the
		 * next mount.
		 */
		for (int k = 0; t->outages && k < NR_OUTAGES; k++)
			target_outage(t, k, k == OUTAGE_DISCONNECT);
		if (!strcmp(t->name, "tcp"))
			mixed_raid1(t);
	}
	ret = spin_nvmet_disconnect(&t->n);
	if (!ret)
		ret = spin_nvmet_disk_wait(&t->n, 0);
	spin_nvmet_target_down(&t->n);
	ksft_test_result(!ret, "%s: disconnected, the disk gone, the target taken down%s (%s)\n",
			 t->name, strcmp(t->n.trtype, "rdma") ? "" : " (its RDMA port stays)",
			 ret ? strerror(-ret) : "ok");
}

/*
 * Multipath: one subsystem exported on a TCP port and a loop port, one ANA
 * group each. The host's multipath joins the two controllers under one disk.
 */
#define MPATH_NQN "spin-remote-mpath"
static struct transport mpaths[] = {
	{ .name = "tcp path", .n = { .trtype = "tcp", .traddr = "127.0.0.1", .svcid = "4422",
				     .port = 4, .nqn = MPATH_NQN } },
	{ .name = "loop path", .n = { .trtype = "loop", .port = 5, .nqn = MPATH_NQN } },
};

static char mpath_disk[2][80];	/* the per-path disks, nvmeXcYnZ, of mpaths[] */

/* The path disk (nvmeXcYnZ) of the head @head that belongs to controller @ctrl. */
static int path_of(const char *head, const char *ctrl, char *out, size_t len)
{
	char dir[PATH_MAX], link[PATH_MAX + 300], target[PATH_MAX];
	struct dirent *e;
	int ret = -ENOENT;
	DIR *d;

	snprintf(dir, sizeof(dir), "/sys/block/%s/multipath", head);
	d = opendir(dir);
	while (d && ret && (e = readdir(d))) {
		ssize_t n;

		if (e->d_name[0] == '.')
			continue;
		snprintf(link, sizeof(link), "/sys/block/%s/device", e->d_name);
		n = readlink(link, target, sizeof(target) - 1);
		if (n <= 0)
			continue;
		target[n] = '\0';
		if (!strcmp(strrchr(target, '/') ? strrchr(target, '/') + 1 : target, ctrl)) {
			snprintf(out, len, "%.70s", e->d_name);
			ret = 0;
		}
	}
	if (d)
		closedir(d);
	return ret;
}

/* Sectors read from the disk @disk so far (its stat file). */
static long long sectors_read(const char *disk)
{
	char path[PATH_MAX], buf[256];
	long long v[3];

	snprintf(path, sizeof(path), "/sys/block/%s/stat", disk);
	if (spin_read_file(path, buf, sizeof(buf)) ||
	    sscanf(buf, "%lld %lld %lld", &v[0], &v[1], &v[2]) != 3)
		return -1;
	return v[2];
}

/* Waits until the host sees path @i in ANA state @state. */
static int ana_wait(int i, const char *state)
{
	char path[PATH_MAX], buf[32];

	snprintf(path, sizeof(path), "/sys/block/%s/ana_state", mpath_disk[i]);
	for (int k = 0; k < 100; k++) {
		if (!spin_read_file(path, buf, sizeof(buf)) && !strcmp(buf, state))
			return 0;
		usleep(100000);
	}
	return -ETIMEDOUT;
}

/*
 * Reads routed while only path @only is ANA-optimized (the other one
 * inaccessible), or both (@only -1): every byte right; with one path, the
 * other one carries none of it.
 */
static void ana_reads(struct router_fs *fs, int only, struct res *r)
{
	static const char *const st[] = { "optimized", "inaccessible" };
	long long before[2], after[2];
	char label[96], why[256];

	for (int i = 0; i < 2; i++) {
		const char *want = only < 0 || i == only ? st[0] : st[1];

		if (spin_nvmet_ana_state(&mpaths[i].n, want) || ana_wait(i, want)) {
			fail(r, "ana", "%s: the host never saw ANA state %s", mpaths[i].name,
			     want);
			return;
		}
	}
	snprintf(label, sizeof(label), "%s only", only < 0 ? "both paths" : mpaths[only].name);
	for (int i = 0; i < 2; i++)
		before[i] = sectors_read(mpath_disk[i]);
	for (long long off = 0; off < (long long)SMALL_LEN; off += 2 * MiB) {
		posix_fadvise(fs->fd, off, 2 * MiB, POSIX_FADV_DONTNEED);
		if (pread(fs->fd, gmem, 2 * MiB, off) != (ssize_t)(2 * MiB) ||
		    spin_gpu_check(gpu, gmem, 2 * MiB, fs->base.seed, off, why, sizeof(why))) {
			fail(r, label, "read at %lld wrong or failed", off);
			return;
		}
	}
	for (int i = 0; i < 2; i++)
		after[i] = sectors_read(mpath_disk[i]);
	if (only >= 0 && (after[only] - before[only] < (long long)(SMALL_LEN / 512) ||
			  after[!only] != before[!only]))
		fail(r, label, "sectors read: %s +%lld, %s +%lld", mpaths[only].name,
		     after[only] - before[only], mpaths[!only].name,
		     after[!only] - before[!only]);
	ksft_print_msg("multipath, %s: sectors read %s +%lld, %s +%lld\n", label,
		       mpaths[0].name, after[0] - before[0], mpaths[1].name,
		       after[1] - before[1]);
}

/*
 * spin/p2p of @disk lists two members, its paths, each without a PCI device
 * and with a queue that refuses P2PDMA pages; their numbers in @maj:@min. A
 * path disk of a multipath head is hidden and has no dev file: the two are
 * told apart from the head and from each other by number alone.
 */
static int members_refused(const char *disk, unsigned int *maj, unsigned int *min)
{
	char path[PATH_MAX], buf[4096], copy[4096];
	unsigned int hmaj, hmin;
	char *line, *save;
	int n = 0, bad = 0;

	snprintf(path, sizeof(path), "/sys/block/%s/dev", disk);
	if (spin_read_file(path, buf, sizeof(buf)) || sscanf(buf, "%u:%u", &hmaj, &hmin) != 2)
		return -ENOENT;
	snprintf(path, sizeof(path), "/sys/block/%s/spin/p2p", disk);
	if (spin_read_file(path, buf, sizeof(buf)))
		return -EIO;
	snprintf(copy, sizeof(copy), "%s", buf);
	for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		unsigned int a, b, q;
		char pdev[64];

		if (sscanf(line, "member %u:%u %63s %u", &a, &b, pdev, &q) != 4)
			continue;
		if (n < 2) {
			maj[n] = a;
			min[n] = b;
		}
		bad |= q || strcmp(pdev, "-") || (a == hmaj && b == hmin);
		n++;
	}
	if (n == 2 && !bad && (maj[0] != maj[1] || min[0] != min[1]))
		return 0;
	for (line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
		ksft_print_msg("%s: %s\n", path, line);
	return -ESRCH;
}

static void mpath_tests(void)
{
	struct router_fs fs = { .base = { .name = "ext4", .serial = MPATH_NQN, .type = "ext4",
					  .dir = "/mnt/rm-mpath", .mkfs = SPIN_MKFS_EXT4,
					  .seed = 86 } };
	unsigned int maj[2] = { 0 }, min[2] = { 0 }, pmaj = 0, pmin = 0;
	char why[256] = "";
	struct res r = { 0 };
	struct obs o;
	int ret = 0;

	for (int i = 0; i < 2 && !ret; i++) {
		ret = spin_nvmet_target_up(&mpaths[i].n, backing, why, sizeof(why));
		if (!ret)
			ret = spin_nvmet_connect(&mpaths[i].n, why, sizeof(why));
	}
	for (int i = 0; i < 2 && !ret; i++) {
		/* A controller's namespace scan, and with it its path, comes after the connect. */
		for (int k = 0; k < SPIN_NVMET_WAIT_S * 10; k++) {
			ret = path_of(mpaths[1].n.disk, mpaths[i].n.ctrl, mpath_disk[i],
				      sizeof(mpath_disk[i]));
			if (!ret)
				break;
			usleep(100000);
		}
		if (ret)
			snprintf(why, sizeof(why), "%s has no path of %s", mpaths[1].n.disk,
				 mpaths[i].n.ctrl);
	}
	if (!ret && strcmp(mpaths[0].n.disk, mpaths[1].n.disk)) {
		snprintf(why, sizeof(why), "two disks %s, %s", mpaths[0].n.disk, mpaths[1].n.disk);
		ret = -EEXIST;
	}
	ksft_test_result(!ret, "multipath: a tcp and a loop path of one subsystem: disk %s%s%s\n",
			 mpaths[1].n.disk, ret ? ": " : "", why);
	if (ret) {
		for (int i = 0; i < MPATH_RESULTS - 2; i++)
			ksft_test_result_fail("multipath: not run: no multipath disk\n");
		goto down;
	}
	fs_setup(&fs, SMALL_LEN);
	if (members_refused(fs.base.disk, maj, min))
		fail(&r, "multipath",
		     "spin/p2p of %s does not list its paths %s and %s as refusing members",
		     fs.base.disk, mpath_disk[0], mpath_disk[1]);
	if (p2p_queue_member(fs.base.disk, &pmaj, &pmin) ||
	    !((pmaj == maj[0] && pmin == min[0]) || (pmaj == maj[1] && pmin == min[1])))
		fail(&r, "multipath", "spin/p2p names %u:%u, no path of %s", pmaj, pmin,
		     fs.base.disk);
	if (!read_observed(&fs, 12345, 3 * MiB + 7, 0, 40 * MiB + 12345 % PG, &o, &r,
			   "multipath")) {
		if (o.d.v[ST_BYTES_P2P] || o.d.v[ST_FB_QUEUE] != 1 ||
		    route_reasons(&o) != BIT(R_QUEUE))
			fail(&r, "multipath", "fallback_queue +%lld, reasons seen %#x",
			     o.d.v[ST_FB_QUEUE], route_reasons(&o));
		for (int k = 0; k < o.tr.nroute; k++)
			if (o.tr.route[k].member_maj != pmaj || o.tr.route[k].member_min != pmin)
				fail(&r, "multipath", "spin_route names %u:%u, spin/p2p %u:%u",
				     o.tr.route[k].member_maj, o.tr.route[k].member_min, pmaj,
				     pmin);
	}
	trace_free(&o.tr);
	res_result(&r,
		   "multipath: both paths listed as refused members (%s, %s), reads right, reason queue, member %u:%u",
		   mpath_disk[0], mpath_disk[1], pmaj, pmin);
	memset(&r, 0, sizeof(r));
	ana_reads(&fs, 0, &r);
	ana_reads(&fs, 1, &r);
	ana_reads(&fs, -1, &r);
	res_result(&r, "multipath: ANA moves the reads from path to path, every byte right");
	/* Both paths optimized again, also after a failure: else umount's writes wait for good. */
	for (int i = 0; i < 2; i++) {
		spin_nvmet_ana_state(&mpaths[i].n, "optimized");
		ana_wait(i, "optimized");
	}
	fs_teardown(&fs);
down:
	ret = 0;
	for (int i = 1; i >= 0; i--) {
		int err = spin_nvmet_disconnect(&mpaths[i].n);

		ret = ret ? ret : err;
	}
	if (!ret)
		ret = spin_nvmet_disk_wait(&mpaths[0].n, 0);
	for (int i = 0; i < 2; i++)
		spin_nvmet_target_down(&mpaths[i].n);
	ksft_test_result(!ret, "multipath: both paths disconnected, the disk gone (%s)\n",
			 ret ? strerror(-ret) : "ok");
}

int main(void)
{
	int ret;

	ksft_print_header();
	ksft_set_plan(RESULTS);
	router_init();
	snprintf(gpu_bdf, sizeof(gpu_bdf), "%s", strrchr(gpu, '/') + 1);
	if (spin_nvme_blockdev(SPIN_NVME2_SERIAL, backing, sizeof(backing)))
		SPIN_SKIP_MISSING("no block device with serial %s", SPIN_NVME2_SERIAL);
	ret = spin_nvmet_init();
	if (ret)
		ksft_exit_fail_msg("nvmet in configfs, the loopback device: %s\n", strerror(-ret));
	for (size_t i = 0; i < ARRAY_SIZE(transports); i++)
		transport_tests(&transports[i]);
	mpath_tests();
	router_took();
	ksft_finished();
}
