#pragma once
// After a large decode the heap's freed blocks stay with the daemon: glibc keeps small blocks for
// reuse and trims only the heap's top, so 8 MiB of empty maps left 1.0 GiB resident after the
// request was refused. A decode this large is rare and takes far longer than malloc_trim.

#ifdef __GLIBC__
#include <malloc.h>
#endif

#include <cstdint>

namespace placementd {

inline constexpr uint64_t kTrimAfterDecodedBytes = uint64_t{32} << 20;

/// Gives freed heap memory back to the system once a request that weighed `decoded_bytes` is done
/// with (protocol::weigh_payload).
inline void trim_after_decode(uint64_t decoded_bytes) {
#ifdef __GLIBC__
  if (decoded_bytes >= kTrimAfterDecodedBytes) ::malloc_trim(0);
#else
  (void)decoded_bytes;
#endif
}

}  // namespace placementd
