// SHA-256 against the FIPS 180-4 example vectors (NIST CSRC "Examples with
// Intermediate Values") and padding-boundary lengths checked with Python's hashlib.
#include "lab/sha256.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace peregrine {
namespace {

TEST(Sha256, FipsVectors) {
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(
      sha256_hex(
          "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqr"
          "lmnopqrsmnopqrstnopqrstu"),
      "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
  EXPECT_EQ(sha256_hex(std::string(1000000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

std::string counting_bytes(size_t n) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = char(i);
  return s;
}

// Lengths around the 56-byte padding boundary and the 64-byte block size.
TEST(Sha256, PaddingBoundaries) {
  const std::pair<size_t, const char*> expected[] = {
      {55, "463eb28e72f82e0a96c0a4cc53690c571281131f672aa229e0d45ae59b598b59"},
      {56, "da2ae4d6b36748f2a318f23e7ab1dfdf45acdc9d049bd80e59de82a60895f562"},
      {63, "29af2686fd53374a36b0846694cc342177e428d1647515f078784d69cdb9e488"},
      {64, "fdeab9acf3710362bd2658cdc9a29e8f9c757fcf9811603a8c447cd1d9151108"},
      {65, "4bfd2c8b6f1eec7a2afeb48b934ee4b2694182027e6d0fc075074f2fabb31781"},
      {119, "da18797ed7c3a777f0847f429724a2d8cd5138e6ed2895c3fa1a6d39d18f7ec6"},
      {120, "f52b23db1fbb6ded89ef42a23ce0c8922c45f25c50b568a93bf1c075420bbb7c"},
  };
  for (const auto& [length, hex] : expected)
    EXPECT_EQ(sha256_hex(counting_bytes(length)), hex) << length;
}

TEST(Sha256, IncrementalEqualsOneShot) {
  std::string data = counting_bytes(1000);
  for (size_t chunk : {1, 3, 63, 64, 65, 500}) {
    Sha256 hasher;
    for (size_t at = 0; at < data.size(); at += chunk) hasher.update(data.substr(at, chunk));
    EXPECT_EQ(hasher.hex_digest(), sha256_hex(data)) << "chunk " << chunk;
  }
}

TEST(Sha256, HashesFiles) {
  std::string name = "peregrine_sha256_test_" + std::to_string(getpid()) + ".bin";
  std::string path = (std::filesystem::temp_directory_path() / name).string();
  {
    std::ofstream out(path, std::ios::binary);
    out << "abc";
  }
  auto sha = sha256_file(path);
  ASSERT_TRUE(sha.is_ok()) << sha.status().message();
  EXPECT_EQ(*sha, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  std::filesystem::remove(path);
  auto missing = sha256_file(path);
  ASSERT_FALSE(missing.is_ok());
  EXPECT_NE(missing.status().message().find(path), std::string::npos);
}

}  // namespace
}  // namespace peregrine
