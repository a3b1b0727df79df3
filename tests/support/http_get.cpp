#include "http_get.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <stdexcept>

namespace placement::testing {

namespace {

int connect_to(const std::string& address) {
  if (!address.empty() && address[0] == '/') {
    const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un sa{};
    sa.sun_family = AF_UNIX;
    std::strncpy(sa.sun_path, address.c_str(), sizeof(sa.sun_path) - 1);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) == 0) return fd;
    ::close(fd);
  } else {
    const size_t colon = address.rfind(':');
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(static_cast<uint16_t>(std::stoi(address.substr(colon + 1))));
    ::inet_pton(AF_INET, address.substr(0, colon).c_str(), &sa.sin_addr);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) == 0) return fd;
    ::close(fd);
  }
  throw std::runtime_error("cannot connect to " + address + ": " + std::strerror(errno));
}

}  // namespace

std::string http_request(const std::string& address, const std::string& target,
                         const std::string& method) {
  const int fd = connect_to(address);
  const std::string request =
      method + " " + target + " HTTP/1.1\r\nHost: test\r\nContent-Length: 0\r\n\r\n";
  ::send(fd, request.data(), request.size(), MSG_NOSIGNAL);
  std::string response;
  char buffer[65536];
  for (ssize_t n; (n = ::recv(fd, buffer, sizeof(buffer), 0)) > 0;)
    response.append(buffer, static_cast<size_t>(n));
  ::close(fd);
  return response;
}

std::string scrape(const std::string& address) {
  const std::string response = http_request(address, "/metrics");
  if (response.rfind("HTTP/1.1 200", 0) != 0)
    throw std::runtime_error("GET /metrics answered:\n" + response);
  const size_t body = response.find("\r\n\r\n");
  return body == std::string::npos ? "" : response.substr(body + 4);
}

int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa));
  socklen_t len = sizeof(sa);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len);
  ::close(fd);
  return ntohs(sa.sin_port);
}

}  // namespace placement::testing
