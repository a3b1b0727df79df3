#pragma once
// Policy work (grouping, sampling, training) runs beside the jobs it serves, often on the cores
// they train on. Its threads are niced so that a CPU-bound job loses next to nothing to them, while
// the I/O thread, which answers the jobs between their steps, keeps its normal priority.

#include <boost/asio/thread_pool.hpp>

namespace placementd {

/// Gives each of `pool`'s `threads` threads the nice value `nice` (0 to 19; Linux nices threads,
/// not processes). Returns once all have it. A thread pool created from an already niced thread
/// inherits its value, LibTorch's included. Throws std::runtime_error with the cause if setting it
/// fails (lowering one's own priority is always allowed, so that means a sandbox forbids it).
void nice_pool_threads(boost::asio::thread_pool& pool, int threads, int nice);

}  // namespace placementd
