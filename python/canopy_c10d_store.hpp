// torch's c10d::Store over a Canopy store: what init_method="etcd://..." hands torch, so that every backend
// (gloo's too) meets through Canopy's etcd store, and a canopy process group reaches that store again
// directly (canopy_store_behind) instead of through two adapters.
#pragma once

#include <memory>
#include <string>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "canopy/store.hpp"

namespace canopy::pytorch {

class CanopyC10dStore final : public c10d::Store {
 public:
  // `address` names the store in errors ("etcd://h:2379/job").
  CanopyC10dStore(std::shared_ptr<canopy::Store> store, std::string address);

  void set(const std::string& key, const std::vector<uint8_t>& value) override;
  std::vector<uint8_t> compareSet(const std::string& key, const std::vector<uint8_t>& current,
                                  const std::vector<uint8_t>& desired) override;
  std::vector<uint8_t> get(const std::string& key) override;
  int64_t add(const std::string& key, int64_t value) override;
  bool deleteKey(const std::string& key) override;
  bool check(const std::vector<std::string>& keys) override;
  int64_t getNumKeys() override;  // refused: an etcd prefix's keys are not counted
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override;

  const std::shared_ptr<canopy::Store>& canopy_store() const { return store_; }

 private:
  std::shared_ptr<canopy::Store> store_;
  std::string address_;
};

// Connects to an etcd store (rendezvous/etcd_store.hpp) within `timeout`, for torch.
c10::intrusive_ptr<c10d::Store> connect_etcd_for_torch(const std::string& address,
                                                       const std::string& job_token,
                                                       std::chrono::milliseconds timeout);

// The Canopy store behind `store` when it is a CanopyC10dStore under zero or more c10d PrefixStores, with
// the same prefixes as Canopy PrefixStores; nullptr for any other store.
std::shared_ptr<canopy::Store> canopy_store_behind(const c10::intrusive_ptr<c10d::Store>& store);

}  // namespace canopy::pytorch
