// SHA-256 (FIPS 180-4): identifies the exact model file a run measured.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include "peregrine/status.h"

namespace peregrine {

// Incremental hasher: update() any number of times, then hex_digest() once.
class Sha256 {
 public:
  Sha256();
  void update(const void* data, size_t size);
  void update(const std::string& text) { update(text.data(), text.size()); }
  std::array<uint8_t, 32> digest();  // finalizes; the hasher must not be updated afterwards
  std::string hex_digest();          // lower-case, 64 characters

 private:
  void compress(const uint8_t block[64]);

  std::array<uint32_t, 8> state_;
  uint8_t buffer_[64];
  size_t buffered_ = 0;       // bytes waiting in buffer_
  uint64_t total_bytes_ = 0;  // message length so far
};

std::string sha256_hex(const std::string& data);
// Hashes a file in chunks (models can be gigabytes). Errors name the path.
Expected<std::string> sha256_file(const std::string& path);

}  // namespace peregrine
