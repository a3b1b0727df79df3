// The handler table refuses what would make dispatch wrong: two handlers for a type, a handler for
// a reply, a handler that does not fit the thread it is declared to run on.

#include <gtest/gtest.h>

#include <stdexcept>

#include "server/handlers.h"

namespace placementd {
namespace {

using placement::protocol::MessageType;

void nothing(Request&) {}
void nothing_on_io(ConnectionState&, Request&) {}

TEST(HandlerTable, FindsWhatWasRegisteredWithItsDeclaration) {
  HandlerTable table;
  table.add(MessageType::kStatus, on_io_thread(Access::kAnyone, "asking", nothing_on_io));
  table.add(MessageType::kProfileReport, on_job_strand("reporting", nothing).needs_version(2));
  table.add(MessageType::kDetach, on_job_strand("detaching", nothing).ending_attachment());
  const Route* profile = table.find(MessageType::kProfileReport);
  ASSERT_NE(profile, nullptr);
  EXPECT_EQ(profile->access, Access::kAttached);
  EXPECT_EQ(profile->runs, Runs::kJobStrand);
  EXPECT_EQ(profile->min_version, 2);
  EXPECT_FALSE(profile->ends_attachment);
  EXPECT_TRUE(table.find(MessageType::kDetach)->ends_attachment);
  EXPECT_EQ(table.find(MessageType::kStatus)->min_version, placement::protocol::kMinVersion);
  EXPECT_EQ(table.find(MessageType::kAttach), nullptr);
  EXPECT_EQ(table.types(),
            (std::vector<MessageType>{MessageType::kDetach, MessageType::kProfileReport,
                                      MessageType::kStatus}));
}

TEST(HandlerTable, RefusesRoutesThatCannotDispatch) {
  HandlerTable table;
  table.add(MessageType::kStatus, on_io_thread(Access::kAnyone, "asking", nothing_on_io));
  EXPECT_THROW(
      table.add(MessageType::kStatus, on_io_thread(Access::kAnyone, "asking", nothing_on_io)),
      std::logic_error);
  EXPECT_THROW(
      table.add(MessageType::kWelcome, on_io_thread(Access::kAnyone, "welcoming", nothing_on_io)),
      std::logic_error);
  Route io_without_handler = on_policy_thread(Access::kAnyone, "listing", nothing);
  io_without_handler.runs = Runs::kIoThread;
  EXPECT_THROW(table.add(MessageType::kListJobs, io_without_handler), std::logic_error);
  Route strand_for_anyone = on_job_strand("reporting", nothing);
  strand_for_anyone.access = Access::kAnyone;
  EXPECT_THROW(table.add(MessageType::kStepReport, strand_for_anyone), std::logic_error);
  EXPECT_EQ(table.types().size(), 1u);
}

}  // namespace
}  // namespace placementd
