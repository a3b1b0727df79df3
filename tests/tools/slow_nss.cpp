// LD_PRELOAD into placementd: its group lookups (getgrnam_r) take SLOW_NSS_MS milliseconds, like a
// directory server that answers slowly, then give the real answer. Isolation tests use it to show
// that one user's slow lookup holds back no other connection.

#include <dlfcn.h>
#include <grp.h>
#include <unistd.h>

#include <cstdlib>

extern "C" int getgrnam_r(const char* name, struct group* entry, char* buffer, size_t size,
                          struct group** result) {
  using Lookup = int (*)(const char*, struct group*, char*, size_t, struct group**);
  static const auto real = reinterpret_cast<Lookup>(::dlsym(RTLD_NEXT, "getgrnam_r"));
  if (const char* ms = std::getenv("SLOW_NSS_MS"))
    ::usleep(static_cast<useconds_t>(std::atoi(ms)) * 1000);
  return real(name, entry, buffer, size, result);
}
