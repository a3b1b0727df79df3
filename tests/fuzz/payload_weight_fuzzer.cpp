// libFuzzer target: the weight the server reads from a frame's CBOR heads before it decodes it
// (protocol::weigh_payload) against what decoding, and then freeing, that payload takes. The
// server refuses a frame by its weight and holds requests waiting for a session by it, so a
// payload whose decode holds more heap than it weighed would let one client past the limits that
// keep the daemon alive for everyone. The heap is counted through the sanitizer's allocation
// hooks, in glibc's blocks (the request and its header, rounded up to 16 bytes): the blocks the
// weight is written in.

#include <sanitizer/allocator_interface.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include <nlohmann/json.hpp>

#include "placement/protocol.h"
#include "placement/serialization.h"

namespace {

thread_local bool counting = false;
thread_local int64_t live = 0;
thread_local int64_t peak = 0;

int64_t block(size_t bytes) {
  return static_cast<int64_t>(std::max<size_t>(32, (bytes + 8 + 15) & ~size_t{15}));
}

void on_malloc(const volatile void*, size_t size) {
  if (!counting) return;
  live += block(size);
  peak = std::max(peak, live);
}

void on_free(const volatile void* p) {
  if (!counting || p == nullptr) return;
  live -= block(__sanitizer_get_allocated_size(const_cast<const void*>(p)));
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  __sanitizer_install_malloc_and_free_hooks(on_malloc, on_free);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto weight = placement::protocol::weigh_payload(data, size);
  live = peak = 0;
  counting = true;
  try {
    nlohmann::json doc = placement::protocol::decode_payload(data, size, weight);
  } catch (const placement::FormatError&) {
  }
  counting = false;
  if (peak > static_cast<int64_t>(weight.decoded_bytes)) {
    std::fprintf(stderr, "payload_weight_fuzzer: %zu bytes weighed %llu, decoding held %lld\n",
                 size, static_cast<unsigned long long>(weight.decoded_bytes),
                 static_cast<long long>(peak));
    std::abort();
  }
  return 0;
}
