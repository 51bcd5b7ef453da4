#include "plan/SharedLinks.h"

#include <algorithm>

#include "core/Error.h"

namespace dtrain::plan {

namespace {
// What is left of a message once it has been sent, to the rounding of its
// times (relative to the clock: a step shorter than its last digit moves nothing).
double sentBy(double now) { return 1e-12 * std::max(1.0, now); }
}  // namespace

int SharedLinks::send(int conn, int out, int in, double start, double seconds, double saving) {
  DTRAIN_CHECK(out != in && out >= 0 && in >= 0, "shared links: a message from link ", out, " into link ", in);
  DTRAIN_CHECK(start >= now_, "shared links: a message sent at ", start, " s, before ", now_, " s");
  const int top = std::max(out, in);
  if (top >= static_cast<int>(links_.size())) links_.resize(top + 1);
  flows_.push_back({conn, out, in, start, seconds, saving});
  const int id = static_cast<int>(flows_.size()) - 1;
  queues_[conn].push_back(id);
  settle();
  return id;
}

double SharedLinks::nextEvent() {
  settle();
  if (!shared_) share();
  double next = std::numeric_limits<double>::infinity();
  for (const auto& [conn, queue] : queues_) {
    const Flow& f = flows_[queue.front()];
    next = std::min(next, f.started ? now_ + f.seconds / f.rate : f.start);
  }
  return next;
}

void SharedLinks::advance(double t) {
  DTRAIN_CHECK(t >= now_, "shared links: moved back from ", now_, " s to ", t, " s");
  for (;;) {
    const double next = nextEvent();
    const double to = std::min(next, t);
    for (int id : active_) flows_[id].seconds -= flows_[id].rate * (to - now_);
    now_ = to;
    settle();
    if (next >= t) return;
  }
}

// Messages that ran out arrive; the messages at the head of their connection
// and due start (in the order sent: each sees the buckets as the ones before
// it left them); one its buckets carried whole arrives at once.
void SharedLinks::settle() {
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t i = 0; i < active_.size();)
      if (flows_[active_[i]].seconds <= sentBy(now_)) {
        finish(active_[i]);
        changed = true;
      } else {
        ++i;
      }
    std::vector<int> due;
    for (const auto& [conn, queue] : queues_) {
      const Flow& f = flows_[queue.front()];
      if (!f.started && f.start <= now_) due.push_back(queue.front());
    }
    std::sort(due.begin(), due.end());
    for (int id : due) start(flows_[id]), active_.push_back(id), changed = true;
  }
}

void SharedLinks::start(Flow& f) {
  f.started = true;
  double held = f.saving;
  for (int l : {f.out, f.in}) {
    Link& k = links_[l];
    const double level = k.active == 0 ? std::min(refillS_, k.level + (now_ - k.since)) : k.level;
    held = std::min(held, level);
    k.level = std::max(0.0, level - f.saving);
    ++k.active;
  }
  if (f.saving > 0) f.seconds = std::max(0.0, f.seconds - held);
  shared_ = false;
}

void SharedLinks::finish(int id) {
  Flow& f = flows_[id];
  f.done = now_;
  for (int l : {f.out, f.in})
    if (--links_[l].active == 0) links_[l].since = now_;
  active_.erase(std::find(active_.begin(), active_.end(), id));
  std::vector<int>& queue = queues_.at(f.conn);
  queue.erase(queue.begin());
  if (queue.empty()) queues_.erase(f.conn);
  shared_ = false;
}

// Max-min fair rates: a message alone on both its links has the line rate;
// among the rest, the link with the smallest share per message fixes its
// messages' rate, and the others share what is left.
void SharedLinks::share() {
  shared_ = true;
  std::vector<Flow*> open;
  for (int id : active_) {
    Flow& f = flows_[id];
    if (links_[f.out].active == 1 && links_[f.in].active == 1) f.rate = 1;
    else open.push_back(&f);
  }
  if (open.empty()) return;
  std::vector<double> left(links_.size(), 1.0);
  std::vector<int> count(links_.size(), 0);
  for (const Flow* f : open) ++count[f->out], ++count[f->in];
  while (!open.empty()) {
    int tight = -1;
    for (size_t l = 0; l < left.size(); ++l)
      if (count[l] > 0 && (tight < 0 || left[l] / count[l] < left[tight] / count[tight]))
        tight = static_cast<int>(l);
    const double rate = left[tight] / count[tight];
    std::vector<Flow*> rest;
    for (Flow* f : open) {
      if (f->out != tight && f->in != tight) {
        rest.push_back(f);
        continue;
      }
      f->rate = rate;
      for (int l : {f->out, f->in}) left[l] -= rate, --count[l];
    }
    open = std::move(rest);
  }
}

}  // namespace dtrain::plan
