#pragma once
// Emulated host links as a fluid: every message in flight gets a share of
// both links it crosses (its sender's link out, its receiver's link in),
// max-min fair, as TCP connections through netsim's tbf queues share them.
// Messages on one connection (one pair of ranks) go one after another.
//
// Why not turns (each message holding a link alone, in the order sent): a
// middle stage of 1F1B sends an activation forward and a gradient back at
// about the same time, and over TCP on one shaped link both arrive together
// after twice one's time, where turns would land the first after one.
//
// Each direction of a link has netsim's token bucket, in seconds of line
// rate, refilled at line rate while the link idles: a message starting takes
// what both its buckets hold (up to its `saving`, its size in seconds of line
// rate) through at once, and each bucket keeps what it held beyond that.
//
// Event by event: the caller sends messages (never into the past), asks when
// the next thing happens on the links (nextEvent) and moves them there
// (advance), so its own events and the links' interleave in time order.
#include <limits>
#include <map>
#include <vector>

namespace dtrain::plan {

class SharedLinks {
 public:
  // refillS: a bucket's size in seconds of line rate (0: no buckets).
  explicit SharedLinks(double refillS) : refillS_(refillS) {}

  // A message of `seconds` on idle links from link `out` into link `in`
  // (numbers of the caller's choosing; out != in) on connection `conn`, sent
  // at `start` (not before now()), leaving once the connection's earlier
  // messages have arrived. Returns its id.
  int send(int conn, int out, int in, double start, double seconds, double saving = 0);
  // When message `id` arrived; -1: not by now().
  double arrived(int id) const { return flows_.at(id).done; }
  // When a message next starts or arrives (infinity: none is sent and due).
  double nextEvent();
  // Moves the links on to `t` (not before now()): the messages due by then
  // have arrived.
  void advance(double t);
  double now() const { return now_; }

 private:
  struct Flow {
    int conn, out, in;
    double start, seconds, saving;  // seconds: what is left to send, at line rate
    bool started = false;
    double done = -1;
    double rate = 0;  // its share of the line rate while in flight
  };
  // One direction of a link: its messages in flight, and its token bucket:
  // `level` when it last went idle at `since` (initially full).
  struct Link {
    int active = 0;
    double level = std::numeric_limits<double>::infinity(), since = 0;
  };

  void settle();
  void start(Flow& f);
  void finish(int id);
  void share();

  double refillS_;
  double now_ = 0;
  bool shared_ = true;  // the rates are the in-flight messages' max-min shares
  std::vector<Link> links_;
  std::vector<Flow> flows_;
  std::map<int, std::vector<int>> queues_;  // per connection, its messages not yet arrived, in the order sent
  std::vector<int> active_;                 // the messages in flight
};

}  // namespace dtrain::plan
