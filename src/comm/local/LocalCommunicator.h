#pragma once
// The `local` backend: N ranks as threads of one process. Collectives default to
// direct shared-memory algorithms (each rank reads its peers' buffers); the
// generic ring/rhd/tree/hier algorithms run over the in-process mailboxes.
#include <memory>

#include "comm/Communicator.h"
#include "comm/local/World.h"

namespace dtrain::comm::local {

class LocalCommunicator : public Communicator {
 public:
  LocalCommunicator(std::shared_ptr<World> world, int rank, Millis timeout);
  ~LocalCommunicator() override;
  const char* backend() const override { return "local"; }

  WorkPtr isendBytes(const void* data, size_t bytes, int dst, int tag, Channel ch) override;
  WorkPtr irecvBytes(void* data, size_t bytes, int src, int tag, Channel ch) override;
  bool supports(Algorithm algo) const override;
  Algorithm chooseAllreduce(size_t bytes) const override;
  World& world() { return *world_; }

 protected:
  // Publishes this rank's call and buffers, waits for every rank, compares calls.
  void checkCall(const Call& call) override;
  bool checksEnabled() const override { return true; }
  void execute(Call& call) override;
  std::unique_ptr<Communicator> splitImpl(int color, int key, Call& call) override;

 private:
  void barrier(const Call& call);
  bool smallAllreduce(const Call& call) const;
  // Shared-memory collectives (ShmCollectives.cpp); run after checkCall.
  void shmAllreduce(Call& call);
  void shmBroadcast(Call& call);
  void shmReduce(Call& call);
  void shmAllgatherv(Call& call);
  void shmReduceScatter(Call& call);
  void shmAlltoall(Call& call);

  std::shared_ptr<World> world_;
  uint64_t barrierGen_ = 0;
  uint64_t calls_ = 0;  // collectives checked so far (same on every rank)
};

}  // namespace dtrain::comm::local
