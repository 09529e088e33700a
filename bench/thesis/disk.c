/* bench/thesis/disk.c: a slow primary storage for bench/thesis-ch6, an nbdkit plugin run
 * through nbdkit's cc plugin (`nbdkit cc bench/thesis/disk.c EXTRA_CFLAGS='-O2 -fno-math-errno' file=IMG ...`).
 *
 * The thesis' primary storage is a RAID of 7200 RPM disks (Qin, Table 6.1: 0.46 ms
 * sequential read, 6.9 ms random read, 0.67 ms sequential write, 15.7 ms random write).
 * nbdkit's delay filter charges every request the same, so the order in which a cache writes
 * back its dirty blocks (the thesis' ascending flush order, section 4.4.1) could not matter.
 * This plugin models one disk arm: requests are served one at a time (the thread model
 * serializes them), and each costs
 *
 *     xfer_us (+ count / mb_per_s)                if it starts within near bytes of where
 *                                                 the previous request ended;
 *     xfer_us + seek_us * sqrt(distance / size)   otherwise (a seek, longer for a longer
 *                                                 distance; a write adds wseek_extra_us).
 *
 * FLUSH costs flush_us. TRIM punches a hole in the file (free). The data lives in FILE
 * (pread/pwrite; nothing is synced, durability is not what this bench measures).
 *
 * Parameters: file=PATH (required), xfer_us (100), seek_us (4000), wseek_extra_us (2000),
 * near (65536 bytes), mb_per_s (200), flush_us (2000).
 */
#define _GNU_SOURCE
#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define THREAD_MODEL NBDKIT_THREAD_MODEL_SERIALIZE_ALL_REQUESTS

static const char *path;
static int fd = -1;
static int64_t size;
static uint64_t head;
static double xfer_us = 100, seek_us = 4000, wseek_extra_us = 2000, near = 65536;
static double mb_per_s = 200, flush_us = 2000;

static int
disk_config (const char *key, const char *value)
{
  double *d = NULL;
  if (strcmp (key, "file") == 0) {
    path = value;
    return 0;
  }
  if (strcmp (key, "xfer_us") == 0) d = &xfer_us;
  else if (strcmp (key, "seek_us") == 0) d = &seek_us;
  else if (strcmp (key, "wseek_extra_us") == 0) d = &wseek_extra_us;
  else if (strcmp (key, "near") == 0) d = &near;
  else if (strcmp (key, "mb_per_s") == 0) d = &mb_per_s;
  else if (strcmp (key, "flush_us") == 0) d = &flush_us;
  if (d == NULL) {
    nbdkit_error ("disk.c: unknown parameter %s", key);
    return -1;
  }
  char *end;
  *d = strtod (value, &end);
  if (*end != '\0' || *d < 0) {
    nbdkit_error ("disk.c: %s=%s is not a non-negative number", key, value);
    return -1;
  }
  return 0;
}

static int
disk_config_complete (void)
{
  struct stat st;
  if (path == NULL) {
    nbdkit_error ("disk.c: file=PATH is required");
    return -1;
  }
  fd = open (path, O_RDWR);
  if (fd < 0 || fstat (fd, &st) < 0) {
    nbdkit_error ("disk.c: %s: %m", path);
    return -1;
  }
  size = st.st_size;
  if (size <= 0) {
    nbdkit_error ("disk.c: %s is empty", path);
    return -1;
  }
  return 0;
}

static void *
disk_open (int readonly)
{
  return NBDKIT_HANDLE_NOT_NEEDED;
}

static int64_t
disk_get_size (void *h)
{
  return size;
}

/* The time the arm takes for a request of count bytes at offset. */
static void
service (uint32_t count, uint64_t offset, int write)
{
  uint64_t dist = offset > head ? offset - head : head - offset;
  double us = xfer_us + (double) count / mb_per_s;
  if ((double) dist > near) {
    us += seek_us * __builtin_sqrt ((double) dist / (double) size);
    if (write)
      us += wseek_extra_us;
  }
  head = offset + count;
  uint64_t ns = (uint64_t) (us * 1000);
  struct timespec ts = { (time_t) (ns / 1000000000), (long) (ns % 1000000000) };
  while (nanosleep (&ts, &ts) == -1 && errno == EINTR)
    ;
}

static int
disk_pread (void *h, void *buf, uint32_t count, uint64_t offset, uint32_t flags)
{
  service (count, offset, 0);
  while (count > 0) {
    ssize_t r = pread (fd, buf, count, offset);
    if (r < 0) {
      nbdkit_error ("pread: %m");
      return -1;
    }
    if (r == 0) {
      memset (buf, 0, count);
      break;
    }
    buf = (char *) buf + r;
    count -= r;
    offset += r;
  }
  return 0;
}

static int
disk_pwrite (void *h, const void *buf, uint32_t count, uint64_t offset, uint32_t flags)
{
  service (count, offset, 1);
  while (count > 0) {
    ssize_t r = pwrite (fd, buf, count, offset);
    if (r < 0) {
      nbdkit_error ("pwrite: %m");
      return -1;
    }
    buf = (const char *) buf + r;
    count -= r;
    offset += r;
  }
  if ((flags & NBDKIT_FLAG_FUA) && flush_us > 0)
    usleep ((useconds_t) flush_us);
  return 0;
}

static int
disk_flush (void *h, uint32_t flags)
{
  if (flush_us > 0)
    usleep ((useconds_t) flush_us);
  return 0;
}

static int
disk_trim (void *h, uint32_t count, uint64_t offset, uint32_t flags)
{
  if (fallocate (fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, offset, count) < 0) {
    nbdkit_error ("trim: %m");
    return -1;
  }
  return 0;
}

static int
disk_can_trim (void *h)
{
  return 1;
}

static int
disk_can_flush (void *h)
{
  return 1;
}

static int
disk_can_fua (void *h)
{
  return NBDKIT_FUA_NATIVE;
}

static struct nbdkit_plugin plugin = {
  .name = "thesis-disk",
  .config = disk_config,
  .config_complete = disk_config_complete,
  .open = disk_open,
  .get_size = disk_get_size,
  .pread = disk_pread,
  .pwrite = disk_pwrite,
  .flush = disk_flush,
  .trim = disk_trim,
  .can_trim = disk_can_trim,
  .can_flush = disk_can_flush,
  .can_fua = disk_can_fua,
};

NBDKIT_REGISTER_PLUGIN (plugin)
