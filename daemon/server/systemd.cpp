#include "server/systemd.h"

#include <stdexcept>

#ifdef PLACEMENT_HAVE_SYSTEMD
#include <systemd/sd-daemon.h>
#endif

namespace placementd::systemd {

bool available() {
#ifdef PLACEMENT_HAVE_SYSTEMD
  return true;
#else
  return false;
#endif
}

bool notify(const std::string& state) {
#ifdef PLACEMENT_HAVE_SYSTEMD
  return ::sd_notify(0, state.c_str()) > 0;
#else
  (void)state;
  return false;
#endif
}

int activated_socket() {
#ifdef PLACEMENT_HAVE_SYSTEMD
  const int n = ::sd_listen_fds(1);
  if (n < 0) throw std::runtime_error("socket activation: sd_listen_fds failed");
  if (n == 0) return -1;
  if (n > 1)
    throw std::runtime_error("socket activation: expected one socket, systemd passed " +
                             std::to_string(n));
  if (::sd_is_socket_unix(SD_LISTEN_FDS_START, SOCK_STREAM, 1, nullptr, 0) <= 0)
    throw std::runtime_error(
        "socket activation: the passed descriptor is not a listening Unix stream socket");
  return SD_LISTEN_FDS_START;
#else
  return -1;
#endif
}

}  // namespace placementd::systemd
