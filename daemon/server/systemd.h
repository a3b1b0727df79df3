#pragma once
// systemd integration: readiness notification and socket activation. Without libsystemd (or
// outside systemd) every call is a harmless no-op.

#include <string>

namespace placementd::systemd {

/// sd_notify(), e.g. "READY=1\nSTATUS=...". Returns false when not under systemd.
bool notify(const std::string& state);
/// The listening socket systemd passed (LISTEN_FDS), or -1. Fails loudly on more than one.
int activated_socket();
/// True when built with libsystemd.
bool available();

}  // namespace placementd::systemd
