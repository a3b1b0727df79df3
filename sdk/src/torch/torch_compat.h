#pragma once
// The LibTorch API differences placementd meets between the versions it builds against (Debian's
// 1.13 and PyPI's 2.11), in one place. Each entry names the versions and what changed; code
// elsewhere calls these instead of testing TORCH_VERSION itself.
//
// 1. torch::optim files a parameter's state under a key that was a std::string of the TensorImpl
//    address (`c10::guts::to_string(impl)`) up to 1.13 and is the address itself (`void*`) from 2.0
//    on; c10::guts::to_string was removed in 2.2, so no code may name it.
//    -> optimizer_state_key().

#include <sstream>
#include <string>
#include <type_traits>

#include <c10/core/TensorImpl.h>

namespace placement::detail {

/// The key `optimizer.state()` files the state of the parameter behind `impl` under. `Map` is the
/// type of that map, whose key type tells the version's convention.
template <class Map>
typename Map::key_type optimizer_state_key(const Map&, c10::TensorImpl* impl) {
  using Key = typename Map::key_type;
  if constexpr (std::is_same_v<Key, std::string>) {
    // What 1.x's c10::guts::to_string did: the pointer written by an ostream.
    std::ostringstream out;
    out << static_cast<const void*>(impl);
    return out.str();
  } else {
    return static_cast<Key>(impl);
  }
}

}  // namespace placement::detail
