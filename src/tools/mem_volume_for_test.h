// Test-only: a formatted volume on the in-memory engine and store, shared by the gc and
// fsck tests.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <string>

#include "meta/kv_engine.h"
#include "meta/meta.h"
#include "object/object_store.h"

namespace tierfs::testing {

class MemVolumeTest : public ::testing::Test {
 protected:
  static constexpr uint32_t kBlock = 64 << 10;

  void SetUp() override {
    static std::atomic<int> n{0};
    vol_ = "mem_volume_" + std::to_string(n++);
    auto engine = OpenKvEngine("mem://" + vol_);
    ASSERT_TRUE(engine.ok());
    FormatRecord rec;
    rec.name = vol_;
    rec.storage = "mem";
    rec.bucket = vol_;
    rec.block_size = kBlock;
    ASSERT_TRUE(Meta::Format(engine->get(), rec, false).ok());
    auto m = Meta::Open(std::move(*engine));
    ASSERT_TRUE(m.ok());
    meta_ = std::move(*m);
    auto store = CreateObjectStore("mem", vol_);
    ASSERT_TRUE(store.ok());
    store_ = std::move(*store);
  }

  std::string vol_;
  std::unique_ptr<Meta> meta_;
  std::unique_ptr<ObjectStore> store_;
};

}  // namespace tierfs::testing
