// Shape rules of the matmul family that the ONNX node tests barely reach:
// numpy MatMul promotion and Einsum's implicit output, ellipses and errors.
#include "ops/matmul_util.h"

#include <gtest/gtest.h>

namespace peregrine {
namespace {

TEST(MatMulShape, PromotesOneDimensionalOperands) {
  EXPECT_EQ(*matmul_output_shape({4}, {4}), Shape{});
  EXPECT_EQ(*matmul_output_shape({4}, {4, 3}), (Shape{3}));
  EXPECT_EQ(*matmul_output_shape({2, 3, 4}, {4}), (Shape{2, 3}));
}

TEST(MatMulShape, BroadcastsBatchDims) {
  EXPECT_EQ(*matmul_output_shape({3, 1, 2, 4}, {5, 4, 3}), (Shape{3, 5, 2, 3}));
  EXPECT_EQ(*matmul_output_shape({-1, 2, 4}, {4, 3}), (Shape{-1, 2, 3}));
}

TEST(MatMulShape, RejectsMismatches) {
  EXPECT_FALSE(matmul_output_shape({2, 3}, {4, 5}).is_ok());
  EXPECT_FALSE(matmul_output_shape({2, 2, 3}, {3, 3, 5}).is_ok());
  EXPECT_FALSE(matmul_output_shape({}, {3}).is_ok());
}

// Output shape of an equation for the given inputs.
Shape einsum_shape(const std::string& equation, const std::vector<Shape>& inputs) {
  auto spec = parse_einsum(equation, inputs);
  EXPECT_TRUE(spec.is_ok()) << spec.status().message();
  Shape out;
  if (!spec.is_ok()) return out;
  for (int l : spec->output_labels) out.push_back(spec->label_sizes[static_cast<size_t>(l)]);
  return out;
}

TEST(Einsum, ImplicitOutputIsSortedLettersUsedOnce) {
  EXPECT_EQ(einsum_shape("ij,jk", {{2, 3}, {3, 4}}), (Shape{2, 4}));
  EXPECT_EQ(einsum_shape("ba", {{2, 3}}), (Shape{3, 2}));
  EXPECT_EQ(einsum_shape("ii", {{3, 3}}), Shape{});
  // Upper case sorts before lower case, as in numpy.
  EXPECT_EQ(einsum_shape("bA", {{2, 3}}), (Shape{3, 2}));
}

TEST(Einsum, EllipsisBroadcastsAndLeadsImplicitOutput) {
  EXPECT_EQ(einsum_shape("...ij,...jk->...ik", {{2, 1, 3, 4}, {5, 4, 2}}), (Shape{2, 5, 3, 2}));
  EXPECT_EQ(einsum_shape("i...", {{3, 4, 5}}), (Shape{4, 5, 3}));
  EXPECT_EQ(einsum_shape(" b i j , b j k -> b i k ", {{2, 3, 4}, {2, 4, 5}}), (Shape{2, 3, 5}));
}

TEST(Einsum, RejectsBadEquations) {
  EXPECT_FALSE(parse_einsum("ij,jk", {{2, 3}}).is_ok());          // too few inputs
  EXPECT_FALSE(parse_einsum("ijk", {{2, 3}}).is_ok());            // rank mismatch
  EXPECT_FALSE(parse_einsum("ij->k", {{2, 3}}).is_ok());          // unknown output label
  EXPECT_FALSE(parse_einsum("ij->ii", {{2, 3}}).is_ok());         // repeated output label
  EXPECT_FALSE(parse_einsum("ij,jk", {{2, 3}, {4, 5}}).is_ok());  // size mismatch
  EXPECT_FALSE(parse_einsum("i..j", {{2, 3}}).is_ok());           // broken ellipsis
  EXPECT_FALSE(parse_einsum("......", {{2, 3}}).is_ok());         // two ellipses
  EXPECT_FALSE(parse_einsum("ij->j->i", {{2, 3}}).is_ok());       // two arrows
}

}  // namespace
}  // namespace peregrine
