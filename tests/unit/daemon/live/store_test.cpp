#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <future>
#include <thread>

#include <nlohmann/json.hpp>

#include "live/store.h"
#include "placement/serialization.h"
#include "test_graphs.h"

namespace placementd {
namespace {

namespace fs = std::filesystem;

class StoreTest : public ::testing::Test {
 protected:
  void TearDown() override { fs::remove_all(dir); }
  std::string dir = (fs::temp_directory_path() / ("store." + std::to_string(::getpid()))).string();
};

TEST_F(StoreTest, KeepsTheFastestPlacementPerGraphAndDeviceSet) {
  Store store(dir);
  const auto g = placement::testing::chain(4);
  const auto d = placement::testing::devices(2);
  EXPECT_FALSE(store.best(0, g, d));
  EXPECT_TRUE(store.offer(0, g, d, {{{0, 0, 1, 1}}, 2.0, "a"}));
  EXPECT_FALSE(store.offer(0, g, d, {{{1, 1, 1, 1}}, 3.0, "b"})) << "slower must not replace";
  EXPECT_TRUE(store.offer(0, g, d, {{{0, 1, 1, 1}}, 1.5, "c"}));
  EXPECT_DOUBLE_EQ(store.best(0, g, d)->step_time_s, 1.5)
      << "answered from memory before the write";
  store.flush();
  const auto best = Store(dir).best(0, g, d);  // a new instance reads what the old one wrote
  ASSERT_TRUE(best);
  EXPECT_EQ(best->placement.device_of_op, (std::vector<int>{0, 1, 1, 1}));
  EXPECT_DOUBLE_EQ(best->step_time_s, 1.5);
  EXPECT_EQ(best->job, "c");
  EXPECT_FALSE(store.best(0, placement::testing::chain(5), d)) << "another model has its own entry";
  EXPECT_FALSE(store.best(0, g, placement::testing::devices(3)))
      << "another device set has its own entry";
}

TEST_F(StoreTest, MemoryHoldsABoundedNumberOfPlacementsAndReadsTheRestAgain) {
  // A uid's jobs may upload graph after graph over the daemon's life: what the store keeps in
  // memory stays within its bound, and a placement dropped from memory is read again from disk.
  Store store(dir, 20);
  const auto d = placement::testing::devices(2);
  for (int n = 2; n < 12; ++n) {
    const auto g = placement::testing::chain(n);
    ASSERT_TRUE(store.offer(0, g, d, {placement::Placement::single(g, n % 2), 1.0 + n, "j"}));
    store.flush();  // on disk: what memory held may now go
    EXPECT_LE(store.cached_ops(), 20u + static_cast<size_t>(n)) << n;
  }
  store.best(0, placement::testing::chain(11), d);  // a lookup trims what the writes left
  EXPECT_LE(store.cached_ops(), 20u);
  const auto first = store.best(0, placement::testing::chain(2), d);
  ASSERT_TRUE(first) << "dropped from memory, read again from disk";
  EXPECT_DOUBLE_EQ(first->step_time_s, 3.0);
  EXPECT_EQ(first->placement.device_of_op, (std::vector<int>{0, 0}));
  EXPECT_LE(store.cached_ops(), 20u);
  // A placement whose write has not happened yet is the only copy: it is never dropped.
  Store unwritten(dir + "/other", 1);
  const auto g = placement::testing::chain(6);
  ASSERT_TRUE(unwritten.offer(0, g, d, {placement::Placement::single(g, 1), 2.0, "k"}));
  EXPECT_FALSE(unwritten.best(0, placement::testing::chain(7), d));
  EXPECT_DOUBLE_EQ(unwritten.best(0, g, d)->step_time_s, 2.0);
}

TEST_F(StoreTest, EachUidHasItsOwnAndTheSharedFilesOfBeforeAreNotUsed) {
  const auto g = placement::testing::chain(2);
  const auto d = placement::testing::devices(2);
  {
    Store store(dir);
    EXPECT_TRUE(store.offer(1000, g, d, {{{0, 1}}, 1.0, "theirs"}));
    EXPECT_FALSE(store.best(1001, g, d)) << "another uid's";
    EXPECT_TRUE(store.offer(1001, g, d, {{{1, 1}}, 5.0, "mine"}))
        << "slower, but the first of this uid";
    store.save_policy_state(1000, g, d, "a+b+c", "state");
    EXPECT_FALSE(store.policy_state(1001, g, d, "a+b+c"));
  }
  EXPECT_EQ(fs::status(fs::path(dir) / "placements" / "1000").permissions() & fs::perms::all,
            fs::perms::owner_all);
  EXPECT_DOUBLE_EQ(Store(dir).best(1001, g, d)->step_time_s, 5.0);
  // A file of the layout before per-user state: whose it is is unknown, so nobody starts from it.
  for (const auto& f : fs::directory_iterator(fs::path(dir) / "placements" / "1000"))
    fs::rename(f.path(), fs::path(dir) / "placements" / f.path().filename());
  EXPECT_FALSE(Store(dir).best(1000, g, d));
}

TEST_F(StoreTest, AFileDeletedWhileTheStoreRunsIsForgotten) {
  Store store(dir);
  const auto g = placement::testing::chain(2);
  const auto d = placement::testing::devices(2);
  EXPECT_TRUE(store.offer(7, g, d, {{{0, 1}}, 1.0, "a"}));
  store.flush();
  for (const auto& f : fs::directory_iterator(fs::path(dir) / "placements" / "7"))
    fs::remove(f.path());
  EXPECT_FALSE(store.best(7, g, d)) << "the admin forgot it";
  EXPECT_TRUE(store.offer(7, g, d, {{{1, 1}}, 3.0, "b"}))
      << "a slower one is the best there is now";
  store.flush();
  EXPECT_DOUBLE_EQ(Store(dir).best(7, g, d)->step_time_s, 3.0);
  // An admin shares uid 7's file with uid 8, whose best the store knew to be none.
  EXPECT_FALSE(store.best(8, g, d));
  fs::create_directories(fs::path(dir) / "placements" / "8");
  for (const auto& f : fs::directory_iterator(fs::path(dir) / "placements" / "7"))
    fs::copy_file(f.path(), fs::path(dir) / "placements" / "8" / f.path().filename());
  ASSERT_TRUE(store.best(8, g, d)) << "the copy is read";
  EXPECT_DOUBLE_EQ(store.best(8, g, d)->step_time_s, 3.0);
  EXPECT_FALSE(store.offer(8, g, d, {{{0, 0}}, 4.0, "c"}))
      << "and a slower offer does not replace it";
}

TEST_F(StoreTest, AFlushWithATimeoutDoesNotWaitForAWriterThatHangs) {
  Store store(dir);
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  store.after_writes([released] { released.wait(); });  // the writer hangs, as on a dead disk
  const auto g = placement::testing::chain(2);
  const auto d = placement::testing::devices(2);
  EXPECT_TRUE(store.offer(3, g, d, {{{0, 1}}, 1.0, "a"}));
  const auto started = std::chrono::steady_clock::now();
  EXPECT_FALSE(store.flush_within(std::chrono::milliseconds(100)));
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(2));
  EXPECT_FALSE(store.on_disk(3, g, d));
  release.set_value();
  EXPECT_TRUE(store.flush_within(std::chrono::seconds(10)));
  EXPECT_TRUE(store.on_disk(3, g, d));
}

// A daemon killed mid-write leaves "<file>.tmp.<pid>.<random>" (an older one "<file>.tmp.<pid>");
// the next store removes those of processes that are gone and leaves a live writer's alone.
TEST_F(StoreTest, UnfinishedWritesOfAKilledDaemonAreRemoved) {
  Store(dir).flush();
  const std::string dead = dir + "/placements/a-b.json.tmp.999999999.0badf00d";
  const std::string dead_older = dir + "/placements/c-d.json.tmp.999999999";
  const std::string live =
      dir + "/policies/a-b-key.bin.tmp." + std::to_string(::getpid()) + ".12345678";
  const std::string named_like_one = dir + "/placements/notes.tmp.x";
  for (const std::string& f : {dead, dead_older, live, named_like_one})
    std::ofstream(f) << "{\"half";
  Store store(dir);
  EXPECT_FALSE(fs::exists(dead));
  EXPECT_FALSE(fs::exists(dead_older));
  EXPECT_TRUE(fs::exists(live)) << "a running process may still rename it";
  EXPECT_TRUE(fs::exists(named_like_one)) << "not one of the store's temporaries";
}

TEST_F(StoreTest, ADamagedFileIsIgnoredNotFatalAndReplaced) {
  const auto g = placement::testing::chain(2);
  const auto d = placement::testing::devices(2);
  {
    Store store(dir);
    store.offer(0, g, d, {{{0, 1}}, 1.0, "a"});
  }  // the destructor finishes the write
  for (const auto& f : fs::recursive_directory_iterator(fs::path(dir) / "placements"))
    if (f.is_regular_file()) std::ofstream(f.path()) << "{broken";
  Store store(dir);
  EXPECT_FALSE(store.best(0, g, d));
  EXPECT_TRUE(store.offer(0, g, d, {{{1, 1}}, 5.0, "b"})) << "a damaged entry is replaced";
  store.flush();
  EXPECT_DOUBLE_EQ(Store(dir).best(0, g, d)->step_time_s, 5.0);
}

TEST_F(StoreTest, AFileWithATimeNoJobCouldBeatIsIgnored) {
  // Whoever could write the state directory could plant a 0 s (or negative, or NaN) best, which no
  // measured step would ever replace; such a file is reported and ignored like a damaged one.
  const auto g = placement::testing::chain(2);
  const auto d = placement::testing::devices(2);
  const StoredPlacement good{{{0, 1}}, 1.0, "a"};
  for (const char* time : {"0", "-1.0", "null", "\"fast\""}) {
    std::string file = stored_placement_file(g, d, good);
    const std::string key = "\"step_time_s\":";
    const size_t at = file.find(key) + key.size();
    file.replace(at, file.find_first_of(",}", at) - at, time);
    {
      Store store(dir);
      store.offer(0, g, d, good);
    }
    for (const auto& f : fs::recursive_directory_iterator(fs::path(dir) / "placements"))
      if (f.is_regular_file()) std::ofstream(f.path()) << file;
    EXPECT_FALSE(Store(dir).best(0, g, d)) << time;
    EXPECT_THROW(stored_placement_from_json(nlohmann::json::parse(file), g, d),
                 placement::FormatError)
        << time;
    fs::remove_all(dir);
  }
  EXPECT_DOUBLE_EQ(
      stored_placement_from_json(nlohmann::json::parse(stored_placement_file(g, d, good)), g, d)
          .step_time_s,
      1.0);
}

TEST_F(StoreTest, APolicyStateIsReadBackBeforeAndAfterItsWrite) {
  const auto g = placement::testing::chain(3);
  const auto d = placement::testing::devices(2);
  Store store(dir);
  EXPECT_FALSE(store.policy_state(0, g, d, "a+b+c"));
  for (int i = 0; i < 50; ++i)
    store.save_policy_state(0, g, d, "a+b+c", "state " + std::to_string(i));
  EXPECT_EQ(*store.policy_state(0, g, d, "a+b+c"), "state 49") << "the latest, written or not";
  store.flush();
  EXPECT_EQ(*Store(dir).policy_state(0, g, d, "a+b+c"), "state 49");
  EXPECT_THROW(store.save_policy_state(0, g, d, "../escape", "x"), std::invalid_argument);
}

TEST_F(StoreTest, JobsOfOneModelOfferingAtOnceLeaveTheFastestOnDisk) {
  const auto g = placement::testing::chain(4);
  const auto d = placement::testing::devices(2);
  Store store(dir);
  std::vector<std::thread> jobs;
  for (int job = 0; job < 4; ++job)
    jobs.emplace_back([&, job] {
      for (int i = 200; i > 0; --i)
        store.offer(0, g, d, {{{0, 0, 1, job % 2}}, 1.0 + i + 0.25 * job, "job"});
    });
  for (auto& t : jobs) t.join();
  store.flush();
  EXPECT_DOUBLE_EQ(Store(dir).best(0, g, d)->step_time_s, 2.0);
}

TEST_F(StoreTest, AWriteThatFailsIsCountedAndNotOnDisk) {
  const auto g = placement::testing::chain(2);
  const auto d = placement::testing::devices(2);
  Store store(dir);
  // A file where the directory was: every write into it fails, whoever runs the test (root too).
  fs::remove_all(fs::path(dir) / "placements");
  std::ofstream(fs::path(dir) / "placements") << "not a directory";
  EXPECT_TRUE(store.offer(0, g, d, {{{0, 1}}, 2.0, "a"}));
  EXPECT_FALSE(store.on_disk(0, g, d)) << "pending";
  store.flush();
  EXPECT_FALSE(store.on_disk(0, g, d)) << "failed";
  EXPECT_EQ(store.failed_writes(), 1u);
  EXPECT_DOUBLE_EQ(store.best(0, g, d)->step_time_s, 2.0) << "memory still holds it";
  // A slower offer while the disk still fails: the best is tried again, and fails again.
  EXPECT_FALSE(store.offer(0, g, d, {{{1, 0}}, 3.0, "slower"}));
  store.flush();
  EXPECT_EQ(store.failed_writes(), 2u);
  // Once the directory is back, the next offer, even a slower one, writes the best it holds.
  fs::remove(fs::path(dir) / "placements");
  fs::create_directories(fs::path(dir) / "placements");
  EXPECT_FALSE(store.offer(0, g, d, {{{1, 0}}, 3.0, "slower"}));
  store.flush();
  EXPECT_TRUE(store.on_disk(0, g, d));
  EXPECT_EQ(store.failed_writes(), 2u);
  const auto read_back = Store(dir).best(0, g, d);
  ASSERT_TRUE(read_back);
  EXPECT_EQ(read_back->job, "a");
  EXPECT_DOUBLE_EQ(read_back->step_time_s, 2.0);
  // And a better one replaces it as before.
  EXPECT_TRUE(store.offer(0, g, d, {{{1, 1}}, 1.0, "b"}));
  store.flush();
  EXPECT_EQ(Store(dir).best(0, g, d)->job, "b");
}

TEST_F(StoreTest, EachUidsFilesAreHeldToItsBoundByRemovingItsLeastRecentlyWritten) {
  // One user uploading model after model would otherwise fill the disk the daemon shares.
  const auto d = placement::testing::devices(2);
  const std::string state(1000, 's');  // a policy state of 1000 bytes
  Store store(dir);
  store.set_max_bytes_per_uid(3500);
  for (int n = 2; n < 7; ++n) {
    store.save_policy_state(1000, placement::testing::chain(n), d, "a+b+c", state);
    store.flush();
  }
  EXPECT_EQ(store.bytes_of(1000), 3000u) << "three of the five fit";
  EXPECT_EQ(store.removed_files(), 2u);
  EXPECT_FALSE(store.policy_state(1000, placement::testing::chain(2), d, "a+b+c"))
      << "the least recently written went first";
  EXPECT_FALSE(store.policy_state(1000, placement::testing::chain(3), d, "a+b+c"));
  for (int n = 4; n < 7; ++n)
    EXPECT_EQ(store.policy_state(1000, placement::testing::chain(n), d, "a+b+c"), state) << n;
  // A placement of another uid is not counted against this one, nor touched.
  const auto g = placement::testing::chain(2);
  ASSERT_TRUE(store.offer(2000, g, d, {{{0, 1}}, 1.0, "other"}));
  store.flush();
  store.save_policy_state(1000, placement::testing::chain(7), d, "a+b+c", state);
  store.flush();
  EXPECT_TRUE(store.best(2000, g, d));
  EXPECT_GT(store.bytes_of(2000), 0u);
  EXPECT_EQ(store.bytes_of(1000), 3000u);
  // Rewriting a file replaces its bytes; it is then the most recent.
  store.save_policy_state(1000, placement::testing::chain(5), d, "a+b+c", state);
  store.flush();
  store.save_policy_state(1000, placement::testing::chain(8), d, "a+b+c", state);
  store.flush();
  EXPECT_FALSE(store.policy_state(1000, placement::testing::chain(6), d, "a+b+c"));
  EXPECT_TRUE(store.policy_state(1000, placement::testing::chain(5), d, "a+b+c"));
  EXPECT_EQ(store.failed_writes(), 0u);
}

TEST_F(StoreTest, TheBoundCountsWhatTheDiskHeldAtStartAndRefusesAFileLargerThanItAll) {
  const auto d = placement::testing::devices(2);
  const std::string state(1000, 's');
  {
    Store store(dir);
    for (int n = 2; n < 5; ++n) {
      const auto g = placement::testing::chain(n);
      ASSERT_TRUE(store.offer(1000, g, d, {placement::Placement::single(g, 0), 1.0, "j"}));
      store.save_policy_state(1000, g, d, "a+b+c", state);
      store.flush();
    }
  }
  Store store(dir);
  store.set_max_bytes_per_uid(2500);
  store.save_policy_state(1000, placement::testing::chain(9), d, "a+b+c", state);
  store.flush();
  EXPECT_LE(store.bytes_of(1000), 2500u) << "the files of the last run were counted";
  EXPECT_TRUE(store.policy_state(1000, placement::testing::chain(9), d, "a+b+c"));
  EXPECT_FALSE(store.policy_state(1000, placement::testing::chain(2), d, "a+b+c"));
  EXPECT_FALSE(store.best(1000, placement::testing::chain(2), d))
      << "a removed placement is gone from memory too";
  const uint64_t before = store.bytes_of(1000);
  store.save_policy_state(1000, placement::testing::chain(10), d, "a+b+c", std::string(3000, 'x'));
  store.flush();
  EXPECT_EQ(store.failed_writes(), 1u) << "larger than the whole bound: not written";
  EXPECT_FALSE(store.policy_state(1000, placement::testing::chain(10), d, "a+b+c"));
  EXPECT_EQ(store.bytes_of(1000), before) << "and nothing removed for it";
}

}  // namespace
}  // namespace placementd
