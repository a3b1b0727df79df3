#pragma once
// A one-request HTTP client for the metrics endpoint's tests: the raw response (status line,
// headers, body) of METHOD TARGET sent to "HOST:PORT" (IPv4) or a Unix socket path.

#include <string>

namespace placement::testing {

/// Throws std::runtime_error if it cannot connect; reads until the server closes.
std::string http_request(const std::string& address, const std::string& target,
                         const std::string& method = "GET");

/// The body of a 200 answer to GET /metrics; throws with the response otherwise.
std::string scrape(const std::string& address);

/// A TCP port on 127.0.0.1 that was free a moment ago.
int free_port();

}  // namespace placement::testing
