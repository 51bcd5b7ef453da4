// The emulated links' fluid (plan/SharedLinks.h) against hand-worked cases:
// max-min fair shares, one connection's messages in order, the token bucket.
#include <gtest/gtest.h>

#include <limits>

#include "plan/SharedLinks.h"

using dtrain::plan::SharedLinks;

namespace {

// Runs the links until every message sent has arrived.
void drain(SharedLinks& net) {
  for (double t = net.nextEvent(); t < std::numeric_limits<double>::infinity(); t = net.nextEvent()) net.advance(t);
}

}  // namespace

TEST(PlanSharedLinks, AMessageAloneTakesItsTime) {
  SharedLinks net(0);
  EXPECT_EQ(net.nextEvent(), std::numeric_limits<double>::infinity());
  const int a = net.send(0, 0, 1, 2.0, 1.5);
  EXPECT_EQ(net.arrived(a), -1);
  drain(net);
  EXPECT_NEAR(net.arrived(a), 3.5, 1e-12);
}

TEST(PlanSharedLinks, TwoConnectionsOutOfOneLinkShareIt) {
  // A middle stage's activation forward and gradient back, sent together
  // out of its link: both arrive after twice one's time.
  SharedLinks net(0);
  const int forward = net.send(0, 0, 1, 0.0, 1.0), back = net.send(1, 0, 3, 0.0, 1.0);
  drain(net);
  EXPECT_NEAR(net.arrived(forward), 2.0, 1e-12);
  EXPECT_NEAR(net.arrived(back), 2.0, 1e-12);
}

TEST(PlanSharedLinks, OneConnectionsMessagesGoOneAfterAnother) {
  SharedLinks net(0);
  const int first = net.send(7, 0, 1, 0.0, 1.0), second = net.send(7, 0, 1, 0.0, 1.0);
  drain(net);
  EXPECT_NEAR(net.arrived(first), 1.0, 1e-12);
  EXPECT_NEAR(net.arrived(second), 2.0, 1e-12);
}

TEST(PlanSharedLinks, SharesAreMaxMinFair) {
  // Link in 2 carries three messages (a third each); the message beside one
  // of them on link out 0 takes the two thirds left there, and ends at 1.5;
  // the three keep their third (link in 2 still bounds them) and end at 3.
  SharedLinks net(0);
  const int a = net.send(0, 0, 1, 0.0, 1.0);
  const int b = net.send(1, 0, 2, 0.0, 1.0), c = net.send(2, 3, 2, 0.0, 1.0), d = net.send(3, 4, 2, 0.0, 1.0);
  drain(net);
  EXPECT_NEAR(net.arrived(a), 1.5, 1e-9);
  for (int id : {b, c, d}) EXPECT_NEAR(net.arrived(id), 3.0, 1e-9);
}

TEST(PlanSharedLinks, ALaterMessageSlowsOneInFlight) {
  // The first has 1 s alone, then shares from 0.5: its other 0.5 s at half
  // rate end at 1.5; the second's 1 s: 0.5 at half rate, the rest alone, 2.0.
  SharedLinks net(0);
  const int first = net.send(0, 0, 1, 0.0, 1.0);
  net.advance(0.5);
  EXPECT_EQ(net.arrived(first), -1);
  const int second = net.send(1, 0, 2, 0.5, 1.0);
  drain(net);
  EXPECT_NEAR(net.arrived(first), 1.5, 1e-12);
  EXPECT_NEAR(net.arrived(second), 2.0, 1e-12);
}

TEST(PlanSharedLinks, AFullBucketLetsPartOfAMessageThroughAtOnce) {
  // Buckets of 0.4 s of line rate: the first 1 s message on idle links
  // arrives at 0.6; the next, sent then, finds them empty (1.6); after 0.4 s
  // idle they are full again (2.0 + 0.6).
  SharedLinks net(0.4);
  const int a = net.send(0, 0, 1, 0.0, 1.0, 0.4);
  drain(net);
  EXPECT_NEAR(net.arrived(a), 0.6, 1e-12);
  const int b = net.send(0, 0, 1, 0.6, 1.0, 0.4);
  drain(net);
  EXPECT_NEAR(net.arrived(b), 1.6, 1e-12);
  const int c = net.send(0, 0, 1, 2.0, 1.0, 0.4);
  drain(net);
  EXPECT_NEAR(net.arrived(c), 2.6, 1e-12);
}

TEST(PlanSharedLinks, RefusesMessagesIntoThePast) {
  SharedLinks net(0);
  net.advance(1.0);
  EXPECT_THROW(net.send(0, 0, 1, 0.5, 1.0), std::exception);
  EXPECT_THROW(net.send(0, 1, 1, 1.0, 1.0), std::exception);
  EXPECT_THROW(net.advance(0.5), std::exception);
}
