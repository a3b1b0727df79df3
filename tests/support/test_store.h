#pragma once
// A Store in a fresh directory named after the running test, for the tests of code that persists.

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>

#include "live/store.h"

namespace placementd::testing {

class TestStore {
 public:
  explicit TestStore(const std::string& prefix)
      : dir(std::filesystem::temp_directory_path() /
            (prefix + "_" + std::to_string(::getpid()) + "_" + test_name())) {
    std::filesystem::remove_all(dir);
    store_ = std::make_unique<Store>(dir.string());
  }
  ~TestStore() {
    store_.reset();  // finishes its writes: the directory is not removed under its writer
    std::filesystem::remove_all(dir);
  }
  TestStore(const TestStore&) = delete;
  TestStore& operator=(const TestStore&) = delete;

  Store& operator*() const { return *store_; }
  Store* operator->() const { return store_.get(); }

  const std::filesystem::path dir;

 private:
  // A parameterized test's name has a '/' ("Name/3"), which would leave a directory behind.
  static std::string test_name() {
    std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    for (char& c : name)
      if (c == '/') c = '_';
    return name;
  }

  std::unique_ptr<Store> store_;
};

}  // namespace placementd::testing
