// A C library's complaints on stdout kept off it (placement/library_output.h).

#include <gtest/gtest.h>

#include <cstdio>
#include <stdexcept>

#include "placement/library_output.h"

namespace placement {
namespace {

TEST(LibraryOutput, WhatACallPrintsIsReturnedAndStdoutIsTheProcesssAgainAfter) {
  ::testing::internal::CaptureStdout();  // where the process's stdout goes in this test
  const std::string said = capture_stdout([] { std::printf("\t***a library's complaint\n"); });
  std::printf("the program's own line\n");
  std::fflush(stdout);
  EXPECT_EQ(::testing::internal::GetCapturedStdout(), "the program's own line\n");
  EXPECT_EQ(said, "\t***a library's complaint\n");
}

TEST(LibraryOutput, ACallThatThrowsLeavesStdoutAsItWas) {
  ::testing::internal::CaptureStdout();
  EXPECT_THROW(capture_stdout([] {
                 std::printf("half a line");
                 throw std::runtime_error("failed");
               }),
               std::runtime_error);
  std::printf("after\n");
  std::fflush(stdout);
  EXPECT_EQ(::testing::internal::GetCapturedStdout(), "after\n");
}

TEST(LibraryOutput, OnlyTheFirstKibibyteIsKept) {
  const std::string said = capture_stdout([] {
    for (int i = 0; i < 400; ++i) std::printf("complaint\n");
  });
  EXPECT_EQ(said.size(), 1024u);
  EXPECT_EQ(said.substr(0, 10), "complaint\n");
}

}  // namespace
}  // namespace placement
