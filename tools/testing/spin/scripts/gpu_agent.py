# SPDX-License-Identifier: GPL-2.0
"""Host side of the stand-in GPU: reads and writes its memory as a GPU kernel would see it.

The stand-in GPU's BAR is a host file under /dev/shm (QEMU memory-backend-file, share=on).
Guest tests talk to this agent over a serial port (ttyS2 in the guest), one request per line,
one answer per line:

  PING                       -> PONG <size>
  CRC <off> <len>            -> OK <crc32, 8 hex digits>      (zlib's CRC-32 of the bytes)
  FILL <off> <len> <seed> [<poff>]   -> OK                    (write the test pattern)
  CHECK <off> <len> <seed> [<poff>]  -> OK | BAD <offset of the first wrong byte>
  SET <off> <len> <byte>     -> OK                            (memset)
  anything wrong             -> ERR <reason>

The test pattern: the byte at absolute offset o is byte (o % 8), little-endian, of
pattern_word(seed, o // 8); see pattern_words(). FILL and CHECK use the pattern of offsets
[poff, poff + len) (default poff = off), so a test can check GPU memory against the pattern
of the file range it read into it. tools/testing/selftests/spin/spin_lib.c
computes the same pattern in the guest.
"""

import mmap
import os
import threading
import zlib

import numpy as np

M64 = np.uint64(0xFFFFFFFFFFFFFFFF)


def pattern_words(seed, first, count):
    """splitmix64(seed * 2^32 + word index) for COUNT words from index FIRST."""
    with np.errstate(over="ignore"):
        x = (np.arange(first, first + count, dtype=np.uint64)
             + np.uint64((seed << 32) & 0xFFFFFFFFFFFFFFFF))
        x = x + np.uint64(0x9E3779B97F4A7C15)
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        x = x ^ (x >> np.uint64(31))
    return x


def pattern_bytes(seed, off, length):
    first = off // 8
    last = (off + length + 7) // 8
    words = pattern_words(seed, first, last - first).astype("<u8")
    raw = words.tobytes()
    skip = off - first * 8
    return raw[skip:skip + length]


class Agent:
    """Serve one QEMU chardev connection; log every request."""

    CHUNK = 16 << 20

    def __init__(self, path, size, logfile):
        self.path = path
        self.size = size
        self.mem = None
        self.log = open(logfile, "w")
        self.lock = threading.Lock()

    def _map(self):
        if self.mem is None:
            fd = os.open(self.path, os.O_RDWR)
            self.mem = mmap.mmap(fd, self.size)
            os.close(fd)
        return self.mem

    def _range(self, off, length):
        if off < 0 or length < 0 or off + length > self.size:
            raise ValueError(f"range {off}+{length} outside {self.size}")
        return off, length

    def handle(self, line):
        w = line.split()
        if not w:
            return "ERR empty"
        cmd, args = w[0], [int(x, 0) for x in w[1:]]
        if cmd == "PING":
            return f"PONG {self.size}"
        mem = self._map()
        if cmd == "CRC":
            off, length = self._range(*args)
            crc = 0
            for o in range(off, off + length, self.CHUNK):
                n = min(self.CHUNK, off + length - o)
                crc = zlib.crc32(mem[o:o + n], crc)
            return f"OK {crc:08x}"
        if cmd in ("FILL", "CHECK"):
            off, length = self._range(*args[:2])
            seed = args[2]
            delta = (args[3] if len(args) > 3 else off) - off
        if cmd == "FILL":
            for o in range(off, off + length, self.CHUNK):
                n = min(self.CHUNK, off + length - o)
                mem[o:o + n] = pattern_bytes(seed, o + delta, n)
            return "OK"
        if cmd == "CHECK":
            for o in range(off, off + length, self.CHUNK):
                n = min(self.CHUNK, off + length - o)
                want = np.frombuffer(pattern_bytes(seed, o + delta, n), dtype=np.uint8)
                have = np.frombuffer(mem[o:o + n], dtype=np.uint8)
                bad = np.nonzero(want != have)[0]
                if len(bad):
                    return f"BAD {o + int(bad[0])}"
            return "OK"
        if cmd == "SET":
            off, length = self._range(*args[:2])
            mem[off:off + length] = bytes([args[2] & 0xFF]) * length
            return "OK"
        return f"ERR unknown command {cmd}"

    def serve(self, srv):
        try:
            conn, _ = srv.accept()
        except OSError:
            return
        buf = b""
        with conn:
            while True:
                try:
                    data = conn.recv(4096)
                except OSError:
                    return
                if not data:
                    return
                buf += data
                while b"\n" in buf:
                    raw, buf = buf.split(b"\n", 1)
                    line = raw.decode(errors="replace").strip("\r\x00 ")
                    if not line:
                        continue
                    try:
                        answer = self.handle(line)
                    except (ValueError, TypeError, IndexError, OSError) as e:
                        answer = f"ERR {e}"
                    self.log.write(f"{line} -> {answer}\n")
                    self.log.flush()
                    conn.sendall(answer.encode() + b"\n")

    def close(self):
        if self.mem is not None:
            self.mem.close()
        self.log.close()
