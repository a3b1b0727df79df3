// LD_PRELOAD'ed into placementd by the fault suite where it cannot mount a 1 MiB tmpfs (not root):
// while the file $PLACEMENT_FAULT_ENOSPC_SWITCH exists, write() to any file under
// $PLACEMENT_FAULT_ENOSPC_DIR fails with ENOSPC, as on a full disk. Everything else is untouched.

#include <dlfcn.h>
#include <limits.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

using WriteFn = ssize_t (*)(int, const void*, size_t);

bool disk_full_for(int fd) {
  const char* dir = std::getenv("PLACEMENT_FAULT_ENOSPC_DIR");
  const char* on = std::getenv("PLACEMENT_FAULT_ENOSPC_SWITCH");
  if (!dir || !on || ::access(on, F_OK) != 0) return false;
  char link[64], target[PATH_MAX];
  std::snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
  const ssize_t n = ::readlink(link, target, sizeof(target) - 1);
  if (n <= 0) return false;
  target[n] = 0;
  return std::strncmp(target, dir, std::strlen(dir)) == 0;
}

}  // namespace

extern "C" ssize_t write(int fd, const void* data, size_t size) {
  static const WriteFn real = reinterpret_cast<WriteFn>(::dlsym(RTLD_NEXT, "write"));
  if (disk_full_for(fd)) {
    errno = ENOSPC;
    return -1;
  }
  return real(fd, data, size);
}
