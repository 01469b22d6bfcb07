// TfIdfVectorizer on the reference backend: attributes far past what a row or the pool allows
// (an n-gram length of 2^40, a skip count of 2^62) count exactly what the tight bounds count,
// and return at once instead of looping over every length and skip they name.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "backends/reference/reference_backend.h"
#include "cpu_one_node_graph.h"

namespace peregrine {
namespace {

using cpu::testing::int_attr;
using cpu::testing::ints_attr;
using cpu::testing::OneNodeGraph;
using cpu::testing::string_attr;

Tensor counts(int64_t max_gram, int64_t max_skip) {
  Tensor x = Tensor::zeros(DType::kInt64, {2, 6});
  const int64_t items[] = {2, 3, 5, 4, 2, 3, 4, 5, 4, 2, 3, 5};
  std::copy(std::begin(items), std::end(items), x.data<int64_t>());
  // Pool: 1-grams {2, 3, 4, 5}, 2-grams {(2, 3), (5, 4), (4, 2)}.
  OneNodeGraph g(
      "TfIdfVectorizer", {{"X", x}}, {false},
      {int_attr("min_gram_length", 1), int_attr("max_gram_length", max_gram),
       int_attr("max_skip_count", max_skip), string_attr("mode", "TF"),
       ints_attr("ngram_counts", {0, 4}), ints_attr("ngram_indexes", {0, 1, 2, 3, 4, 5, 6}),
       ints_attr("pool_int64s", {2, 3, 4, 5, 2, 3, 5, 4, 4, 2})},
      "", 9);
  return g.run(reference_backend(), 1, nullptr);
}

TEST(ReferenceTfIdf, HugeLengthAndSkipCountAsTheirBounds) {
  const Tensor want = counts(2, 4);  // 2-grams, every gap a 6-item row allows
  const Tensor got = counts(int64_t{1} << 40, int64_t{1} << 62);
  ASSERT_EQ(got.shape(), want.shape());
  for (int64_t i = 0; i < want.numel(); ++i)
    EXPECT_EQ(got.data<float>()[i], want.data<float>()[i]) << "at " << i;
  // Row 0 (2 3 5 4 2 3): 2-gram (2, 3) at gaps 0 (twice) and 3 (items 0 and 5).
  EXPECT_EQ(want.data<float>()[4], 3.0f);
}

}  // namespace
}  // namespace peregrine
